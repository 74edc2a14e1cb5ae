"""GpuEcsService (another model server's container) in a bare stack: no settings, no app stacks; its
own props checks."""

from __future__ import annotations

import pytest
from aws_cdk import aws_ec2 as ec2, aws_ecs as ecs

from constructs_lib import GpuCapacity, GpuEcsService, GpuEcsServiceProps, LoadBalancing, PropsError
from contracts.bridge_env import BridgeEnvironment
from tests.unit.constructs_lib.construct_kit import bare_stack, only


def build(**overrides):
    stack = bare_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    props = {
        "service_name": "tts",
        "vpc": vpc,
        "image": ecs.ContainerImage.from_registry("public.ecr.aws/x/tts:1"),
        "capacity": GpuCapacity("g6e.xlarge", min_tasks=1, max_tasks=2),
        "requests_per_target": 30,
        "gpu_namespace": "Team/Tts/Gpu",
        "load_balancing": LoadBalancing(require_token=False),
        **overrides,
    }
    GpuEcsService(stack, "Tts", GpuEcsServiceProps(**props))
    return stack


def test_another_model_server_needs_its_scaling_and_namespace_and_no_token():
    with pytest.raises(PropsError) as caught:
        build(
            requests_per_target=None,
            gpu_namespace=None,
            load_balancing=LoadBalancing(),
            container_port=70000,
            health_path="health",
            caller_cidrs=["10.0.0.0/33"],
        )
    assert caught.value.problems == [
        "container_port=70000: must be a TCP port 1-65535 (the port the container listens on; "
        "with awsvpc networking every port of the task's own interface is free)",
        "health_path='health': must be a URL path starting with '/' (e.g. '/ping'), at most 1024 "
        "characters, without spaces or a query string ('?')",
        "caller_cidrs='10.0.0.0/33': must be an IPv4 CIDR block such as '10.80.0.0/16' (host bits "
        "zero)",
        "requests_per_target=null: must be a positive number of requests per task per minute "
        "without bridge",
        "gpu_namespace=null: must name the GPU metrics' namespace without bridge",
        "load_balancing='require_token=True': needs bridge: only the bridge checks the bearer "
        "token",
    ]
    assert str(caught.value).startswith("GpuEcsService Tts: invalid props:")


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
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    isolated = sorted(r["Ref"] for r in network["Subnets"])
    assert len(isolated) == 2 and all("Isolated" in ref for ref in isolated)
    _, policy = only(stack, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["TargetValue"] == 30
    metric = tracking["PredefinedMetricSpecification"]
    assert metric["PredefinedMetricType"] == "ALBRequestCountPerTarget"


def test_another_model_servers_container_has_no_bridge_parts():
    """Its container is its own: no environment of ours but CDK's region, no secret, no health
    check besides the load balancer's, no host volume; the listener forwards every path."""
    stack = build()
    _, task = only(stack, "AWS::ECS::TaskDefinition")
    (container,) = task["Properties"]["ContainerDefinitions"]
    assert container["Name"] == "Model"
    assert container["Environment"] == [{"Name": "AWS_REGION", "Value": "us-east-1"}]
    assert {"Secrets", "HealthCheck", "MountPoints"}.isdisjoint(container)
    assert "Volumes" not in task["Properties"]
    _, rule = only(stack, "AWS::ElasticLoadBalancingV2::ListenerRule")
    assert rule["Properties"]["Conditions"] == [
        {"Field": "path-pattern", "PathPatternConfig": {"Values": ["/*"]}}
    ]


def test_the_bridges_environment_is_no_prop_of_another_model_server():
    """The bridge container's environment belongs to the bridge add-on
    (GpuEcsServiceWithBridgeProps): the service's props have no such field."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'environment'"):
        build(environment=BridgeEnvironment(max_streams=2))
