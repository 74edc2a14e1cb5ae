"""GpuEcsServiceWithBridge (the bridge image) in a bare stack: no settings, no app stacks; its own
props checks, its environment, and what it adds to the service it is built over."""

from __future__ import annotations

import json

import pytest
from aws_cdk import aws_ec2 as ec2, aws_ecs as ecs, aws_s3 as s3
from aws_cdk.assertions import Template

from constructs_lib import (
    GpuCapacity,
    GpuEcsService,
    GpuEcsServiceProps,
    GpuEcsServiceWithBridge,
    GpuEcsServiceWithBridgeProps,
    LoadBalancing,
    PropsError,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from contracts.bridge_env import OFFLINE_ENVIRONMENT, BridgeEnvironment
from tests.unit.constructs_lib.construct_kit import bare_stack, only, resources

IMAGE = "public.ecr.aws/x/bridge:1"


def build(**overrides):
    stack = bare_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    props = {
        "service_name": "stt",
        "vpc": vpc,
        "image": ecs.ContainerImage.from_registry(IMAGE),
        "capacity": GpuCapacity("g5.xlarge", min_tasks=1, max_tasks=2),
        "model_bucket": s3.Bucket.from_bucket_name(stack, "Models", "my-models"),
        "model_prefix": "w/v1/",
        "bridge": BridgeAlarmThresholds(namespace="Team/Bridge", stream_cap=4),
        "streams_target": 3.0,
        **overrides,
    }
    GpuEcsServiceWithBridge(stack, "Stt", GpuEcsServiceWithBridgeProps(**props))
    return stack


def test_builds_in_a_bare_stack_without_a_token_when_not_required():
    stack = build(load_balancing=LoadBalancing(require_token=False), drain_s=50)
    assert not resources(stack, "AWS::SecretsManager::Secret")
    _, task = only(stack, "AWS::ECS::TaskDefinition")
    (c,) = task["Properties"]["ContainerDefinitions"]
    assert "Secrets" not in c and c["StopTimeout"] == 60
    _, group = only(stack, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {"Key": "deregistration_delay.timeout_seconds", "Value": "50"} in group["Properties"][
        "TargetGroupAttributes"
    ]


def test_every_bad_prop_is_reported_at_once():
    with pytest.raises(PropsError) as caught:
        build(
            capacity=GpuCapacity("c5.xlarge", min_tasks=3, max_tasks=2),
            model_prefix="/w",
            load_balancing=LoadBalancing(internet_facing=True, require_token=False),
            streams_target=0,
            drain_s=200,
        )
    problems = caught.value.problems
    assert problems[0].startswith("instance_type='c5.xlarge': has no NVIDIA GPU")
    assert "max_tasks=2: must be at least min_tasks=3" in problems
    assert any(
        p.startswith("certificate_arn=null: must be set when internet_facing=true")
        for p in problems
    )
    assert any(p.startswith("require_token=false: must be true") for p in problems)
    assert any(p.startswith("model_prefix='/w'") for p in problems)
    assert any(p.startswith("streams_target=0") for p in problems)
    assert any(
        p.startswith("drain_s=200: a drain of 200 s needs a stopTimeout of 210 s") for p in problems
    )
    assert str(caught.value).startswith("GpuEcsServiceWithBridge Stt: invalid props:")


def test_the_bridge_scales_and_alarms_on_its_own_so_it_refuses_the_request_props():
    with pytest.raises(PropsError) as caught:
        build(requests_per_target=30, response_time_p90_ms=500)
    assert caught.value.problems == [
        "requests_per_target=30: must be left unset with bridge: the service scales on "
        "streams_target",
        "response_time_p90_ms=500: must be left unset with bridge: the service alarms on the "
        "bridge's own latency",
    ]


def test_the_bridges_environment_is_the_given_one_then_what_the_construct_sets_in_that_order():
    """The stack's typed environment first, then the construct's own variables (the weights' S3 URI
    and host copy, the service's name and variant, its drain and idle timeout), as the task
    definition has always listed them."""
    given = BridgeEnvironment(vllm_max_num_seqs=4, metrics_namespace="Team/Bridge", offline=True)
    stack = build(
        environment=given,
        drain_s=20,
        bridge_idle_timeout_s=90,
        load_balancing=LoadBalancing(require_token=False),
    )
    _, task = only(stack, "AWS::ECS::TaskDefinition")
    (container,) = task["Properties"]["ContainerDefinitions"]
    env = {item["Name"]: item["Value"] for item in container["Environment"]}
    assert list(env)[:-1] == [
        "SM_VLLM_MAX_NUM_SEQS",
        "METRICS_NAMESPACE",
        *OFFLINE_ENVIRONMENT,
        "MODEL_S3_URI",
        "MODEL_CACHE_DIR",
        "ENDPOINT_NAME",
        "VARIANT_NAME",
        "DRAIN_S",
        "IDLE_TIMEOUT_S",
    ]
    assert list(env)[-1] == "AWS_REGION"  # CDK's own, last
    assert (
        env["MODEL_CACHE_DIR"],
        env["ENDPOINT_NAME"],
        env["VARIANT_NAME"],
        env["DRAIN_S"],
        env["IDLE_TIMEOUT_S"],
    ) == ("/opt/weights-cache", "stt", "ecs", "20", "90")
    read = BridgeEnvironment.from_env(env)  # what the bridge in the task reads
    assert (read.max_streams, read.drain_s, read.idle_timeout_s, read.offline) == (4, 20, 90, True)


def test_the_environment_leaves_the_constructs_variables_to_it_and_is_one_the_bridge_takes():
    with pytest.raises(PropsError) as caught:
        build(environment=BridgeEnvironment(endpoint_name="other", drain_s=5, max_streams=0))
    assert caught.value.problems == [
        "environment.endpoint_name='other': must be left unset: the construct sets ENDPOINT_NAME "
        "from its props",
        "environment.drain_s=5: must be left unset: the construct sets DRAIN_S from its props",
        "environment='BridgeEnvironment(...)': the bridge would refuse it: MAX_STREAMS='0' must be "
        "at least 1",
    ]


def test_the_add_on_keeps_every_resource_of_the_service_and_adds_the_bridges():
    """Built over GpuEcsService with the same props: the same resources under the same logical
    ids, but the requests' scaling policy and listener rule, which the bridge's replace; plus the
    bridge's task role policy and alarms. The GPU metrics' namespace defaults to the bridge's."""
    shared = {
        "service_name": "stt",
        "capacity": GpuCapacity("g5.xlarge", min_tasks=1, max_tasks=2),
        "load_balancing": LoadBalancing(require_token=False),
    }
    service_stack = bare_stack()
    GpuEcsService(
        service_stack,
        "Stt",
        GpuEcsServiceProps(
            vpc=ec2.Vpc(service_stack, "Vpc", max_azs=2),
            image=ecs.ContainerImage.from_registry(IMAGE),
            requests_per_target=30,
            gpu_namespace="Team/Bridge/Gpu",
            **shared,
        ),
    )
    bridge_stack = build(**shared)
    service_ids, bridge_ids = _ids(service_stack), _ids(bridge_stack)
    assert service_ids - bridge_ids == {
        "SttLoadBalancerHttpRequestsRule",
        "SttServiceTaskCountTargetRequests",
    }
    assert bridge_ids - service_ids == {
        "SttLoadBalancerHttpStreamsRule",
        "SttServiceTaskCountTargetActiveStreams",
        "SttTaskTaskRoleDefaultPolicy",
        "SttAlarmActiveStreamsNearCap",
        "SttAlarmStreamsRejected",
        "SttAlarmTaskProtectionErrors",
        "SttAlarmTimeToFirstDeltaP90",
        "SttAlarmUpstreamErrors",
    }
    # The weights' directory before the CloudWatch agent, whose GPU namespace is the bridge's.
    service_lines, bridge_lines = _user_data(service_stack), _user_data(bridge_stack)
    assert bridge_lines == [
        *service_lines[:1],
        "mkdir -p /var/lib/realtime-voice/weights",
        *service_lines[1:],
    ]
    assert service_lines[1] == "dnf install -y amazon-cloudwatch-agent"
    config = json.loads("\n".join(bridge_lines).split("<<'EOF'\n")[1].split("\nEOF")[0])
    assert config["metrics"]["namespace"] == "Team/Bridge/Gpu"


def _ids(stack) -> set[str]:
    """Logical ids of the stack's resources without their hash."""
    return {logical_id[:-8] for logical_id in Template.from_stack(stack).to_json()["Resources"]}


def _user_data(stack) -> list[str]:
    """The launch template's user data, line by line."""
    _, template = only(stack, "AWS::EC2::LaunchTemplate")
    parts = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
    return "".join(part if isinstance(part, str) else "<token>" for part in parts).split("\n")
