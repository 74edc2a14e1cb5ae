"""The rule book's ECS rules (E93xx): capacity providers and their Auto Scaling groups,
services, task definitions and placement as the ECS API reference states them
(:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

ECS_API = "https://docs.aws.amazon.com/AmazonECS/latest/APIReference"


class CapacityProviderName(TemplateRule, CloudFormationLintRule):
    id = "E9301"
    shortdesc = "CreateCapacityProvider: the name can't be prefixed with 'aws', 'ecs' or 'fargate'"
    description = (
        "CreateCapacityProvider, name: up to 255 letters, numbers, underscores and hyphens; "
        "'The name "
        'can\'t be prefixed with "aws", "ecs", or "fargate".\''
    )
    source_url = f"{ECS_API}/API_CreateCapacityProvider.html"
    tags: ClassVar[list[str]] = ["ecs"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ECS::CapacityProvider").items():
            name = props.get("Name")
            if isinstance(name, str) and (
                name.lower().startswith(("aws", "ecs", "fargate"))
                or not re.fullmatch(r"[A-Za-z0-9_-]{1,255}", name)
            ):
                yield (
                    ("Resources", lid, "Properties", "Name"),
                    f"capacity provider name {name!r} is not allowed",
                )


def _asg_of(template: dict, provider: dict) -> tuple[str | None, dict]:
    group = (provider.get("AutoScalingGroupProvider") or {}).get("AutoScalingGroupArn")
    lid = t.ref_target(template, group)
    return lid, t.resources(template, "AWS::AutoScaling::AutoScalingGroup").get(lid or "", {})


class ManagedTerminationProtection(TemplateRule, CloudFormationLintRule):
    id = "E9302"
    shortdesc = (
        "CreateCapacityProvider: with managed termination protection, managed scaling must also "
        "be used and the Auto Scaling group must have instance protection from scale-in on"
    )
    description = (
        "AutoScalingGroupProvider.managedTerminationProtection: 'When using managed termination "
        "protection, managed scaling must also be used otherwise managed termination protection "
        "doesn't work ... The Auto Scaling group and each instance in the Auto Scaling group "
        "must have instance protection from scale-in actions on as well.'"
    )
    source_url = f"{ECS_API}/API_AutoScalingGroupProvider.html"
    tags: ClassVar[list[str]] = ["ecs"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ECS::CapacityProvider").items():
            provider = props.get("AutoScalingGroupProvider") or {}
            if provider.get("ManagedTerminationProtection") != "ENABLED":
                continue
            where = ("Resources", lid, "Properties", "AutoScalingGroupProvider")
            if (provider.get("ManagedScaling") or {}).get("Status") != "ENABLED":
                yield (
                    (*where, "ManagedScaling"),
                    "managed termination protection needs managed scaling ENABLED",
                )
            asg_id, asg = _asg_of(template, props)
            if asg_id and t.literal_bool(asg.get("NewInstancesProtectedFromScaleIn")) is not True:
                yield (
                    (*where, "ManagedTerminationProtection"),
                    (f"{asg_id} does not protect new instances from scale-in"),
                )


class ProtectedInstancesBlockDeletion(TemplateRule, CloudFormationLintRule):
    id = "E9303"
    shortdesc = (
        "An Auto Scaling group whose instances are protected from scale-in (as managed "
        "termination protection requires) cannot be deleted while they are: something must "
        "remove the protection before CloudFormation deletes the group, or the stack deletion "
        "hangs"
    )
    description = (
        "Reported: aws/aws-cdk#18179, aws/aws-cdk#14732, aws/containers-roadmap#2862 (stack "
        "deletion stuck on the capacity provider's group). Accepted remedies: "
        "ManagedTerminationProtection off and no scale-in protection on new instances, or a "
        "custom resource in the same template that refers to the group (so CloudFormation "
        "deletes it first) and removes instance protection when it is deleted (any Custom:: "
        "resource naming the group, or a resource with Metadata 'RemovesInstanceProtection')."
    )
    source_url = "https://github.com/aws/aws-cdk/issues/18179"
    tags: ClassVar[list[str]] = ["ecs", "autoscaling", "destroy"]

    def findings(self, template):
        groups = t.resources(template, "AWS::AutoScaling::AutoScalingGroup")
        for lid, props in groups.items():
            if t.literal_bool(props.get("NewInstancesProtectedFromScaleIn")) is not True:
                continue
            removers = [
                rid
                for rid, r in template.get("Resources", {}).items()
                if (
                    (r.get("Metadata") or {}).get("RemovesInstanceProtection")
                    or str(r.get("Type")).startswith("Custom::")
                    or r.get("Type") == "AWS::CloudFormation::CustomResource"
                )
                and lid in t.references(r.get("Properties")) | set(t.as_list(r.get("DependsOn")))
            ]
            if not removers:
                yield (
                    ("Resources", lid, "Properties", "NewInstancesProtectedFromScaleIn"),
                    f"{lid} protects its instances from scale-in and nothing in the template "
                    "removes that protection before the group is deleted: cdk destroy can hang",
                )


class ServiceLaunchTypeOrStrategy(TemplateRule, CloudFormationLintRule):
    id = "E9304"
    shortdesc = (
        "CreateService: if a capacityProviderStrategy is specified, launchType must be omitted; "
        "a task definition in awsvpc mode needs the service's networkConfiguration and target "
        "groups of type ip; the deployment circuit breaker only with the rolling update (ECS) "
        "deployment controller"
    )
    description = (
        "CreateService launchType / capacityProviderStrategy; DeploymentCircuitBreaker: 'can "
        "only be used for services using the rolling update (ECS) deployment type'; "
        "RegisterTaskDefinition networkMode: 'If the network mode is awsvpc ... you must specify "
        "a NetworkConfiguration value'; Elastic Load Balancing: for awsvpc tasks 'you must "
        "choose ip as the target type'."
    )
    source_url = f"{ECS_API}/API_CreateService.html"
    tags: ClassVar[list[str]] = ["ecs", "elbv2"]

    def findings(self, template):
        tasks = t.resources(template, "AWS::ECS::TaskDefinition")
        groups = t.resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
        for lid, props in t.resources(template, "AWS::ECS::Service").items():
            where = ("Resources", lid, "Properties")
            if props.get("LaunchType") and props.get("CapacityProviderStrategy"):
                yield (
                    (*where, "LaunchType"),
                    "LaunchType and CapacityProviderStrategy exclude each other",
                )
            controller = (props.get("DeploymentController") or {}).get("Type", "ECS")
            if (props.get("DeploymentConfiguration") or {}).get(
                "DeploymentCircuitBreaker"
            ) and controller != "ECS":
                yield (
                    (*where, "DeploymentConfiguration"),
                    (f"the circuit breaker is for ECS rolling updates, not {controller}"),
                )
            task = tasks.get(t.ref_target(template, props.get("TaskDefinition")) or "")
            if task is None or task.get("NetworkMode") != "awsvpc":
                continue
            if not (props.get("NetworkConfiguration") or {}).get("AwsvpcConfiguration"):
                yield (
                    (*where, "NetworkConfiguration"),
                    "awsvpc tasks need NetworkConfiguration.AwsvpcConfiguration",
                )
            for i, lb in enumerate(t.as_list(props.get("LoadBalancers"))):
                group = groups.get(t.ref_target(template, lb.get("TargetGroupArn")) or "")
                if group is not None and group.get("TargetType", "instance") != "ip":
                    yield (
                        (*where, "LoadBalancers", i),
                        ("awsvpc tasks register by IP: the target group needs TargetType ip"),
                    )


class ContainerDefinitionRules(TemplateRule, CloudFormationLintRule):
    id = "E9305"
    shortdesc = (
        "RegisterTaskDefinition: without task-level memory each container sets memory or "
        "memoryReservation (memory > memoryReservation when both); at least one container is "
        "essential; health check interval 5-300 s, timeout 2-60 s, retries 1-10, startPeriod "
        "0-300 s, command starting CMD or CMD-SHELL; stopTimeout at most 120 s on Fargate"
    )
    description = (
        "ContainerDefinition memory, memoryReservation, essential, stopTimeout; HealthCheck."
    )
    source_url = f"{ECS_API}/API_ContainerDefinition.html"
    tags: ClassVar[list[str]] = ["ecs"]

    HEALTH: ClassVar[dict[str, tuple[int, int]]] = {
        "Interval": (5, 300),
        "Timeout": (2, 60),
        "Retries": (1, 10),
        "StartPeriod": (0, 300),
    }

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ECS::TaskDefinition").items():
            where = ("Resources", lid, "Properties", "ContainerDefinitions")
            containers = [
                c for c in t.as_list(props.get("ContainerDefinitions")) if isinstance(c, dict)
            ]
            fargate = "FARGATE" in t.as_list(props.get("RequiresCompatibilities"))
            if containers and not any(
                t.literal_bool(c.get("Essential", True)) is not False for c in containers
            ):
                yield where, "no container is essential"
            for i, c in enumerate(containers):
                hard, soft = (
                    t.literal_int(c.get("Memory")),
                    t.literal_int(c.get("MemoryReservation")),
                )
                if (
                    props.get("Memory") is None
                    and not (hard or soft)
                    and not (
                        t.is_intrinsic(c.get("Memory"))
                        or t.is_intrinsic(c.get("MemoryReservation"))
                    )
                ):
                    yield (
                        (*where, i),
                        "no task memory, so the container needs Memory or MemoryReservation",
                    )
                if hard is not None and soft is not None and hard <= soft:
                    yield (
                        (*where, i, "Memory"),
                        f"Memory {hard} must exceed MemoryReservation {soft}",
                    )
                stop = t.literal_int(c.get("StopTimeout"))
                if fargate and stop is not None and stop > 120:
                    yield (
                        (*where, i, "StopTimeout"),
                        f"StopTimeout {stop} s exceeds Fargate's 120 s",
                    )
                check = c.get("HealthCheck")
                if isinstance(check, dict):
                    command = t.as_list(check.get("Command"))
                    if command and command[0] not in ("CMD", "CMD-SHELL"):
                        yield (
                            (*where, i, "HealthCheck", "Command"),
                            "the command must start with CMD or CMD-SHELL",
                        )
                    for key, (low, high) in self.HEALTH.items():
                        value = t.literal_int(check.get(key))
                        if value is not None and not low <= value <= high:
                            yield (
                                (*where, i, "HealthCheck", key),
                                f"{key} {value} is outside {low}-{high}",
                            )


class GpusFitTheInstance(TemplateRule, CloudFormationLintRule):
    id = "E9306"
    shortdesc = (
        "ResourceRequirement GPU: the GPUs reserved for all containers of a task can't exceed "
        "the GPUs of the container instance (the launch template's instance type), and GPUs are "
        "not on Fargate"
    )
    description = (
        "ResourceRequirement.value: 'The number of GPUs that's reserved for all containers in a "
        "task can't exceed the number of available GPUs on the container instance that the task "
        "is launched on.' A task that cannot fit stays PROVISIONING and the service never "
        "becomes stable. GPU counts come from the instance catalogue (an EC2 type g6.xlarge is "
        "looked up as ml.g6.xlarge, the same hardware)."
    )
    source_url = f"{ECS_API}/API_ResourceRequirement.html"
    tags: ClassVar[list[str]] = ["ecs"]

    def findings(self, template):
        from constructs_lib.facts.instance_types import lookup

        types = {
            lt.get("LaunchTemplateData", {}).get("InstanceType")
            for lt in t.resources(template, "AWS::EC2::LaunchTemplate").values()
        }
        types = {x for x in types if isinstance(x, str)}
        for lid, props in t.resources(template, "AWS::ECS::TaskDefinition").items():
            gpus = sum(
                t.literal_int(r.get("Value")) or 0
                for c in t.as_list(props.get("ContainerDefinitions"))
                for r in t.as_list(c.get("ResourceRequirements"))
                if r.get("Type") == "GPU"
            )
            if not gpus:
                continue
            where = ("Resources", lid, "Properties", "ContainerDefinitions")
            if "FARGATE" in t.as_list(props.get("RequiresCompatibilities")):
                yield where, "GPUs are not available on Fargate"
            for instance_type in sorted(types):
                spec = lookup(
                    instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
                )
                if spec is None:
                    yield (
                        where,
                        (
                            f"{instance_type} is not in the instance catalogue: its GPU count is "
                            "unknown"
                        ),
                    )
                elif gpus > spec.gpus:
                    yield where, f"the task reserves {gpus} GPUs; {instance_type} has {spec.gpus}"


class AutoScalingGroupSizes(TemplateRule, CloudFormationLintRule):
    id = "E9308"
    shortdesc = (
        "CreateAutoScalingGroup: the desired capacity must be greater than or equal to the "
        "minimum size and less than or equal to the maximum size (so MinSize <= MaxSize)"
    )
    description = "CreateAutoScalingGroup DesiredCapacity."
    source_url = (
        "https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CreateAutoScalingGroup.html"
    )
    tags: ClassVar[list[str]] = ["autoscaling"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::AutoScaling::AutoScalingGroup").items():
            low, high = t.literal_int(props.get("MinSize")), t.literal_int(props.get("MaxSize"))
            desired = t.literal_int(props.get("DesiredCapacity"))
            where = ("Resources", lid, "Properties")
            if low is not None and high is not None and low > high:
                yield (*where, "MinSize"), f"MinSize {low} exceeds MaxSize {high}"
            if desired is not None and (
                (low is not None and desired < low) or (high is not None and desired > high)
            ):
                yield (
                    (*where, "DesiredCapacity"),
                    f"DesiredCapacity {desired} is outside {low}-{high}",
                )


class ServiceDependsOnItsCapacityProviderAssociation(TemplateRule, CloudFormationLintRule):
    id = "E9309"
    shortdesc = (
        "Only capacity providers already associated with the cluster can be used in a capacity "
        "provider strategy, and one can be disassociated only when no task uses it: a service "
        "with a capacity provider strategy depends on the ClusterCapacityProviderAssociations "
        "that associates it (created after it, deleted before it)"
    )
    description = (
        "ECS API reference, CapacityProviderStrategyItem: 'Only capacity providers that are "
        "already associated with a cluster ... can be used in a capacity provider strategy.' "
        "PutClusterCapacityProviders: 'You can only disassociate an existing capacity provider "
        "from a cluster if it's not being used by any existing tasks.' Without the dependency "
        "CloudFormation may delete the association first: 'The specified capacity provider is in "
        "use and cannot be removed' (pahud/cdk-fargate-patterns#71; the service DependsOn fix: "
        "aws/containers-roadmap#631)."
    )
    source_url = f"{ECS_API}/API_PutClusterCapacityProviders.html"
    tags: ClassVar[list[str]] = ["ecs", "destroy"]

    def findings(self, template):
        resources = template.get("Resources") or {}
        associations = t.resources(template, "AWS::ECS::ClusterCapacityProviderAssociations")
        for lid, props in t.resources(template, "AWS::ECS::Service").items():
            providers = {
                t.ref_target(template, item.get("CapacityProvider"))
                for item in t.as_list(props.get("CapacityProviderStrategy"))
                if isinstance(item, dict)
            }
            depends = set(t.as_list(resources[lid].get("DependsOn"))) | t.references(props)
            for aid, association in associations.items():
                listed = {
                    t.ref_target(template, p)
                    for p in t.as_list(association.get("CapacityProviders"))
                }
                if providers & listed - {None} and aid not in depends:
                    yield (
                        ("Resources", lid, "DependsOn"),
                        f"{lid} uses a capacity provider that {aid} associates but does not "
                        f"depend on {aid}: CloudFormation may create the service first, or "
                        "delete the association first (ResourceInUseException)",
                    )


class PlacementStrategyFields(TemplateRule, CloudFormationLintRule):
    id = "E9307"
    shortdesc = (
        "PlacementStrategy: spread takes instanceId, host or an attribute (attribute:...); "
        "binpack takes cpu or memory; random takes no field"
    )
    description = "PlacementStrategy.field."
    source_url = f"{ECS_API}/API_PlacementStrategy.html"
    tags: ClassVar[list[str]] = ["ecs"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ECS::Service").items():
            for i, s in enumerate(t.as_list(props.get("PlacementStrategies"))):
                kind, field = s.get("Type"), s.get("Field")
                ok = {
                    "spread": field in ("instanceId", "host")
                    or str(field).startswith("attribute:"),
                    "binpack": field in ("cpu", "memory"),
                    "random": field is None,
                }.get(kind, True)
                if not ok:
                    yield (
                        ("Resources", lid, "Properties", "PlacementStrategies", i),
                        f"{kind} cannot use field {field!r}",
                    )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
