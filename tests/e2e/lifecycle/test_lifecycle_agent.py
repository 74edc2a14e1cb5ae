"""The voice agent's lifecycle (agent.enabled=true) with the pinned CDK CLI against moto's server:
bootstrap, deploy (beside the Voxtral and Sonic endpoints it calls), update (another greeting and
session limit: a new task definition revision the service follows), destroy, leaving nothing
behind; in public mode (a VPC of the Agent stack's own) and in network.mode=vpc (the Foundation
stack's isolated subnets and its Bedrock, Logs and ECS interface endpoints).

After deploy the agent's resources are read back through boto3: the ECS cluster, the Fargate
service on its task definition (image, environment, size), the load balancer with its listener,
rule and target group, the task and execution roles with their grants, the log group and the
access-log bucket. After destroy each of them is gone (the cluster, service and task definitions
INACTIVE, as ECS leaves them).

What moto does not do, and what is checked instead:

- the bot's image: there is no Docker engine here to build ``services/agent/Dockerfile``. The CDK
  CLI builds an image asset only when its tag is missing from the bootstrap repository (cdk-assets
  checks DescribeImages first), so the harness puts an image manifest under the asset's tag there
  before deploy (:func:`tests.e2e.lifecycle.lifecycle_cdk.publish_image_assets`), as a previous
  publish would have; the CLI then publishes nothing and the task definition names that image.
  The image's contents are tested by tests/agent/test_agent_image.py;
- no task runs (moto starts no container): the service's running count is not checked;
- Application Auto Scaling (the scaling on ActiveSessions), the CloudWatch alarms, the bucket
  policy and the load balancer's egress rule to the tasks (AWS::EC2::SecurityGroupEgress): moto's
  CloudFormation creates none (AlarmStandIn answers the alarms' Ref and Arn only); the test checks
  that CloudFormation holds each exactly as synthesized, tests/app/test_agent_stack.py their
  values;
- what moto's CloudFormation drops of the service (launch type, network configuration, target
  group binding; it keeps cluster, task definition and desired count, and starts a service
  without DesiredCount at 0 tasks where CloudFormation starts 1) and of the task definition (CPU,
  compatibilities, network mode, roles; it keeps the containers and memory): checked as
  CloudFormation received them, and what they name (subnets, security group, target group, roles)
  is looked up live;
- the custom resources (the access-log bucket's auto-delete, the VPC's default security group
  restriction): moto runs no handler; the harness completes them without data;
- the load balancer's attributes (idle timeout, access logs, dropped invalid headers): moto's
  CloudFormation does not apply LoadBalancerAttributes; asserted in the template.

Run it alone with ``make local-lifecycle`` or ``pytest tests/e2e/lifecycle -m lifecycle -k agent``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from contracts.agent_env import AgentEnv
from tests.e2e.lifecycle.lifecycle_cdk import (
    Phases,
    bootstrap_target,
    publish_image_assets,
    run_cdk,
    synthesize_assembly,
)
from tests.e2e.lifecycle.lifecycle_moto import ACCOUNT, REGION, moto_server, port_is_closed
from tests.e2e.lifecycle.lifecycle_resources import Aws, StackView, read_stack
from tests.e2e.lifecycle.test_lifecycle_deploy import (
    BOOTSTRAP_STACK,
    IMAGE_URI,
    load_templates,
    settings_with,
)

pytestmark = [
    pytest.mark.lifecycle,
    pytest.mark.starts_first,  # minutes (tests/e2e/conftest.py)
    pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning"),
]

STACK = "RealtimeVoice-Agent"
#: The update: another greeting and another session limit per task, both in the task's
#: environment (a new task definition revision).
UPDATE = {"agent.greeting": "Hi, this is the updated agent.", "agent.max_sessions_per_task": 6}
#: The Agent stack's resource types moto's CloudFormation skips ("No Moto CloudFormation support"):
#: checked as CloudFormation received them (tests/app/test_agent_stack.py asserts their values).
NOT_CREATED_BY_MOTO = {
    "AWS::S3::BucketPolicy",
    "AWS::EC2::SecurityGroupEgress",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::ApplicationAutoScaling::ScalingPolicy",
}
#: The interface endpoints network.mode=vpc adds for the agent (docs/agent.md, "Network").
AGENT_ENDPOINTS = {"bedrock-runtime", "logs", "ecs"}


@pytest.mark.parametrize("network", ["public", "vpc"])
def test_agent_stack_deploy_update_destroy(tmp_path: Path, network: str) -> None:
    phases = Phases(f"agent lifecycle ({network})")
    cdk_log = tmp_path / "cdk.log"
    first = {"agent.enabled": True, "voxtral.image_uri": IMAGE_URI, "network.mode": network}
    second = {**first, **UPDATE}
    settings, updated = settings_with(first), settings_with(second)
    with moto_server() as server:
        aws = Aws(server.url)
        assembly_1, assembly_2 = tmp_path / "cdk.out.1", tmp_path / "cdk.out.2"
        with phases("synth"):
            synthesize_assembly(assembly_1, first, server.url)
        with phases("bootstrap"):
            run_cdk(
                ["bootstrap", bootstrap_target(), "--app", str(assembly_1)], server.url, cdk_log
            )
        images = publish_image_assets(aws, assembly_1)
        assert list(images) == [STACK], images  # the bot's image is the app's only image asset
        with phases("deploy"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_1)],
                server.url,
                cdk_log,
            )
        templates = load_templates(assembly_1)
        foundation = ["RealtimeVoice-Foundation"] if network == "vpc" else []
        assert sorted(templates) == sorted(
            [
                "RealtimeVoice-Artifacts",
                *foundation,
                "RealtimeVoice-Operations",
                "RealtimeVoice-Sonic",
                "RealtimeVoice-Voxtral",
                STACK,
            ]
        )
        stack = read_stack(aws, STACK, templates[STACK])
        with phases("checks"):
            check_agent(aws, settings, stack, images[STACK], network)
            check_not_in_moto(aws, server.unsupported_types, stack, settings.stack_name_prefix)

        with phases("synth (update)"):
            synthesize_assembly(assembly_2, second, server.url)
        assert publish_image_assets(aws, assembly_2) == images  # the same image: nothing to build
        with phases("deploy (update)"):
            run_cdk(
                ["deploy", "--all", "--require-approval", "never", "--app", str(assembly_2)],
                server.url,
                cdk_log,
            )
        updated_stack = read_stack(aws, STACK, load_templates(assembly_2)[STACK])
        with phases("checks"):
            check_agent(aws, updated, updated_stack, images[STACK], network)
            old = stack.one("AWS::ECS::TaskDefinition").physical_id
            new = updated_stack.one("AWS::ECS::TaskDefinition").physical_id
            assert new != old and revision(new) == revision(old) + 1
            described = aws.ecs.describe_task_definition(taskDefinition=old)["taskDefinition"]
            assert described["status"] == "INACTIVE"
            kept = {
                r.logical_id: r.physical_id
                for r in stack.resources
                if r.type != "AWS::ECS::TaskDefinition"
            }
            assert {
                r.logical_id: r.physical_id
                for r in updated_stack.resources
                if r.type != "AWS::ECS::TaskDefinition"
            } == kept  # nothing else replaced

        with phases("destroy"):
            run_cdk(["destroy", "--all", "--force", "--app", str(assembly_2)], server.url, cdk_log)
        assert [s["StackName"] for s in aws.cloudformation.describe_stacks()["Stacks"]] == [
            BOOTSTRAP_STACK
        ]
        check_agent_gone(aws, [stack, updated_stack])
        port = server.port
    assert port_is_closed(port)
    phases.report()


def revision(task_definition_arn: str) -> int:
    return int(task_definition_arn.rsplit(":", 1)[1])


def check_agent(
    aws: Aws, settings: Settings, stack: StackView, image_uri: str, network: str
) -> None:
    """The agent's resources as the settings ask, read through boto3 (and, for what moto's
    CloudFormation drops, as CloudFormation received them)."""
    cluster_name, task_subnets, target_group_arn = check_service(aws, settings, stack)
    log_group = check_task_definition(aws, settings, stack, image_uri)
    check_roles(aws, settings, stack, image_uri, cluster_name, log_group)
    balancer = check_load_balancer(aws, stack, task_subnets, target_group_arn)
    check_network(aws, stack, network, task_subnets, balancer)


def check_service(aws: Aws, settings: Settings, stack: StackView) -> tuple[str, list[str], str]:
    """The ECS cluster and the service on the stack's task definition. moto's CloudFormation keeps
    a service's cluster, task definition and desired count, and a task definition's containers and
    memory; the Fargate launch type, the network configuration, the target group binding, the task's
    CPU, network mode and roles CloudFormation received exactly as synthesized, and what they name
    exists (below). Returns the cluster's name, the tasks' subnets and the target group's ARN."""
    sizing = settings.agent.sizing()
    deployed = aws_template(aws, STACK)["Resources"]
    cluster_name = stack.one("AWS::ECS::Cluster").physical_id
    (cluster,) = aws.ecs.describe_clusters(clusters=[cluster_name])["clusters"]
    assert cluster["status"] == "ACTIVE" and stack.outputs["ClusterName"] == cluster_name
    task_resource, service_resource = (
        stack.one("AWS::ECS::TaskDefinition"),
        stack.one("AWS::ECS::Service"),
    )
    (service,) = aws.ecs.describe_services(
        cluster=cluster["clusterArn"], services=[service_resource.physical_id]
    )["services"]
    assert service["status"] == "ACTIVE"
    assert service["taskDefinition"] == task_resource.physical_id
    scaling = stack.one("AWS::ApplicationAutoScaling::ScalableTarget")
    for resource in (task_resource, service_resource, scaling):
        assert deployed[resource.logical_id]["Properties"] == resource.properties
    # No DesiredCount: CloudFormation starts a new service with 1 task (moto with 0) and an update
    # leaves the count to the scaling, which holds it between the settings' bounds.
    assert "DesiredCount" not in service_resource.properties
    assert (scaling.properties["MinCapacity"], scaling.properties["MaxCapacity"]) == (
        sizing.min_tasks,
        sizing.max_tasks,
    )
    service_properties, task_properties = service_resource.properties, task_resource.properties
    assert service_properties["LaunchType"] == "FARGATE"
    awsvpc = service_properties["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert awsvpc["AssignPublicIp"] == "DISABLED"
    task_group = named(stack, "ServiceTaskSecurityGroup").physical_id
    assert [resolve(aws, stack, g) for g in awsvpc["SecurityGroups"]] == [task_group]
    task_subnets = sorted(resolve(aws, stack, s) for s in awsvpc["Subnets"])
    (binding,) = service_properties["LoadBalancers"]
    target_group_arn = stack.one("AWS::ElasticLoadBalancingV2::TargetGroup").physical_id
    assert (
        resolve(aws, stack, binding["TargetGroupArn"]),
        binding["ContainerName"],
        binding["ContainerPort"],
    ) == (target_group_arn, "Agent", 8080)
    assert (
        task_properties["RequiresCompatibilities"],
        task_properties["NetworkMode"],
        task_properties["Cpu"],
        task_properties["Memory"],
    ) == (["FARGATE"], "awsvpc", str(sizing.cpu), str(sizing.memory_mib))
    return cluster_name, task_subnets, target_group_arn


def check_task_definition(aws: Aws, settings: Settings, stack: StackView, image_uri: str) -> str:
    """The task definition: the bot's image from the bootstrap repository, its environment (the
    AgentEnv the bot reads), read-only root, logs to the stack's log group. Returns the log
    group's name."""
    agent, sizing = settings.agent, settings.agent.sizing()
    task_resource = stack.one("AWS::ECS::TaskDefinition")
    task_properties = task_resource.properties
    task = aws.ecs.describe_task_definition(taskDefinition=task_resource.physical_id)[
        "taskDefinition"
    ]
    assert task["memory"] == str(sizing.memory_mib)
    (container,) = task["containerDefinitions"]
    assert container["image"] == image_uri
    environment = {e["name"]: e["value"] for e in container["environment"]}
    (template_container,) = task_properties["ContainerDefinitions"]
    assert environment == {e["Name"]: e["Value"] for e in template_container["Environment"]}
    env = AgentEnv.from_env(environment)  # what the bot reads, against the settings
    assert (env.voxtral_endpoint, env.sonic_endpoint) == (
        settings.voxtral.endpoint_name,
        settings.sonic.endpoint_name,
    )
    assert (env.llm_model_id, env.greeting, env.max_sessions) == (
        agent.llm_model_id,
        agent.greeting,
        sizing.max_sessions_per_task,
    )
    assert env.metric_dimensions == {"Deployment": settings.stack_name_prefix}
    assert container["readonlyRootFilesystem"] is True
    assert container["stopTimeout"] == 120
    assert [m["containerPort"] for m in container["portMappings"]] == [8080]
    log_group = named(stack, "ServiceLogs").physical_id
    assert container["logConfiguration"]["options"]["awslogs-group"] == log_group
    (group,) = [
        g
        for g in aws.logs.describe_log_groups(logGroupNamePrefix=log_group)["logGroups"]
        if g["logGroupName"] == log_group
    ]
    assert group["retentionInDays"] == settings.log_retention_days
    return log_group


def check_roles(
    aws: Aws,
    settings: Settings,
    stack: StackView,
    image_uri: str,
    cluster_name: str,
    log_group: str,
) -> None:
    """The roles: the task role invokes the two endpoints and the one Bedrock model (through its
    profile) and protects its own tasks, nothing else; the execution role pulls the image from the
    bootstrap repository and writes the logs."""
    agent = settings.agent
    task_properties = stack.one("AWS::ECS::TaskDefinition").properties
    task_role, execution_role = (
        named(stack, "ServiceTaskTaskRole"),
        named(stack, "ServiceTaskExecutionRole"),
    )
    for role, arn in (
        (task_role, task_properties["TaskRoleArn"]),
        (execution_role, task_properties["ExecutionRoleArn"]),
    ):
        assert (
            resolve(aws, stack, arn) == aws.iam.get_role(RoleName=role.physical_id)["Role"]["Arn"]
        )
    endpoint_arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/"
    profile_model = agent.llm_model_id.split(".", 1)[1]
    tasks = f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{cluster_name}/*"
    assert allowed(aws, task_role.physical_id) == {
        "sagemaker:InvokeEndpointWithBidirectionalStream": [
            endpoint_arn + settings.voxtral.endpoint_name.lower()
        ],
        "sagemaker:InvokeEndpointWithResponseStream": [
            endpoint_arn + settings.sonic.endpoint_name.lower()
        ],
        "bedrock:InvokeModelWithResponseStream": sorted(
            [
                f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{agent.llm_model_id}",
                f"arn:aws:bedrock:*::foundation-model/{profile_model}",
            ]
        ),
        "ecs:GetTaskProtection": [tasks],
        "ecs:UpdateTaskProtection": [tasks],
    }
    pulls = allowed(aws, execution_role.physical_id)
    repository = image_uri.split("/", 1)[1].split(":")[0]
    assert pulls["ecr:BatchGetImage"] == [f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/{repository}"]
    assert pulls["ecr:GetAuthorizationToken"] == ["*"]  # no resource-level permission
    (logs_arn,) = pulls["logs:PutLogEvents"]
    assert logs_arn.startswith(f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{log_group}")


def check_load_balancer(
    aws: Aws, stack: StackView, task_subnets: list[str], target_group_arn: str
) -> dict:
    """The load balancer: internal, in the tasks' subnets, HTTP on 80 with every path forwarded to
    the target group, which checks GET /health on 8080 of IP targets; its access-log bucket blocks
    public access. Returns the load balancer."""
    balancer_arn = stack.one("AWS::ElasticLoadBalancingV2::LoadBalancer").physical_id
    (balancer,) = aws.elbv2.describe_load_balancers(LoadBalancerArns=[balancer_arn])[
        "LoadBalancers"
    ]
    assert (balancer["Scheme"], balancer["Type"]) == ("internal", "application")
    assert sorted(zone["SubnetId"] for zone in balancer["AvailabilityZones"]) == task_subnets
    assert balancer["SecurityGroups"] == [
        named(stack, "ServiceLoadBalancerSecurityGroup").physical_id
    ]
    assert stack.outputs["AgentUrl"] == f"ws://{balancer['DNSName']}"
    assert stack.outputs["HealthUrl"] == f"http://{balancer['DNSName']}/health"
    (listener,) = aws.elbv2.describe_listeners(LoadBalancerArn=balancer_arn)["Listeners"]
    assert (listener["Port"], listener["Protocol"]) == (80, "HTTP")
    rules = aws.elbv2.describe_rules(ListenerArn=listener["ListenerArn"])["Rules"]
    assert [
        (r["Priority"], r["Conditions"], r["Actions"][0]["Type"], r["Actions"][0]["TargetGroupArn"])
        for r in rules
        if not r["IsDefault"]
    ] == [
        (
            "10",
            [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/*"]}}],
            "forward",
            target_group_arn,
        )
    ]
    (targets,) = aws.elbv2.describe_target_groups(TargetGroupArns=[target_group_arn])[
        "TargetGroups"
    ]
    assert (
        targets["Port"],
        targets["TargetType"],
        targets["HealthCheckPath"],
        targets["VpcId"],
    ) == (8080, "ip", "/health", balancer["VpcId"])
    bucket = stack.one("AWS::S3::Bucket").physical_id  # the access logs
    assert aws.s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "IgnorePublicAcls": True,
        "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True,
    }
    return balancer


def check_network(
    aws: Aws, stack: StackView, network: str, task_subnets: list[str], balancer: dict
) -> None:
    """The tasks' subnets in the load balancer's VPC: the Foundation stack's in network.mode=vpc,
    with the agent's endpoints and no NAT gateway; else a VPC of the stack's own with its NAT
    gateway."""
    subnets = aws.ec2.describe_subnets(SubnetIds=task_subnets)["Subnets"]
    assert {s["VpcId"] for s in subnets} == {balancer["VpcId"]}
    nat_gateways = [
        g for g in aws.ec2.describe_nat_gateways()["NatGateways"] if g["State"] != "deleted"
    ]
    if network == "vpc":
        # The Foundation stack's network: its endpoints include the agent's, no NAT gateway.
        endpoints = aws.ec2.describe_vpc_endpoints()["VpcEndpoints"]
        services = {e["ServiceName"].removeprefix(f"com.amazonaws.{REGION}.") for e in endpoints}
        assert services >= AGENT_ENDPOINTS, services
        assert {e["VpcId"] for e in endpoints} == {balancer["VpcId"]}
        assert nat_gateways == []
    else:
        # A VPC of the stack's own, whose private subnets reach out through its NAT gateway.
        assert balancer["VpcId"] == stack.one("AWS::EC2::VPC").physical_id
        assert [g["VpcId"] for g in nat_gateways] == [balancer["VpcId"]]


def check_not_in_moto(aws: Aws, skipped: set[str], stack: StackView, prefix: str) -> None:
    """What moto's CloudFormation does not create (the types it skipped, the alarms its stand-in
    only names, the custom resources the harness completes): CloudFormation holds each exactly as
    synthesized."""
    assert skipped & {r.type for r in stack.resources} == NOT_CREATED_BY_MOTO
    deployed = aws_template(aws, STACK)["Resources"]
    alarms = [r for r in stack.resources if r.type == "AWS::CloudWatch::Alarm"]
    unchecked = [
        r
        for r in stack.resources
        if r.type in NOT_CREATED_BY_MOTO or r.type.startswith("Custom::") or r in alarms
    ]
    for resource in unchecked:
        assert deployed[resource.logical_id]["Properties"] == resource.properties
    assert sorted(r.properties["AlarmName"] for r in alarms) == sorted(
        f"{prefix}-agent-{rule}"
        for rule in (
            "sessions-failed",
            "voice-to-voice-p95",
            "stt-errors",
            "llm-errors",
            "tts-errors",
        )
    )
    # The access-log bucket's auto-delete, and with a VPC of the stack's own its default
    # security group's restriction.
    own_vpc = any(r.type == "AWS::EC2::VPC" for r in stack.resources)
    assert sorted(r.type for r in unchecked if r.type.startswith("Custom::")) == [
        "Custom::S3AutoDeleteObjects",
        *(["Custom::VpcRestrictDefaultSG"] if own_vpc else []),
    ]


def aws_template(aws: Aws, stack_name: str) -> dict[str, Any]:
    """The template CloudFormation holds for ``stack_name`` (GetTemplate)."""
    body = aws.cloudformation.get_template(StackName=stack_name)["TemplateBody"]
    return body if isinstance(body, dict) else json.loads(body)


def resolve(aws: Aws, stack: StackView, value: Any) -> str:
    """A template value as CloudFormation resolved it: a literal, a ``Ref`` or ``Fn::GetAtt`` of
    the stack's resources (its physical id: an ARN, or a group's id) or ``Fn::GetAtt`` of a role's
    ``Arn``, an ``Fn::ImportValue`` of another stack's export."""
    if isinstance(value, str):
        return value
    physical_ids = {r.logical_id: r.physical_id for r in stack.resources}
    if "Ref" in value:
        return physical_ids[value["Ref"]]
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        physical_id = physical_ids[logical_id]
        if attribute == "Arn":  # a role: its name is the physical id
            return aws.iam.get_role(RoleName=physical_id)["Role"]["Arn"]
        assert attribute == "GroupId", value
        return physical_id
    if "Fn::ImportValue" in value:
        exports = {e["Name"]: e["Value"] for e in aws.cloudformation.list_exports()["Exports"]}
        return exports[value["Fn::ImportValue"]]
    raise AssertionError(f"cannot resolve {value}")


def named(stack: StackView, construct_path: str) -> Any:
    """The resource whose logical id is ``construct_path`` and the CDK's 8-character hash."""
    (found,) = [r for r in stack.resources if r.logical_id[:-8] == construct_path]
    return found


def allowed(aws: Aws, role_name: str) -> dict[str, list[str]]:
    """Action -> sorted resources of every Allow statement of the role's inline policies."""
    found: dict[str, list[str]] = {}
    for name in aws.iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        document = aws.iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow", statement
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                found.setdefault(action, []).extend(
                    [resources] if isinstance(resources, str) else resources
                )
    return {action: sorted(resources) for action, resources in found.items()}


def check_agent_gone(aws: Aws, stacks: list[StackView]) -> None:
    """Every resource of the agent the deploys made is gone; ECS keeps clusters, services and
    task definitions INACTIVE."""

    def ids(resource_type: str) -> set[str]:
        return {
            r.physical_id for stack in stacks for r in stack.resources if r.type == resource_type
        }

    clusters = aws.ecs.describe_clusters(clusters=sorted(ids("AWS::ECS::Cluster")))["clusters"]
    left: dict[str, Any] = {
        "active clusters": [c["clusterArn"] for c in clusters if c["status"] != "INACTIVE"],
        "active services": [
            s["serviceArn"]
            for c in clusters
            for s in aws.ecs.describe_services(
                cluster=c["clusterArn"], services=sorted(ids("AWS::ECS::Service"))
            )["services"]
            if s["status"] != "INACTIVE"
        ],
        "active task definitions": aws.ecs.list_task_definitions(status="ACTIVE")[
            "taskDefinitionArns"
        ],
        "load balancers": [
            b["LoadBalancerArn"] for b in aws.elbv2.describe_load_balancers()["LoadBalancers"]
        ],
        "target groups": [
            g["TargetGroupArn"] for g in aws.elbv2.describe_target_groups()["TargetGroups"]
        ],
        "roles": sorted(
            ids("AWS::IAM::Role") & {r["RoleName"] for r in aws.iam.list_roles()["Roles"]}
        ),
        "log groups": sorted(
            ids("AWS::Logs::LogGroup")
            & {g["logGroupName"] for g in aws.logs.describe_log_groups()["logGroups"]}
        ),
        "buckets": sorted(
            ids("AWS::S3::Bucket") & {b["Name"] for b in aws.s3.list_buckets()["Buckets"]}
        ),
        "security groups": sorted(
            ids("AWS::EC2::SecurityGroup")
            & {g["GroupId"] for g in aws.ec2.describe_security_groups()["SecurityGroups"]}
        ),
        "VPCs": [v["VpcId"] for v in aws.ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")],
        "NAT gateways": [
            g["NatGatewayId"]
            for g in aws.ec2.describe_nat_gateways()["NatGateways"]
            if g["State"] != "deleted"
        ],
    }
    assert {what: items for what, items in left.items() if items} == {}
    # Every service of the agent was found INACTIVE (not merely missing from the listing).
    assert ids("AWS::ECS::Service") and ids("AWS::ECS::TaskDefinition")
