"""The rule book's ECS rules (tools/cfn_rules/aws_ecs.py: capacity providers, services, task
definitions): each rule fails on a template written to break it and holds on the same template
mended (test_aws_rules.py holds the book as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import findings, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import aws_ecs


def ecs_app(
    protected=True,
    termination="ENABLED",
    scaling="ENABLED",
    remover=False,
    gpus="1",
    instance_type="g6.xlarge",
    target_type="ip",
    ordered=True,
    **service,
) -> dict:
    resources = {
        "Template": (
            "AWS::EC2::LaunchTemplate",
            {"LaunchTemplateData": {"InstanceType": instance_type}},
        ),
        "Group": (
            "AWS::AutoScaling::AutoScalingGroup",
            {"MinSize": "0", "MaxSize": "2", "NewInstancesProtectedFromScaleIn": protected},
        ),
        "Provider": (
            "AWS::ECS::CapacityProvider",
            {
                "AutoScalingGroupProvider": {
                    "AutoScalingGroupArn": {"Ref": "Group"},
                    "ManagedScaling": {"Status": scaling},
                    "ManagedTerminationProtection": termination,
                }
            },
        ),
        "Task": (
            "AWS::ECS::TaskDefinition",
            {
                "NetworkMode": "awsvpc",
                "ContainerDefinitions": [
                    {
                        "Name": "Bridge",
                        "MemoryReservation": 8192,
                        "ResourceRequirements": [{"Type": "GPU", "Value": gpus}],
                    }
                ],
            },
        ),
        "Targets": (
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {"TargetType": target_type, "Port": 8080},
        ),
        "Service": (
            "AWS::ECS::Service",
            {
                "TaskDefinition": {"Ref": "Task"},
                "CapacityProviderStrategy": [{"CapacityProvider": {"Ref": "Provider"}}],
                "NetworkConfiguration": {"AwsvpcConfiguration": {"Subnets": ["s-1"]}},
                "LoadBalancers": [{"TargetGroupArn": {"Ref": "Targets"}}],
                **service,
            },
        ),
    }
    resources["Association"] = (
        "AWS::ECS::ClusterCapacityProviderAssociations",
        {
            "Cluster": "c",
            "CapacityProviders": [{"Ref": "Provider"}],
            "DefaultCapacityProviderStrategy": [],
        },
    )
    if remover:
        resources["Unprotect"] = (
            "Custom::RemoveInstanceProtection",
            {"ServiceToken": "arn:x", "GroupName": {"Ref": "Group"}},
        )
    tpl = template(**resources)
    if ordered:
        tpl["Resources"]["Service"]["DependsOn"] = ["Association"]
    return tpl


def group(**props) -> dict:
    return template(G=("AWS::AutoScaling::AutoScalingGroup", props))


def task(**container) -> dict:
    return template(
        Task=("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [{"Name": "c", **container}]})
    )


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (
        aws_ecs.CapacityProviderName,
        template(P=("AWS::ECS::CapacityProvider", {"Name": "ecs-gpu"})),
        "not allowed",
        template(P=("AWS::ECS::CapacityProvider", {"Name": "voxtral-gpu"})),
    ),
    (
        aws_ecs.ManagedTerminationProtection,
        ecs_app(scaling="DISABLED", remover=True),
        "needs managed scaling",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.ManagedTerminationProtection,
        ecs_app(protected=False),
        "does not protect new instances",
        ecs_app(protected=False, termination="DISABLED"),
    ),
    (
        aws_ecs.ProtectedInstancesBlockDeletion,
        ecs_app(),
        "cdk destroy can hang",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.ProtectedInstancesBlockDeletion,
        ecs_app(termination="DISABLED"),
        "cdk destroy can hang",
        ecs_app(protected=False, termination="DISABLED"),
    ),
    (
        aws_ecs.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, LaunchType="EC2"),
        "exclude each other",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, target_type="instance"),
        "TargetType ip",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, NetworkConfiguration={}),
        "NetworkConfiguration",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.ServiceLaunchTypeOrStrategy,
        ecs_app(
            remover=True,
            DeploymentController={"Type": "CODE_DEPLOY"},
            DeploymentConfiguration={
                "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}
            },
        ),
        "circuit breaker",
        ecs_app(
            remover=True,
            DeploymentConfiguration={
                "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}
            },
        ),
    ),
    (
        aws_ecs.ServiceDependsOnItsCapacityProviderAssociation,
        ecs_app(remover=True, ordered=False),
        "does not depend on Association",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.AutoScalingGroupSizes,
        group(MinSize="3", MaxSize="2"),
        "exceeds MaxSize",
        group(MinSize="2", MaxSize="2"),
    ),
    (
        aws_ecs.AutoScalingGroupSizes,
        group(MinSize="0", MaxSize="2", DesiredCapacity="3"),
        "outside 0-2",
        group(MinSize="0", MaxSize="2", DesiredCapacity="2"),
    ),
    (
        aws_ecs.ContainerDefinitionRules,
        task(Image="i"),
        "needs Memory or MemoryReservation",
        task(Image="i", MemoryReservation=512),
    ),
    (
        aws_ecs.ContainerDefinitionRules,
        task(Memory=512, MemoryReservation=512),
        "must exceed",
        task(Memory=1024, MemoryReservation=512),
    ),
    (
        aws_ecs.ContainerDefinitionRules,
        task(Memory=512, Essential=False),
        "no container is essential",
        task(Memory=512, Essential=True),
    ),
    (
        aws_ecs.ContainerDefinitionRules,
        task(Memory=512, HealthCheck={"Command": ["CMD-SHELL", "true"], "StartPeriod": 600}),
        "outside 0-300",
        task(Memory=512, HealthCheck={"Command": ["CMD-SHELL", "true"], "StartPeriod": 300}),
    ),
    (
        aws_ecs.ContainerDefinitionRules,
        task(Memory=512, HealthCheck={"Command": ["curl", "-f", "x"]}),
        "CMD or CMD-SHELL",
        task(Memory=512, HealthCheck={"Command": ["CMD", "curl", "-f", "x"]}),
    ),
    (
        aws_ecs.GpusFitTheInstance,
        ecs_app(remover=True, gpus="2"),
        "has 1",
        ecs_app(remover=True, gpus="1"),
    ),
    (
        aws_ecs.GpusFitTheInstance,
        ecs_app(remover=True, instance_type="zz9.xlarge"),
        "GPU count is unknown",
        ecs_app(remover=True),
    ),
    (
        aws_ecs.PlacementStrategyFields,
        ecs_app(remover=True, PlacementStrategies=[{"Type": "binpack", "Field": "instanceId"}]),
        "binpack cannot use",
        ecs_app(remover=True, PlacementStrategies=[{"Type": "spread", "Field": "instanceId"}]),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []
