"""config/sonic.py: the Marketplace package's instance types and Region, and Sonic on ECS (the
licensed image, its port, health path and scaling)."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from tests.app.variants import SONIC_ECS_IMAGE as IMAGE
from tests.conftest import cdk_json_context
from tests.unit.config.conftest import one_problem, problems_for

OTHER_REGION_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:model-package/sonic36-abc"


def test_sonic_instance_type_must_be_supported_by_the_package():
    problem = one_problem(**{"sonic.instance_type": "ml.g6.4xlarge"})
    assert problem.startswith(
        "sonic.instance_type='ml.g6.4xlarge': the Sonic 3.6 model package supports"
    )
    assert "ml.g6e.xlarge or larger" in problem and "ml.p5en.48xlarge" in problem


@pytest.mark.parametrize(
    "instance_type",
    [
        "ml.g6e.xlarge",
        "ml.g6e.48xlarge",
        "ml.g7e.2xlarge",
        "ml.g7.2xlarge",
        "ml.p5.48xlarge",
        "ml.p5en.48xlarge",
    ],
)
def test_sonic_supported_instance_types_are_accepted(instance_type):
    settings = load_settings({**cdk_json_context(), "sonic.instance_type": instance_type})
    assert settings.sonic.instance_type == instance_type


def test_region_without_a_known_sonic_package_needs_an_arn():
    problem = one_problem(region="eu-west-1")
    assert problem.startswith("sonic.model_package_arn=null with region='eu-west-1'")
    assert "us-east-1" in problem
    settings = load_settings(
        {**cdk_json_context(), "region": "eu-west-1", "sonic.model_package_arn": OTHER_REGION_ARN}
    )
    assert settings.sonic_model_package_arn == OTHER_REGION_ARN
    # Voxtral alone needs no Sonic ARN.
    assert (
        load_settings({**cdk_json_context(), "region": "eu-west-1", "sonic.enabled": False}).region
        == "eu-west-1"
    )


def test_model_package_arn_region_must_match_the_stack():
    problem = one_problem(**{"sonic.model_package_arn": OTHER_REGION_ARN})
    assert problem == (
        f"sonic.model_package_arn='{OTHER_REGION_ARN}': the package is in eu-west-1 but the stack "
        "deploys to us-east-1; use the package ARN for us-east-1"
    )


# --- Sonic on ECS ---------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct
# as Voxtral's, without the bridge's parts; its settings and their errors; public mode and vpc mode
# with both services on ECS.


def sonic_problems(**overrides) -> list[str]:
    """problems_for with sonic.target=ecs."""
    return problems_for(**{"sonic__target": "ecs", **overrides})


def test_the_image_is_required_and_must_be_in_ecr_of_the_region():
    assert sonic_problems() == [
        "sonic.image_uri=null: must be set with sonic.target='ecs': the Sonic container your "
        "Cartesia licence provides, in ECR (it is not public; README 'Sonic on ECS')"
    ]
    (problem,) = sonic_problems(sonic__image_uri="cartesia/sonic:3.6")
    assert problem.startswith("sonic.image_uri='cartesia/sonic:3.6': must be a private ECR image")
    (problem,) = sonic_problems(sonic__image_uri=IMAGE.replace("us-east-1", "eu-west-1"))
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_outside_1_to_65535_fails(port):
    assert sonic_problems(sonic__image_uri=IMAGE, sonic__container_port=port) == [
        f"sonic.container_port={port}: must be a TCP port 1-65535 (the port the container listens "
        "on; with awsvpc networking every port of the task's own interface is free)"
    ]


@pytest.mark.parametrize("path", ["ping", "/ping?deep=1", "/my path", "", "/" + "a" * 1024])
def test_a_health_path_not_starting_with_a_slash_or_with_a_query_fails(path):
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__health_path=path)
    if path == "":
        assert problems == [
            "sonic.health_path='': must be set: this setting has no 'unset' value (null is allowed "
            "for optional settings only)"
        ]
    else:
        assert problems == [
            f"sonic.health_path={path!r}: must be a URL path starting with '/' (e.g. '/ping'), at "
            "most 1024 characters, without spaces or a query string ('?')"
        ]


def test_good_ports_and_paths_pass():
    for port, path in [(1, "/"), (65535, "/v1/health"), (443, "/healthz")]:
        settings = load_settings(
            {
                **cdk_json_context(),
                "sonic.target": "ecs",
                "sonic.image_uri": IMAGE,
                "sonic.container_port": port,
                "sonic.health_path": path,
            }
        )
        assert (settings.sonic.container_port, settings.sonic.health_path) == (port, path)


def test_instance_type_scaling_metric_and_task_range_are_checked():
    problems = sonic_problems(
        sonic__image_uri=IMAGE,
        sonic__ecs_instance_type="m5.large",
        sonic__scaling_metric="concurrent_requests",
        sonic__min_instances=3,
    )
    assert [p.split(":")[0] for p in problems] == [
        "sonic.max_instances=2",
        "sonic.ecs_instance_type='m5.large'",
        "sonic.scaling_metric='concurrent_requests'",
    ]
    assert problems[0] == "sonic.max_instances=2: must be at least sonic.min_instances=3"
    assert problems[1].startswith("sonic.ecs_instance_type='m5.large': has no NVIDIA GPU")
    assert problems[2].startswith(
        "sonic.scaling_metric='concurrent_requests': must be 'invocations_per_instance' "
        "with sonic.target='ecs'"
    )


def test_sagemaker_only_checks_do_not_apply_on_ecs():
    # No Marketplace package in eu-west-1: a problem for SageMaker, none for the licensed container
    # on ECS.
    image = IMAGE.replace("us-east-1", "eu-west-1")
    settings = load_settings(
        {
            **cdk_json_context(),
            "region": "eu-west-1",
            "voxtral.enabled": False,
            "sonic.target": "ecs",
            "sonic.image_uri": image,
        }
    )
    assert settings.sonic_on_ecs and settings.uses_ecs
    capacity = settings.sonic.ecs_capacity(settings.ecs)
    assert (capacity.instance_type, capacity.min_tasks, capacity.max_tasks) == ("g6e.xlarge", 1, 2)
    assert settings.sonic.ecs_load_balancing(settings.ecs).internet_facing is False


def test_a_type_the_sonic_package_does_not_support_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        "sonic.instance_pools='ml.g6.4xlarge': the Sonic 3.6 model package supports ml.g6e.xlarge "
        "or larger, ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and "
        "ml.p5en.48xlarge"
    ]
