"""The ECS target's lifecycle with the pinned CDK CLI against moto's server: deploy
(voxtral.target=ecs), update (another instance type and another image), destroy, leaving nothing
behind; in public mode (the stack's own VPC) and in network.mode=vpc (the Foundation stack's private
network with the ECS endpoints).

moto creates the ECS cluster, task definitions, services, EC2 networking, launch templates, Auto
Scaling groups and load balancers; what it skips (alarms, dashboards, Application Auto Scaling, the
capacity provider association, custom resources) is asserted at template level in
tests/app/test_voxtral_ecs_stack.py and tests/unit/constructs_lib/ecs_service/ (test_service.py,
test_bridge_service.py). See test_lifecycle_deploy.py for the harness.
"""

from __future__ import annotations

import pytest

from tests.e2e.lifecycle.lifecycle_cdk import Phases, bootstrap_target, run_cdk, synthesize_assembly
from tests.e2e.lifecycle.lifecycle_moto import ACCOUNT, REGION, moto_server, port_is_closed
from tests.e2e.lifecycle.lifecycle_resources import Aws, StackView, read_stack
from tests.e2e.lifecycle.test_lifecycle_deploy import BOOTSTRAP_STACK, load_templates

pytestmark = [
    pytest.mark.lifecycle,
    pytest.mark.starts_first,  # a minute or more (tests/e2e/conftest.py)
    pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning"),
]


IMAGE_1 = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/realtime-voice-bridge:ecs-1"
IMAGE_2 = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/realtime-voice-bridge:ecs-2"
STACK = "RealtimeVoice-VoxtralEcs"


def task_definition(aws: Aws, stack) -> dict:
    arn = stack.one("AWS::ECS::TaskDefinition").physical_id
    return aws.ecs.describe_task_definition(taskDefinition=arn)["taskDefinition"]


def launch_template_data(aws: Aws, stack) -> dict:
    template_id = stack.one("AWS::EC2::LaunchTemplate").physical_id
    (version,) = aws.ec2.describe_launch_template_versions(
        LaunchTemplateId=template_id, Versions=["$Latest"]
    )["LaunchTemplateVersions"]
    return version["LaunchTemplateData"]


def check_private_network(aws: Aws, stack: StackView) -> None:
    """network.mode=vpc: the service runs in the Foundation stack's subnets, which have the ECS
    endpoints; no VPC of its own."""
    endpoints = aws.ec2.describe_vpc_endpoints()["VpcEndpoints"]
    services = sorted(e["ServiceName"].removeprefix(f"com.amazonaws.{REGION}.") for e in endpoints)
    assert services == [
        "ec2",
        "ecr.api",
        "ecr.dkr",
        "ecs",
        "ecs-agent",
        "ecs-telemetry",
        "logs",
        "monitoring",
        "s3",
        "sagemaker.runtime",
        "secretsmanager",
    ]
    (vpc_id,) = {e["VpcId"] for e in endpoints}
    group = stack.one("AWS::AutoScaling::AutoScalingGroup").physical_id
    (asg,) = aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])[
        "AutoScalingGroups"
    ]
    subnets = aws.ec2.describe_subnets(SubnetIds=asg["VPCZoneIdentifier"].split(","))["Subnets"]
    assert len(subnets) == 2 and {s["VpcId"] for s in subnets} == {vpc_id}
    assert not aws.ec2.describe_nat_gateways()["NatGateways"]


def check_deployed(aws: Aws, stack: StackView) -> dict:
    """The first deployment: the cluster, the task definition's container, the launch template, the
    internal load balancer and the stack's outputs. Returns the cluster."""
    (cluster,) = aws.ecs.describe_clusters(clusters=[stack.one("AWS::ECS::Cluster").physical_id])[
        "clusters"
    ]
    assert cluster["status"] == "ACTIVE"
    task = task_definition(aws, stack)
    (container,) = task["containerDefinitions"]
    assert container["image"] == IMAGE_1
    assert container["resourceRequirements"] == [{"value": "1", "type": "GPU"}]
    assert container["stopTimeout"] == 35
    # moto's CloudFormation drops NetworkMode (it reports "bridge"); awsvpc is asserted in
    # tests/app/test_voxtral_ecs_stack.py.
    assert launch_template_data(aws, stack)["InstanceType"] == "g6.xlarge"
    assert launch_template_data(aws, stack)["MetadataOptions"]["HttpTokens"] == "required"
    lb_arn = stack.one("AWS::ElasticLoadBalancingV2::LoadBalancer").physical_id
    (lb,) = aws.elbv2.describe_load_balancers(LoadBalancerArns=[lb_arn])["LoadBalancers"]
    assert lb["Scheme"] == "internal"
    assert stack.outputs["StreamUrl"] == f"ws://{lb['DNSName']}/invocations-bidirectional-stream"
    assert stack.outputs["TokenSecretArn"].startswith(
        f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:"
    )
    return cluster


