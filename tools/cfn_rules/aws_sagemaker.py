"""The rule book's SageMaker rules (E91xx): endpoint configs, models and endpoints as the
SageMaker API reference states them, and the Application Auto Scaling targets and policies that
scale an endpoint's variants (:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

SAGEMAKER_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference"
AAS_API = "https://docs.aws.amazon.com/autoscaling/application/APIReference"


def _variants(props: dict) -> Iterator[tuple[tuple, dict]]:
    for key in ("ProductionVariants", "ShadowProductionVariants"):
        for i, variant in enumerate(t.as_list(props.get(key))):
            if isinstance(variant, dict):
                yield (key, i), variant


class KmsKeyWithLocalStorage(TemplateRule, CloudFormationLintRule):
    id = "E9101"
    shortdesc = (
        "CreateEndpointConfig: you can't request a KmsKeyId when using an instance type with "
        "local storage (the call fails); every instance type, instance pools included, must be "
        "one the catalogue knows"
    )
    description = (
        "KmsKeyId: 'Certain Nitro-based instances include local storage ... Local storage "
        "volumes are encrypted using a hardware module on the instance. You can't request a "
        "KmsKeyId when using an instance type with local storage ... the call to "
        "CreateEndpointConfig fails.' Public reports: aws/sagemaker-python-sdk#3677, "
        "aws-samples/aws-enterprise-mlops-framework#11."
    )
    source_url = f"{SAGEMAKER_API}/API_CreateEndpointConfig.html"
    tags: ClassVar[list[str]] = ["sagemaker", "kms"]

    def findings(self, template):
        from constructs_lib.facts.instance_types import has_local_storage

        for lid, props in t.resources(template, "AWS::SageMaker::EndpointConfig").items():
            if props.get("KmsKeyId") is None:
                continue
            for path, variant in _variants(props):
                types = [(("InstanceType",), variant.get("InstanceType"))]
                types += [
                    (("InstancePools", i, "InstanceType"), pool.get("InstanceType"))
                    for i, pool in enumerate(t.as_list(variant.get("InstancePools")))
                    if isinstance(pool, dict)
                ]
                for sub, instance_type in types:
                    if not isinstance(instance_type, str):
                        continue
                    local = has_local_storage(instance_type)
                    where = ("Resources", lid, "Properties", *path, *sub)
                    if local is None:
                        yield (
                            where,
                            (
                                f"{instance_type} is not in the instance catalogue, so whether "
                                "KmsKeyId is allowed with it is unknown: add it to "
                                "constructs_lib/facts/instance_types.py"
                            ),
                        )
                    elif local:
                        yield (
                            where,
                            (
                                f"KmsKeyId is set but {instance_type} has local NVMe storage: "
                                "CreateEndpointConfig fails"
                            ),
                        )


class ModelDataSourceLimits(TemplateRule, CloudFormationLintRule):
    id = "E9102"
    shortdesc = (
        "ContainerDefinition: you cannot use ModelDataSource with SageMaker Marketplace (a model "
        "package) or multi-model endpoints; S3Prefix data is a key prefix that always ends with "
        "'/', and Gzip goes with S3Object only"
    )
    description = (
        "ModelDataSource: 'Currently you cannot use ModelDataSource in conjunction with ... "
        "SageMaker multi-model endpoints, and SageMaker Marketplace.' "
        "S3ModelDataSource.S3DataType: 'A valid key name prefix identified by S3Uri always ends "
        "with a forward slash (/).' CompressionType documents Gzip with S3Object, None with "
        "S3Object or S3Prefix (Gzip with S3Prefix: not a documented combination)."
    )
    source_url = f"{SAGEMAKER_API}/API_ContainerDefinition.html"
    tags: ClassVar[list[str]] = ["sagemaker"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
            containers = [(("PrimaryContainer",), props.get("PrimaryContainer"))]
            containers += [
                (("Containers", i), c) for i, c in enumerate(t.as_list(props.get("Containers")))
            ]
            for path, container in containers:
                if not isinstance(container, dict) or "ModelDataSource" not in container:
                    continue
                where = ("Resources", lid, "Properties", *path, "ModelDataSource")
                if "ModelPackageName" in container:
                    yield (
                        where,
                        (
                            "ModelDataSource cannot be used with a model package (SageMaker "
                            "Marketplace)"
                        ),
                    )
                if container.get("Mode") == "MultiModel":
                    yield (
                        where,
                        (
                            "ModelDataSource cannot be used with a multi-model endpoint (Mode "
                            "MultiModel)"
                        ),
                    )
                source = (container["ModelDataSource"] or {}).get("S3DataSource") or {}
                data_type, compression = source.get("S3DataType"), source.get("CompressionType")
                uri = t.joined_text(source.get("S3Uri"))
                if data_type == "S3Prefix" and uri is not None and not uri.endswith(("/", "{}")):
                    yield (
                        (*where, "S3DataSource", "S3Uri"),
                        f"S3Prefix S3Uri {uri!r} must end with '/'",
                    )
                if data_type == "S3Prefix" and compression == "Gzip":
                    yield (
                        (*where, "S3DataSource", "CompressionType"),
                        "Gzip goes with S3Object, not S3Prefix",
                    )


class MarketplacePackageIsIsolated(TemplateRule, CloudFormationLintRule):
    id = "E9110"
    shortdesc = (
        "A model from an AWS Marketplace model package runs in an isolated environment without "
        "an internet connection: its Model sets EnableNetworkIsolation true"
    )
    description = (
        "AWS Marketplace seller guide, 'Packaging your code into images': 'when a buyer "
        "subscribes to your containerized product, the Docker containers run in an isolated "
        "environment without an internet connection.' That CreateModel refuses such a package "
        "without EnableNetworkIsolation is what SageMaker's own SDK assumes "
        "(ModelPackage.enable_network_isolation); unconfirmed in the API reference's prose. Any "
        "ModelPackageName is taken as a Marketplace package (ours is)."
    )
    source_url = "https://docs.aws.amazon.com/marketplace/latest/userguide/ml-packaging-your-code-into-images.html"
    tags: ClassVar[list[str]] = ["sagemaker", "marketplace"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
            containers = [props.get("PrimaryContainer"), *t.as_list(props.get("Containers"))]
            if (
                any(isinstance(c, dict) and "ModelPackageName" in c for c in containers)
                and t.literal_bool(props.get("EnableNetworkIsolation")) is not True
            ):
                yield (
                    ("Resources", lid, "Properties", "EnableNetworkIsolation"),
                    "a Marketplace model package needs EnableNetworkIsolation true",
                )


class ProvisionTimeoutRange(TemplateRule, CloudFormationLintRule):
    id = "E9103"
    shortdesc = (
        "ProductionVariant.VariantInstanceProvisionTimeoutInSeconds: valid values 300 to 3600"
    )
    description = (
        "ProductionVariant: 'VariantInstanceProvisionTimeoutInSeconds ... Valid values: 300 to "
        "3600.'"
    )
    source_url = f"{SAGEMAKER_API}/API_ProductionVariant.html"
    tags: ClassVar[list[str]] = ["sagemaker"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SageMaker::EndpointConfig").items():
            for path, variant in _variants(props):
                value = t.literal_int(variant.get("VariantInstanceProvisionTimeoutInSeconds"))
                if value is not None and not 300 <= value <= 3600:
                    yield (
                        (
                            "Resources",
                            lid,
                            "Properties",
                            *path,
                            "VariantInstanceProvisionTimeoutInSeconds",
                        ),
                        f"{value} s is outside 300-3600",
                    )


class ScalableTargetNamesItsResource(TemplateRule, CloudFormationLintRule):
    id = "E9104"
    shortdesc = (
        "RegisterScalableTarget: a SageMaker variant's ResourceId is endpoint/<endpoint "
        "name>/variant/<variant name> with ScalableDimension "
        "sagemaker:variant:DesiredInstanceCount (or DesiredProvisionedConcurrency, serverless); "
        "an ECS service's is service/<cluster>/<service> with ecs:service:DesiredCount; "
        "MinCapacity <= MaxCapacity, and a variant's MinCapacity is at least 1"
    )
    description = (
        "RegisterScalableTarget ResourceId and ScalableDimension formats; SageMaker developer "
        "guide 'Register a model': min capacity 'must be set to at least 1 and must be equal to "
        "or less than the value specified for max-capacity'. A ResourceId naming an endpoint or "
        "variant the template does not make registers nothing the policies can scale."
    )
    source_url = f"{AAS_API}/API_RegisterScalableTarget.html"
    tags: ClassVar[list[str]] = ["autoscaling", "sagemaker", "ecs"]

    def findings(self, template):
        endpoints = {}
        for props in t.resources(template, "AWS::SageMaker::Endpoint").values():
            name = props.get("EndpointName")
            config = t.resources(template, "AWS::SageMaker::EndpointConfig").get(
                t.ref_target(template, props.get("EndpointConfigName")) or ""
            )
            if isinstance(name, str) and config is not None:
                endpoints[name] = {
                    v.get("VariantName") for _, v in _variants(config) if v.get("VariantName")
                }
        for lid, props in t.resources(
            template, "AWS::ApplicationAutoScaling::ScalableTarget"
        ).items():
            where = ("Resources", lid, "Properties")
            low, high = (
                t.literal_int(props.get("MinCapacity")),
                t.literal_int(props.get("MaxCapacity")),
            )
            if low is not None and high is not None and low > high:
                yield (*where, "MinCapacity"), f"MinCapacity {low} exceeds MaxCapacity {high}"
            namespace, dimension = props.get("ServiceNamespace"), props.get("ScalableDimension")
            resource_id = t.joined_text(props.get("ResourceId"))
            variant_dimensions = (
                "sagemaker:variant:DesiredInstanceCount",
                "sagemaker:variant:DesiredProvisionedConcurrency",
            )
            if (
                namespace == "sagemaker"
                and resource_id is not None
                and (resource_id.startswith("endpoint/") or dimension in variant_dimensions)
            ):
                if dimension not in variant_dimensions:
                    yield (
                        (*where, "ScalableDimension"),
                        f"{dimension} is not a dimension of an endpoint variant",
                    )
                if low is not None and low < 1 and dimension == variant_dimensions[0]:
                    yield (
                        (*where, "MinCapacity"),
                        "a SageMaker variant scales between at least 1 instance",
                    )
                match = re.fullmatch(r"endpoint/([^/]+)/variant/([^/]+)", resource_id)
                if match is None:
                    yield (
                        (*where, "ResourceId"),
                        f"{resource_id!r} is not endpoint/<name>/variant/<variant>",
                    )
                elif "{}" not in resource_id and endpoints:
                    endpoint, variant = match.groups()
                    if endpoint not in endpoints:
                        yield (
                            (*where, "ResourceId"),
                            f"no endpoint {endpoint!r} in this template ({sorted(endpoints)})",
                        )
                    elif variant not in endpoints[endpoint]:
                        yield (
                            (*where, "ResourceId"),
                            f"endpoint {endpoint!r} has no variant {variant!r}",
                        )
            if namespace == "ecs":
                if dimension != "ecs:service:DesiredCount":
                    yield (
                        (*where, "ScalableDimension"),
                        f"{dimension} is not ecs:service:DesiredCount",
                    )
                if resource_id is not None and not re.fullmatch(
                    r"service/[^/]+/[^/]+", resource_id
                ):
                    yield (
                        (*where, "ResourceId"),
                        f"{resource_id!r} is not service/<cluster>/<service>",
                    )


class ContainerEnvironmentSize(TemplateRule, CloudFormationLintRule):
    id = "E9105"
    shortdesc = (
        "ContainerDefinition.Environment: each key and value at most 1024 bytes; all keys and "
        "values of a model's containers together at most 32 KB"
    )
    description = (
        "ContainerDefinition Environment: 'The maximum length of each key and value in the "
        "Environment map is 1024 bytes. The maximum length of all keys and values in the map, "
        "combined, is 32 KB. If you pass multiple containers to a CreateModel request, then the "
        "maximum length of all of their maps, combined, is also 32 KB.' Values CloudFormation "
        "computes count as 0 bytes (unknown)."
    )
    source_url = f"{SAGEMAKER_API}/API_ContainerDefinition.html"
    tags: ClassVar[list[str]] = ["sagemaker"]

    LIMIT, TOTAL = 1024, 32 * 1024

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
            containers = [(("PrimaryContainer",), props.get("PrimaryContainer"))]
            containers += [
                (("Containers", i), c) for i, c in enumerate(t.as_list(props.get("Containers")))
            ]
            total = 0
            for path, container in containers:
                env = (container or {}).get("Environment") if isinstance(container, dict) else None
                if not isinstance(env, dict):
                    continue
                for key, value in env.items():
                    size = [
                        len(str(x).encode()) if not t.is_intrinsic(x) else 0 for x in (key, value)
                    ]
                    total += sum(size)
                    if max(size) > self.LIMIT:
                        yield (
                            ("Resources", lid, "Properties", *path, "Environment", key),
                            f"{key}: {max(size)} bytes, over the {self.LIMIT}-byte limit",
                        )
            if total > self.TOTAL:
                yield (
                    ("Resources", lid, "Properties"),
                    f"the environment maps hold {total} bytes, over 32 KB",
                )


class InstancePoolPriorities(TemplateRule, CloudFormationLintRule):
    id = "E9106"
    shortdesc = (
        "InstancePool.Priority: valid values 1 to 5 (1 the highest); one pool per priority and "
        "per instance type (an ordered list of up to five instance types)"
    )
    description = (
        "AWS::SageMaker::EndpointConfig InstancePool, Priority: 'Valid values: 1 to 5, where 1 "
        "is the highest priority.' SageMaker developer guide, instance pools: 'an ordered list "
        "of up to five instance types'. Distinct priorities and types: implied by that order, "
        "unconfirmed as an API check."
    )
    source_url = (
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/"
        "aws-properties-sagemaker-endpointconfig-instancepool.html"
    )
    tags: ClassVar[list[str]] = ["sagemaker"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SageMaker::EndpointConfig").items():
            for path, variant in _variants(props):
                pools = [p for p in t.as_list(variant.get("InstancePools")) if isinstance(p, dict)]
                where = ("Resources", lid, "Properties", *path, "InstancePools")
                priorities = [t.literal_int(p.get("Priority")) for p in pools]
                for i, priority in enumerate(priorities):
                    if priority is not None and not 1 <= priority <= 5:
                        yield (*where, i, "Priority"), f"priority {priority} is outside 1-5"
                known = [p for p in priorities if p is not None]
                if len(set(known)) != len(known):
                    yield where, f"priorities {known} repeat"
                types = [
                    p.get("InstanceType") for p in pools if isinstance(p.get("InstanceType"), str)
                ]
                if len(set(types)) != len(types):
                    yield where, f"instance types {types} repeat"


class TargetTrackingMetric(TemplateRule, CloudFormationLintRule):
    id = "E9107"
    shortdesc = (
        "PutScalingPolicy, target tracking: either a predefined or a customized metric, not "
        "both; a customized metric is MetricName, Namespace and Statistic, or Metrics (a metric "
        "math query), not both; a predefined metric of the scaled service (SageMaker... for a "
        "variant, ECSService... or ALBRequestCountPerTarget for an ECS service); a ResourceLabel "
        "with ALBRequestCountPerTarget only"
    )
    description = (
        "TargetTrackingScalingPolicyConfiguration: 'You can specify either a predefined metric "
        "or a customized metric.' CustomizedMetricSpecification and "
        "PredefinedMetricSpecification (PredefinedMetricType: each service's own types; "
        "ResourceLabel: 'You can't specify a resource label unless the metric type is "
        "ALBRequestCountPerTarget and there is a target group attached'.)"
    )
    source_url = f"{AAS_API}/API_TargetTrackingScalingPolicyConfiguration.html"
    tags: ClassVar[list[str]] = ["autoscaling"]

    PREFIX: ClassVar[dict[str, tuple[str, ...]]] = {
        "sagemaker": ("SageMaker",),
        "ecs": ("ECSService", "ALBRequestCountPerTarget"),
    }

    def findings(self, template):
        targets = t.resources(template, "AWS::ApplicationAutoScaling::ScalableTarget")
        for lid, props in t.resources(
            template, "AWS::ApplicationAutoScaling::ScalingPolicy"
        ).items():
            config = props.get("TargetTrackingScalingPolicyConfiguration")
            if not isinstance(config, dict):
                continue
            where = ("Resources", lid, "Properties", "TargetTrackingScalingPolicyConfiguration")
            predefined = config.get("PredefinedMetricSpecification")
            custom = config.get("CustomizedMetricSpecification")
            if (predefined is None) == (custom is None):
                yield (
                    where,
                    (
                        "exactly one of PredefinedMetricSpecification and "
                        "CustomizedMetricSpecification"
                    ),
                )
            if isinstance(custom, dict):
                single = {"MetricName", "Namespace", "Statistic"} & set(custom)
                if custom.get("Metrics") and single:
                    yield (
                        (*where, "CustomizedMetricSpecification"),
                        f"Metrics cannot be combined with {sorted(single)}",
                    )
                if not custom.get("Metrics") and single != {"MetricName", "Namespace", "Statistic"}:
                    yield (
                        (*where, "CustomizedMetricSpecification"),
                        "needs MetricName, Namespace and Statistic",
                    )
            target = targets.get(t.ref_target(template, props.get("ScalingTargetId")) or "")
            namespace = (target or {}).get("ServiceNamespace") or props.get("ServiceNamespace")
            kind = (
                (predefined or {}).get("PredefinedMetricType")
                if isinstance(predefined, dict)
                else None
            )
            if (
                isinstance(kind, str)
                and namespace in self.PREFIX
                and not kind.startswith(self.PREFIX[namespace])
            ):
                yield (
                    (*where, "PredefinedMetricSpecification"),
                    f"{kind} is not a metric of {namespace}",
                )
            label = (
                (predefined or {}).get("ResourceLabel") if isinstance(predefined, dict) else None
            )
            if isinstance(kind, str) and (kind == "ALBRequestCountPerTarget") != (
                label is not None
            ):
                yield (
                    (*where, "PredefinedMetricSpecification"),
                    ("ResourceLabel goes with ALBRequestCountPerTarget, and only with it"),
                )


class ReplacedSageMakerResourcesHaveNoName(TemplateRule, CloudFormationLintRule):
    id = "E9108"
    shortdesc = (
        "To update an endpoint, you must create a new EndpointConfig: every change of an "
        "EndpointConfig (or Model) replaces it, so neither takes a fixed EndpointConfigName or "
        "ModelName"
    )
    description = (
        "CreateEndpoint / UpdateEndpoint: 'To update an endpoint, you must create a new "
        "EndpointConfig.' AWS::SageMaker::EndpointConfig and AWS::SageMaker::Model: every "
        "property is 'Update requires: Replacement'; CloudFormation cannot replace a resource "
        "with a custom name (the new one would take the name the old one still holds)."
    )
    source_url = f"{SAGEMAKER_API}/API_UpdateEndpoint.html"
    tags: ClassVar[list[str]] = ["sagemaker", "replacement"]

    def findings(self, template):
        for kind, name in (
            ("AWS::SageMaker::EndpointConfig", "EndpointConfigName"),
            ("AWS::SageMaker::Model", "ModelName"),
        ):
            for lid, props in t.resources(template, kind).items():
                if name in props:
                    yield (
                        ("Resources", lid, "Properties", name),
                        f"{name} is fixed: the next change cannot replace {lid}",
                    )


class ExecutionRoleOutlivesTheEndpoint(TemplateRule, CloudFormationLintRule):
    id = "E9109"
    shortdesc = (
        "DeleteEndpoint: do not delete or revoke the permissions of the model's "
        "ExecutionRoleArn, otherwise SageMaker cannot delete the endpoint's resources: every "
        "policy of that role in the template is one the Model depends on, so CloudFormation "
        "deletes it after the endpoint"
    )
    description = (
        "DeleteEndpoint: 'SageMaker retires any custom KMS key grants associated with the "
        "endpoint ... Do not delete or revoke the permissions for your ExecutionRoleArn, "
        "otherwise SageMaker cannot delete these resources.' CloudFormation deletes a resource "
        "only after every resource that depends on it; a policy nothing depends on may go first."
    )
    source_url = f"{SAGEMAKER_API}/API_DeleteEndpoint.html"
    tags: ClassVar[list[str]] = ["sagemaker", "iam", "destroy"]

    def findings(self, template):
        resources = template.get("Resources") or {}
        for lid, props in t.resources(template, "AWS::SageMaker::Model").items():
            role = t.ref_target(template, props.get("ExecutionRoleArn"))
            if role is None:
                continue
            needed = set(t.as_list(resources[lid].get("DependsOn"))) | t.references(props)
            for kind, key in (("AWS::IAM::Policy", "Roles"), ("AWS::IAM::ManagedPolicy", "Roles")):
                for pid, policy in t.resources(template, kind).items():
                    if role in t.references(policy.get(key)) and pid not in needed:
                        yield (
                            ("Resources", lid, "DependsOn"),
                            (
                                f"{pid} grants {role}'s permissions but {lid} does not depend on "
                                "it: a stack deletion may remove it while SageMaker still "
                                "deletes the endpoint"
                            ),
                        )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
