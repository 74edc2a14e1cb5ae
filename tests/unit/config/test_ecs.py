"""config/ecs.py: the ECS target (voxtral.target=ecs, ecs.*): parsed (choices spelled as users write
them), checked, and every bad value named."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from tests.conftest import cdk_json_context
from tests.unit.config.conftest import problems_for


def test_fp8_kv_cache_is_refused_on_the_ecs_type_too():
    problems = problems_for(voxtral__target="ecs", voxtral__kv_cache_dtype="fp8")
    assert any(
        p.startswith("voxtral.kv_cache_dtype='fp8' with ecs.instance_type='g6.xlarge': NVIDIA L4")
        for p in problems
    )


# ---- the ECS target (voxtral.target=ecs, ecs.*): parsed, checked, and every bad value named ------

CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def ecs_problems(**overrides) -> list[str]:
    """problems_for with voxtral.target=ecs."""
    return problems_for(**{"voxtral__target": "ecs", **overrides})


def test_defaults_target_sagemaker_and_an_internal_two_task_service():
    settings = load_settings(cdk_json_context())
    assert settings.voxtral.target == "sagemaker"
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (
        capacity.instance_type,
        capacity.spot,
        capacity.min_tasks,
        capacity.max_tasks,
        capacity.single_az,
    ) == ("g6.xlarge", False, 2, 4, False)
    assert (lb.internet_facing, lb.certificate_arn, lb.require_token) == (False, None, True)


def test_ecs_settings_are_not_checked_for_the_sagemaker_target():
    settings = load_settings({**cdk_json_context(), "ecs.instance_type": "m5.large"})
    assert settings.ecs.instance_type == "m5.large"


def test_command_line_values_convert():
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.target": "ecs",
            "ecs.instance_type": "g6e.2xlarge",
            "ecs.capacity": "spot",
            "ecs.min_tasks": "3",
            "ecs.max_tasks": "8",
            "ecs.placement": "single_az",
            "ecs.load_balancer": "internet_facing",
            "ecs.certificate_arn": CERT,
        }
    )
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (capacity.spot, capacity.min_tasks, capacity.max_tasks, capacity.single_az) == (
        True,
        3,
        8,
        True,
    )
    assert (lb.internet_facing, lb.https, lb.require_token) == (True, True, True)


@pytest.mark.parametrize("instance_type", ["m5.large", "g4ad.xlarge", "inf2.xlarge"])
def test_instance_type_without_an_nvidia_gpu_fails(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(f"ecs.instance_type='{instance_type}': has no NVIDIA GPU")
    assert "g6.*" in problem and "g6e.*" in problem


@pytest.mark.parametrize("instance_type", ["g5g.xlarge", "g6f.xlarge"])
def test_an_nvidia_gpu_this_target_cannot_use_is_named_as_such(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(
        f"ecs.instance_type='{instance_type}': has an NVIDIA GPU this target cannot use"
    )
    assert "Arm hosts and fractional GPUs" in problem


def test_sagemaker_spelling_and_unknown_types_are_named():
    assert ecs_problems(ecs__instance_type="ml.g6.xlarge") == [
        "ecs.instance_type='ml.g6.xlarge': must be an EC2 instance type without 'ml.' (e.g. "
        "'g6.xlarge')"
    ]
    (problem,) = ecs_problems(ecs__instance_type="g6.huge")
    assert problem.startswith("ecs.instance_type='g6.huge': not an EC2 instance type")


def test_min_above_max_fails():
    assert ecs_problems(ecs__min_tasks=5) == ["ecs.max_tasks=4: must be at least ecs.min_tasks=5"]
    assert ecs_problems(ecs__min_tasks=0)[0].startswith("ecs.min_tasks=0: must be at least 1")


def test_internet_facing_needs_a_certificate_and_the_token():
    assert ecs_problems(ecs__load_balancer="internet_facing", ecs__require_token=False) == [
        "ecs.certificate_arn=null: must be set when ecs.load_balancer='internet_facing': an "
        "internet-facing load "
        "balancer listens on HTTPS only (the token must not cross the internet in clear text)",
        "ecs.require_token=false: must be true when ecs.load_balancer='internet_facing': without "
        "SigV4 the bearer token is what keeps strangers off the GPUs",
    ]
    (problem,) = ecs_problems(
        ecs__load_balancer="internet_facing", ecs__certificate_arn=CERT, ecs__require_token=False
    )
    assert problem.startswith("ecs.require_token=false")


def test_certificate_must_be_an_acm_arn_of_the_region():
    (problem,) = ecs_problems(ecs__certificate_arn=CERT.replace("us-east-1", "eu-west-1"))
    assert "is in eu-west-1 but the stack deploys to us-east-1" in problem
    (problem,) = ecs_problems(ecs__certificate_arn="my-cert")
    assert problem.startswith("ecs.certificate_arn='my-cert': must be an ACM certificate ARN")


def test_gpu_memory_of_the_ecs_instance_is_checked():
    # An explicit stream cap above what one T4 (16 GiB) holds at 45000 tokens (3 streams).
    (problem,) = ecs_problems(ecs__instance_type="g4dn.xlarge", voxtral__max_num_seqs=4)
    assert problem.startswith(
        "ecs.instance_type='g4dn.xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs=4: one NVIDIA T4 (16 GiB) holds the weights and KV cache for at "
        "most 3 sequence(s)"
    )
    # auto on a GPU that holds no stream at all.
    (problem,) = ecs_problems(
        ecs__instance_type="g4dn.xlarge",
        voxtral__gpu_memory_utilization=0.6,
        voxtral__alarm_gpu_memory_percent=70,
    )
    assert "for at most 0 sequence(s)" in problem


def test_unknown_choice_lists_the_allowed_ones():
    assert ecs_problems(ecs__capacity="reserved") == [
        "ecs.capacity='reserved': must be one of on_demand, spot"
    ]
    assert ecs_problems(voxtral__target="eks") == [
        "voxtral.target='eks': must be one of sagemaker, ecs"
    ]