def check_updated(aws: Aws, updated: StackView, cluster: dict) -> None:
    """After the update: the new image and instance type, and the service on the new task
    definition."""
    (container,) = task_definition(aws, updated)["containerDefinitions"]
    assert container["image"] == IMAGE_2
    assert launch_template_data(aws, updated)["InstanceType"] == "g6e.xlarge"
    (service,) = aws.ecs.describe_services(
        cluster=cluster["clusterArn"], services=[updated.one("AWS::ECS::Service").physical_id]
    )["services"]
    assert service["taskDefinition"] == updated.one("AWS::ECS::TaskDefinition").physical_id


def left_after_destroy(aws: Aws) -> dict[str, list]:
    """What the stacks could leave behind, by kind (each list empty once they are destroyed)."""
    clusters = aws.ecs.list_clusters()["clusterArns"]
    return {
        "active clusters": [
            c["clusterArn"]
            for c in aws.ecs.describe_clusters(clusters=clusters)["clusters"]
            if c["status"] != "INACTIVE"
        ]
        if clusters
        else [],
        "active task definitions": aws.ecs.list_task_definitions(status="ACTIVE")[
            "taskDefinitionArns"
        ],
        "load balancers": aws.elbv2.describe_load_balancers()["LoadBalancers"],
        "target groups": aws.elbv2.describe_target_groups()["TargetGroups"],
        "auto scaling groups": aws.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"],
        "launch templates": aws.ec2.describe_launch_templates()["LaunchTemplates"],
        "VPCs": [v["VpcId"] for v in aws.ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")],
        "VPC endpoints": [
            e["VpcEndpointId"]
            for e in aws.ec2.describe_vpc_endpoints()["VpcEndpoints"]
            if e["State"].lower() != "deleted"
        ],
        "NAT gateways": [
            g["NatGatewayId"]
            for g in aws.ec2.describe_nat_gateways()["NatGateways"]
            if g["State"] != "deleted"
        ],
        "network interfaces": [
            i["NetworkInterfaceId"]
            for i in aws.ec2.describe_network_interfaces()["NetworkInterfaces"]
        ],
        "secrets": aws.secretsmanager.list_secrets()["SecretList"],
        "log groups": [g["logGroupName"] for g in aws.logs.describe_log_groups()["logGroups"]],
        "buckets": [
            b["Name"] for b in aws.s3.list_buckets()["Buckets"] if not b["Name"].startswith("cdk-")
        ],
    }


@pytest.mark.parametrize("network", ["public", "vpc"])
def test_ecs_target_deploy_update_destroy(tmp_path, network):
    phases = Phases(f"ECS lifecycle ({network})")
    cdk_log = tmp_path / "cdk.log"
    first = {
        "voxtral.target": "ecs",
        "voxtral.image_uri": IMAGE_1,
        "sonic.enabled": "false",
        "network.mode": network,
    }
    second = {**first, "voxtral.image_uri": IMAGE_2, "ecs.instance_type": "g6e.xlarge"}
    with moto_server() as server:
        aws = Aws(server.url)
        assembly_1, assembly_2 = tmp_path / "cdk.out.1", tmp_path / "cdk.out.2"
        with phases("synth"):
            synthesize_assembly(assembly_1, first, server.url)
        with phases("bootstrap"):
            run_cdk(
                ["bootstrap", bootstrap_target(), "--app", str(assembly_1)], server.url, cdk_log
            )
        with phases("deploy"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_1)],
                server.url,
                cdk_log,
            )
        templates = load_templates(assembly_1)
        foundation = ["RealtimeVoice-Foundation"] if network == "vpc" else []
        assert sorted(templates) == [
            "RealtimeVoice-Artifacts",
            *foundation,
            "RealtimeVoice-Operations",
            STACK,
        ]
        stack = read_stack(aws, STACK, templates[STACK])
        if network == "vpc":
            check_private_network(aws, stack)

        cluster = check_deployed(aws, stack)

        # Update: another image (a new task definition revision) and another instance type (a new
        # launch template version the Auto Scaling group follows).
        with phases("synth (update)"):
            synthesize_assembly(assembly_2, second, server.url)
        with phases("deploy (update)"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_2)],
                server.url,
                cdk_log,
            )
        updated = read_stack(aws, STACK, load_templates(assembly_2)[STACK])
        check_updated(aws, updated, cluster)

        with phases("destroy"):
            run_cdk(["destroy", "--all", "--force", "--app", str(assembly_2)], server.url, cdk_log)
        assert [s["StackName"] for s in aws.cloudformation.describe_stacks()["Stacks"]] == [
            BOOTSTRAP_STACK
        ]
        left = left_after_destroy(aws)
        assert {what: items for what, items in left.items() if items} == {}
        port = server.port
    assert port_is_closed(port)
    phases.report()
