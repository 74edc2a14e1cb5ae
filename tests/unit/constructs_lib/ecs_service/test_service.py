"""GpuEcsService in a bare stack: no settings, no app stacks; its own props checks."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2, aws_ecs as ecs, aws_s3 as s3

from constructs_lib import GpuCapacity, GpuEcsService, GpuEcsServiceProps, LoadBalancing, PropsError
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from contracts.bridge_env import OFFLINE_ENVIRONMENT, BridgeEnvironment
from tests.unit.constructs_lib.construct_kit import bare_stack, only, resources


def build(**overrides):
    stack = bare_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    props = {
        "service_name": "stt",
        "vpc": vpc,
        "image": ecs.ContainerImage.from_registry("public.ecr.aws/x/bridge:1"),
        "capacity": GpuCapacity("g5.xlarge", min_tasks=1, max_tasks=2),
        "model_bucket": s3.Bucket.from_bucket_name(stack, "Models", "my-models"),
        "model_prefix": "w/v1/",
        "bridge": BridgeAlarmThresholds(namespace="Team/Bridge", stream_cap=4),
        "streams_target": 3.0,
        **overrides,
    }
    GpuEcsService(stack, "Stt", GpuEcsServiceProps(**props))
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
    assert str(caught.value).startswith("GpuEcsService Stt: invalid props:")


def test_another_model_server_needs_its_scaling_and_namespace_and_no_token():
    with pytest.raises(PropsError) as caught:
        build(
            bridge=None,
            model_bucket=None,
            model_prefix=None,
            streams_target=None,
            container_port=70000,
            health_path="health",
            caller_cidrs=["10.0.0.0/33"],
        )
    assert caught.value.problems == [
        "container_port=70000: must be a TCP port 1-65535 (the port the container listens on; "
        "with awsvpc networking every port of the task's own interface is free)",
        "health_path='health': must be a URL path starting with '/' (e.g. '/ping'), at most 1024 "
        "characters, without spaces or a query string ('?')",
        "caller_cidrs='10.0.0.0/33': must be an IPv4 CIDR block such as '10.80.0.0/16' (host "
        "bits zero)",
        "requests_per_target=null: must be a positive number of requests per task per minute "
        "without bridge",
        "gpu_namespace=null: must name the GPU metrics' namespace without bridge",
        "load_balancing='require_token=True': needs bridge: only the bridge checks the bearer "
        "token",
    ]


def test_another_model_server_in_given_subnets():
    stack = bare_stack()
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=2,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )
    GpuEcsService(
        stack,
        "Tts",
        GpuEcsServiceProps(
            service_name="tts",
            vpc=vpc,
            image=ecs.ContainerImage.from_registry("public.ecr.aws/x/tts:1"),
            capacity=GpuCapacity("g6e.xlarge", min_tasks=1, max_tasks=2),
            container_port=9000,
            health_path="/ready",
            requests_per_target=30,
            gpu_namespace="Team/Tts/Gpu",
            load_balancing=LoadBalancing(require_token=False),
            subnets=vpc.isolated_subnets,
            caller_cidrs=["192.168.0.0/24"],
        ),
    )
    _, group = only(stack, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert (group["Properties"]["Port"], group["Properties"]["HealthCheckPath"]) == (9000, "/ready")
    _, service = only(stack, "AWS::ECS::Service")
    isolated = sorted(
        r["Ref"]
        for r in service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    )
    assert len(isolated) == 2 and all("Isolated" in ref for ref in isolated)
    _, policy = only(stack, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 30
    assert (
        tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
        == "ALBRequestCountPerTarget"
    )


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
    with pytest.raises(
        PropsError,
        match=r"environment='BridgeEnvironment\(\.\.\.\)': needs "
        r"bridge: it is the bridge container's environment",
    ):
        build(
            bridge=None,
            model_bucket=None,
            model_prefix=None,
            streams_target=None,
            requests_per_target=30,
            gpu_namespace="Team/Tts/Gpu",
            load_balancing=LoadBalancing(require_token=False),
            environment=BridgeEnvironment(max_streams=2),
        )
