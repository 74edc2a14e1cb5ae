"""The rule book: rules AWS states in prose in its API references (and failures users report) that
no schema carries, each checked over a synthesized template dict. cfn-lint's schemas and cdk-nag do
not know them; a template that breaks one synthesizes, lints clean and then fails at deploy (or at
destroy) on real AWS.

Every rule is a cfn-lint custom rule (``cfn-lint --append-rules tools/cfn_rules``;
.cfnlintrc.yaml does this for the project's own lint run) and a pure function over a template dict
(:meth:`TemplateRule.findings`), which ``tests/conftest.py`` applies to every app the test session
synthesizes. Its ``shortdesc`` is the rule as AWS states it; ``source_url`` is where. The ids are in
cfn-lint's range for custom rules (E9xxx: none of its own). Where AWS does not document a value we
rely on, the text says "unconfirmed".

Why here (tools): the rules are a quality gate over templates, like cfn-lint and cdk-nag, not
part of the constructs (constructs_lib imports nothing of ours and must stay usable without them);
they read the instance catalogue (constructs_lib/facts/instance_types.py), a downward import.
"""

from __future__ import annotations

import functools
import json
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
ECS_API = "https://docs.aws.amazon.com/AmazonECS/latest/APIReference"
ELB_API = "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference"
EC2_API = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference"
KMS_API = "https://docs.aws.amazon.com/kms/latest/APIReference"
CW_API = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference"


def _variants(props: dict) -> Iterator[tuple[tuple, dict]]:
    for key in ("ProductionVariants", "ShadowProductionVariants"):
        for i, variant in enumerate(t.as_list(props.get(key))):
            if isinstance(variant, dict):
                yield (key, i), variant


# ---------------------------------------------------------------------------------------- SageMaker
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


# --------------------------------------------------------------------------------------- CloudWatch
class AlarmEvaluationWindow(TemplateRule, CloudFormationLintRule):
    id = "E9201"
    shortdesc = (
        "PutMetricAlarm: Period is 10, 20, 30 or a multiple of 60; Period x EvaluationPeriods is "
        "at most 604,800 s, and at most 86,400 s when Period is under an hour; DatapointsToAlarm "
        "<= EvaluationPeriods; a Metrics array has exactly one ReturnData expression and no "
        "MetricName, Namespace, Dimensions, Period, Unit, Statistic or ExtendedStatistic beside "
        "it"
    )
    description = "PutMetricAlarm, Period, DatapointsToAlarm ('M out of N') and Metrics."
    source_url = f"{CW_API}/API_PutMetricAlarm.html"
    tags: ClassVar[list[str]] = ["cloudwatch"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::CloudWatch::Alarm").items():
            where = ("Resources", lid, "Properties")
            periods = [t.literal_int(props.get("Period"))]
            metrics = [m for m in t.as_list(props.get("Metrics")) if isinstance(m, dict)]
            periods += [t.literal_int((m.get("MetricStat") or {}).get("Period")) for m in metrics]
            evaluations = t.literal_int(props.get("EvaluationPeriods"))
            for period in {p for p in periods if p is not None}:
                if period not in (10, 20, 30) and period % 60:
                    yield (
                        (*where, "Period"),
                        f"Period {period} is not 10, 20, 30 or a multiple of 60",
                    )
                if evaluations is not None:
                    limit = 86_400 if period < 3600 else 604_800
                    if period * evaluations > limit:
                        yield (
                            (*where, "EvaluationPeriods"),
                            (
                                f"{evaluations} x {period} s = {period * evaluations} s exceeds "
                                f"{limit} s"
                            ),
                        )
            datapoints = t.literal_int(props.get("DatapointsToAlarm"))
            if datapoints is not None and evaluations is not None and datapoints > evaluations:
                yield (
                    (*where, "DatapointsToAlarm"),
                    f"{datapoints} exceeds EvaluationPeriods {evaluations}",
                )
            if metrics:
                returned = [
                    m for m in metrics if t.literal_bool(m.get("ReturnData", True)) is not False
                ]
                if len(returned) != 1:
                    yield (
                        (*where, "Metrics"),
                        f"{len(returned)} entries return data; exactly one must",
                    )
                clash = sorted(
                    {
                        "MetricName",
                        "Namespace",
                        "Dimensions",
                        "Period",
                        "Unit",
                        "Statistic",
                        "ExtendedStatistic",
                    }
                    & set(props)
                )
                if clash:
                    yield (*where, "Metrics"), f"Metrics cannot be combined with {clash}"


# ---------------------------------------------------------------------------------------------- ECS
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


# -------------------------------------------------------------------------------------------- ELBv2
class LoadBalancerAttributes(TemplateRule, CloudFormationLintRule):
    id = "E9401"
    shortdesc = (
        "ELBv2 attributes: idle_timeout.timeout_seconds 1-4000; "
        "deregistration_delay.timeout_seconds 0-3600; an Application Load Balancer needs subnets "
        "in at least two Availability Zones"
    )
    description = (
        "LoadBalancerAttribute / TargetGroupAttribute keys and ranges; CreateLoadBalancer "
        "Subnets: '[Application Load Balancers] You must specify subnets from at least two "
        "Availability Zones.'"
    )
    source_url = f"{ELB_API}/API_LoadBalancerAttribute.html"
    tags: ClassVar[list[str]] = ["elbv2"]

    def findings(self, template):
        for lid, props in t.resources(
            template, "AWS::ElasticLoadBalancingV2::LoadBalancer"
        ).items():
            where = ("Resources", lid, "Properties")
            idle = t.literal_int(t.attributes(props).get("idle_timeout.timeout_seconds"))
            if idle is not None and not 1 <= idle <= 4000:
                yield (*where, "LoadBalancerAttributes"), f"idle timeout {idle} s is outside 1-4000"
            subnets = props.get("Subnets") or props.get("SubnetMappings")
            if (
                props.get("Type", "application") == "application"
                and isinstance(subnets, list)
                and len(subnets) < 2
            ):
                yield (
                    (*where, "Subnets"),
                    "an Application Load Balancer needs subnets in two Availability Zones",
                )
        for lid, props in t.resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").items():
            attributes = t.attributes(props, "TargetGroupAttributes")
            delay = t.literal_int(attributes.get("deregistration_delay.timeout_seconds"))
            if delay is not None and not 0 <= delay <= 3600:
                yield (
                    ("Resources", lid, "Properties", "TargetGroupAttributes"),
                    f"deregistration delay {delay} s is outside 0-3600",
                )


class TargetGroupHealthCheck(TemplateRule, CloudFormationLintRule):
    id = "E9402"
    shortdesc = (
        "CreateTargetGroup: health check interval 5-300 s, timeout 2-120 s and shorter than the "
        "interval, healthy and unhealthy thresholds 2-10, HTTP/HTTPS matcher codes 200-499"
    )
    description = (
        "CreateTargetGroup HealthCheckIntervalSeconds, HealthCheckTimeoutSeconds, "
        "HealthyThresholdCount, UnhealthyThresholdCount, Matcher. Timeout shorter than interval: "
        "the API refuses otherwise (ValidationError 'Health check interval must be greater than "
        "the timeout'; unconfirmed in the reference's prose)."
    )
    source_url = f"{ELB_API}/API_CreateTargetGroup.html"
    tags: ClassVar[list[str]] = ["elbv2"]

    RANGES: ClassVar[dict[str, tuple[int, int]]] = {
        "HealthCheckIntervalSeconds": (5, 300),
        "HealthCheckTimeoutSeconds": (2, 120),
        "HealthyThresholdCount": (2, 10),
        "UnhealthyThresholdCount": (2, 10),
    }

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").items():
            where = ("Resources", lid, "Properties")
            for key, (low, high) in self.RANGES.items():
                value = t.literal_int(props.get(key))
                if value is not None and not low <= value <= high:
                    yield (*where, key), f"{key} {value} is outside {low}-{high}"
            interval = t.literal_int(props.get("HealthCheckIntervalSeconds"))
            timeout = t.literal_int(props.get("HealthCheckTimeoutSeconds"))
            if interval is not None and timeout is not None and timeout >= interval:
                yield (
                    (*where, "HealthCheckTimeoutSeconds"),
                    (f"timeout {timeout} s is not below the interval {interval} s"),
                )
            code = (props.get("Matcher") or {}).get("HttpCode")
            if props.get("Protocol") in ("HTTP", "HTTPS") and isinstance(code, str):
                for part in re.split(r"[,-]", code):
                    if part.isdigit() and not 200 <= int(part) <= 499:
                        yield (*where, "Matcher"), f"HTTP code {part} is outside 200-499"


@functools.cache
def elb_log_accounts() -> frozenset[str]:
    """Elastic Load Balancing's account of each Region that has one (the Regions available before
    August 2022; newer ones use the log delivery service principal), from the CDK's own region facts
    (aws_cdk.region_info, ``elbv2_account``), which follow the table on the page of
    :class:`AccessLogBucket`."""
    from aws_cdk.region_info import RegionInfo

    return frozenset(r.elbv2_account for r in RegionInfo.regions if r.elbv2_account)


ELB_LOG_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"


class AccessLogBucket(TemplateRule, CloudFormationLintRule):
    id = "E9403"
    shortdesc = (
        "ALB access logs: the bucket's only supported server-side encryption is SSE-S3 (not "
        "SSE-KMS), the prefix must not include AWSLogs, and the bucket policy grants "
        "s3:PutObject on <prefix>/AWSLogs/<account>/* to the Region's Elastic Load Balancing "
        "account or to logdelivery.elasticloadbalancing.amazonaws.com"
    )
    description = (
        "Elastic Load Balancing user guide, 'Enable access logs for your Application Load "
        "Balancer'."
    )
    source_url = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html"
    tags: ClassVar[list[str]] = ["elbv2", "s3"]

    def findings(self, template):
        buckets = t.resources(template, "AWS::S3::Bucket")
        policies = t.resources(template, "AWS::S3::BucketPolicy")
        for lid, props in t.resources(
            template, "AWS::ElasticLoadBalancingV2::LoadBalancer"
        ).items():
            attrs = t.attributes(props)
            if t.literal_bool(attrs.get("access_logs.s3.enabled")) is not True:
                continue
            where = ("Resources", lid, "Properties", "LoadBalancerAttributes")
            prefix = attrs.get("access_logs.s3.prefix") or ""
            if isinstance(prefix, str) and "AWSLogs" in prefix:
                yield where, f"the access log prefix {prefix!r} must not include AWSLogs"
            bucket_id = t.ref_target(template, attrs.get("access_logs.s3.bucket"))
            if bucket_id is None or bucket_id not in buckets:
                continue  # a bucket of another stack or account: not visible here
            rules = (buckets[bucket_id].get("BucketEncryption") or {}).get(
                "ServerSideEncryptionConfiguration"
            ) or []
            for rule in rules:
                algorithm = (rule.get("ServerSideEncryptionByDefault") or {}).get("SSEAlgorithm")
                if algorithm not in (None, "AES256"):
                    yield (
                        ("Resources", bucket_id, "Properties", "BucketEncryption"),
                        (
                            f"access-log bucket encrypted with {algorithm}: ALB access logs "
                            "support SSE-S3 only"
                        ),
                    )
            statements = [
                s
                for p in policies.values()
                if t.ref_target(template, p.get("Bucket")) == bucket_id
                for s in t.as_list((p.get("PolicyDocument") or {}).get("Statement"))
            ]
            if not any(self._grants_delivery(s, prefix) for s in statements):
                yield (
                    where,
                    (
                        f"the policy of {bucket_id} grants s3:PutObject on "
                        f"{prefix or ''}/AWSLogs/<account>/* to neither the Region's ELB account "
                        "nor " + ELB_LOG_PRINCIPAL
                    ),
                )

    @staticmethod
    def _grants_delivery(statement: dict, prefix: str) -> bool:
        if statement.get("Effect") != "Allow" or "s3:PutObject" not in t.as_list(
            statement.get("Action")
        ):
            return False
        principal = statement.get("Principal") or {}
        text = repr(principal.get("AWS")) + repr(principal.get("Service"))
        by_account = any(account in text for account in elb_log_accounts())
        if not (by_account or ELB_LOG_PRINCIPAL in text):
            return False
        resources = [t.joined_text(r) or "" for r in t.as_list(statement.get("Resource"))]
        wanted = f"/{prefix}/AWSLogs/" if prefix else "/AWSLogs/"
        return any(wanted in r for r in resources)


# ---------------------------------------------------------------------------------------------- EC2
SG_TEXT = re.compile(r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]{0,255}")


class SecurityGroupText(TemplateRule, CloudFormationLintRule):
    id = "E9501"
    shortdesc = (
        "Security groups: descriptions (of the group and of each rule) are up to 255 characters "
        "of a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$*; a group name can't start with sg-; "
        "FromPort <= ToPort"
    )
    description = (
        "CreateSecurityGroup Description and GroupName; IpRange.Description; IpPermission."
    )
    source_url = f"{EC2_API}/API_CreateSecurityGroup.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        def rule_findings(where, rule):
            description = rule.get("Description")
            if isinstance(description, str) and not SG_TEXT.fullmatch(description):
                yield (
                    (*where, "Description"),
                    f"rule description {description!r} has characters EC2 refuses",
                )
            low, high = t.literal_int(rule.get("FromPort")), t.literal_int(rule.get("ToPort"))
            if (
                str(rule.get("IpProtocol")) not in ("-1", "icmp", "icmpv6", "1", "58")
                and low is not None
                and high is not None
                and low > high
            ):
                yield (*where, "FromPort"), f"FromPort {low} exceeds ToPort {high}"

        for lid, props in t.resources(template, "AWS::EC2::SecurityGroup").items():
            where = ("Resources", lid, "Properties")
            description = props.get("GroupDescription")
            if isinstance(description, str) and not SG_TEXT.fullmatch(description):
                yield (
                    (*where, "GroupDescription"),
                    f"{description!r} has characters EC2 refuses (or is too long)",
                )
            name = props.get("GroupName")
            if isinstance(name, str) and (
                name.lower().startswith("sg-") or not SG_TEXT.fullmatch(name)
            ):
                yield (*where, "GroupName"), f"group name {name!r} is not allowed"
            for key in ("SecurityGroupIngress", "SecurityGroupEgress"):
                for i, rule in enumerate(t.as_list(props.get(key))):
                    yield from rule_findings((*where, key, i), rule)
        for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            for lid, props in t.resources(template, kind).items():
                yield from rule_findings(("Resources", lid, "Properties"), props)


class VpcEndpointDns(TemplateRule, CloudFormationLintRule):
    id = "E9502"
    shortdesc = (
        "CreateVpcEndpoint: private DNS on an interface endpoint needs the VPC attributes "
        "enableDnsHostnames and enableDnsSupport true; subnets and security groups are for "
        "interface endpoints (one subnet per Availability Zone), route tables for gateway "
        "endpoints"
    )
    description = (
        "CreateVpcEndpoint PrivateDnsEnabled: 'To use a private hosted zone, you must set the "
        "following VPC attributes to true: enableDnsHostnames and enableDnsSupport.' "
        "RouteTableIds: '(Gateway endpoint)'; SubnetIds, SecurityGroupIds: '(Interface "
        "endpoint)'. One subnet per Availability Zone: AWS PrivateLink guide, 'Create an "
        "interface endpoint'."
    )
    source_url = f"{EC2_API}/API_CreateVpcEndpoint.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        vpcs = t.resources(template, "AWS::EC2::VPC")
        subnets = t.resources(template, "AWS::EC2::Subnet")
        for lid, props in t.resources(template, "AWS::EC2::VPCEndpoint").items():
            where = ("Resources", lid, "Properties")
            kind = props.get("VpcEndpointType", "Gateway")
            if kind == "Interface" and t.literal_bool(props.get("PrivateDnsEnabled")) is True:
                vpc = vpcs.get(t.ref_target(template, props.get("VpcId")) or "")
                if vpc is not None:
                    for attribute in ("EnableDnsHostnames", "EnableDnsSupport"):
                        default = (
                            attribute == "EnableDnsSupport"
                        )  # EC2 defaults: support on, hostnames off
                        if t.literal_bool(vpc.get(attribute, default)) is not True:
                            yield (
                                (*where, "PrivateDnsEnabled"),
                                f"private DNS needs the VPC's {attribute} true",
                            )
            if kind == "Gateway":
                for key in ("SubnetIds", "SecurityGroupIds", "PrivateDnsEnabled"):
                    if key in props:
                        yield (
                            (*where, key),
                            f"{key} is for interface endpoints, not gateway endpoints",
                        )
            elif kind == "Interface" and "RouteTableIds" in props:
                yield (*where, "RouteTableIds"), "RouteTableIds is for gateway endpoints"
            if kind == "Interface":
                zones = [
                    repr(subnets[s].get("AvailabilityZone"))
                    for s in (t.ref_target(template, x) for x in t.as_list(props.get("SubnetIds")))
                    if s in subnets
                ]
                if len(set(zones)) != len(zones):
                    yield (
                        (*where, "SubnetIds"),
                        "an interface endpoint takes one subnet per Availability Zone",
                    )


class OneEndpointPerServiceInAVpc(TemplateRule, CloudFormationLintRule):
    id = "E9503"
    shortdesc = (
        "CreateVpcEndpoint: one interface endpoint with private DNS per service in a VPC (its "
        "private hosted zone holds the service's default DNS name); one gateway endpoint per "
        "service on a route table"
    )
    description = (
        "CreateVpcEndpoint PrivateDnsEnabled associates 'a private hosted zone' holding 'the "
        "default public DNS name for the service for the Region' with the VPC: a second endpoint "
        "with private DNS for that service in the VPC is refused (EC2 answers that there is "
        "already a conflicting DNS domain). Gateway endpoints (Amazon VPC user guide, 'Gateway "
        "endpoints'): a route table cannot hold routes to one service through two endpoints. "
        "Checked within one template."
    )
    source_url = f"{EC2_API}/API_CreateVpcEndpoint.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        seen: dict[tuple[str, str], str] = {}
        tables: dict[tuple[str, str], str] = {}
        for lid, props in t.resources(template, "AWS::EC2::VPCEndpoint").items():
            where = ("Resources", lid, "Properties")
            kind = props.get("VpcEndpointType", "Gateway")
            service = json.dumps(props.get("ServiceName"), sort_keys=True)
            if kind == "Interface" and t.literal_bool(props.get("PrivateDnsEnabled")) is True:
                key = (json.dumps(props.get("VpcId"), sort_keys=True), service)
                if key in seen:
                    yield (
                        (*where, "ServiceName"),
                        f"{seen[key]} has private DNS for this service in the VPC already",
                    )
                seen.setdefault(key, lid)
            elif kind == "Gateway":
                for table in t.as_list(props.get("RouteTableIds")):
                    key = (json.dumps(table, sort_keys=True), service)
                    if key in tables:
                        yield (
                            (*where, "RouteTableIds"),
                            f"{tables[key]} routes this service on {table} already",
                        )
                    tables.setdefault(key, lid)


# ---------------------------------------------------------------------------------------------- KMS
class KeyPolicyKeepsTheKeyManageable(TemplateRule, CloudFormationLintRule):
    id = "E9601"
    shortdesc = (
        "CreateKey: the key policy must allow the account (its root principal) to manage the "
        "key, PutKeyPolicy included, and every statement must have a principal, an action and a "
        "resource; PendingWindowInDays is 7-30; automatic rotation only for symmetric encryption "
        "keys"
    )
    description = (
        "CreateKey Policy: 'The key policy must allow the calling principal to make a subsequent "
        "PutKeyPolicy request on the KMS key' (lockout safety check; the default key policy "
        "gives the account root kms:*); 'Each statement in the key policy must contain one or "
        "more principals'; statements missing Resource or Action have no effect. "
        "ScheduleKeyDeletion: 'it must be between 7 and 30, inclusive.' EnableKeyRotation: "
        "symmetric encryption KMS keys only."
    )
    source_url = f"{KMS_API}/API_CreateKey.html"
    tags: ClassVar[list[str]] = ["kms"]

    @staticmethod
    def _is_root(principal) -> bool:
        aws = t.as_list((principal or {}).get("AWS")) if isinstance(principal, dict) else []
        return any(
            re.search(r"(:root$|^\d{12}$|^\{\}$)", t.joined_text(p) or "")
            and (":root" in (t.joined_text(p) or "") or re.fullmatch(r"\d{12}", str(p)))
            for p in aws
        )

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::KMS::Key").items():
            where = ("Resources", lid, "Properties")
            window = t.literal_int(props.get("PendingWindowInDays"))
            if window is not None and not 7 <= window <= 30:
                yield (
                    (*where, "PendingWindowInDays"),
                    f"PendingWindowInDays {window} is outside 7-30",
                )
            spec = props.get("KeySpec", "SYMMETRIC_DEFAULT")
            if t.literal_bool(props.get("EnableKeyRotation")) and spec != "SYMMETRIC_DEFAULT":
                yield (
                    (*where, "EnableKeyRotation"),
                    f"rotation is for symmetric keys, not {props.get('KeySpec')}",
                )
            policy = props.get("KeyPolicy")
            if not isinstance(policy, dict):
                continue
            statements = t.as_list(policy.get("Statement"))
            for i, s in enumerate(statements):
                for element in ("Principal", "Action", "Resource"):
                    if element not in s and f"Not{element}" not in s:
                        yield (*where, "KeyPolicy", "Statement", i), f"statement without {element}"
            manageable = any(
                s.get("Effect") == "Allow"
                and self._is_root(s.get("Principal"))
                and {"kms:*", "kms:PutKeyPolicy", "*"} & set(t.as_list(s.get("Action")))
                for s in statements
            )
            if (
                not manageable
                and t.literal_bool(props.get("BypassPolicyLockoutSafetyCheck")) is not True
            ):
                yield (
                    (*where, "KeyPolicy"),
                    (
                        "no statement lets the account root manage the key (kms:* or "
                        "kms:PutKeyPolicy)"
                    ),
                )


LOGS_KEY_ACTIONS = (
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
)


class LogGroupKeyLetsCloudWatchLogsIn(TemplateRule, CloudFormationLintRule):
    id = "E9602"
    shortdesc = (
        "A log group encrypted with a KMS key: the key policy must allow the CloudWatch Logs "
        "service principal (logs.<region>.amazonaws.com) kms:Encrypt*, kms:Decrypt*, "
        "kms:ReEncrypt*, kms:GenerateDataKey* and kms:Describe*, with any "
        "kms:EncryptionContext:aws:logs:arn condition covering the group's ARN; else creating "
        "the group fails"
    )
    description = (
        "CloudWatch Logs user guide, 'Encrypt log data in CloudWatch Logs using AWS KMS': the "
        "key policy statement for logs.<region>.amazonaws.com, optionally limited with "
        "kms:EncryptionContext:aws:logs:arn; CreateLogGroup or AssociateKmsKey fails when the "
        "key does not allow it. Checked across the app's stacks (the key may be another stack's "
        "export); a group without LogGroupName has CloudFormation's name <stack>-<logical "
        "id>-<suffix>."
    )
    source_url = (
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html"
    )
    tags: ClassVar[list[str]] = ["logs", "kms"]
    app_level = True

    def findings(self, template):
        """One template alone (cfn-lint's run): its stack name, part of a generated group name, is
        unknown."""
        for _stack, path, message in self.app_findings({"Template": template}, stack_names=False):
            yield path, message

    def app_findings(self, templates: dict[str, dict], stack_names: bool = True):
        """Findings over the app's ``templates`` (``{stack name: template}``)."""
        import fnmatch

        keys = {
            (stack, lid): props
            for stack, tpl in templates.items()
            for lid, props in t.resources(tpl, "AWS::KMS::Key").items()
        }
        for stack, tpl in templates.items():
            for lid, props in t.resources(tpl, "AWS::Logs::LogGroup").items():
                key = t.resolve(templates, stack, props.get("KmsKeyId"))
                if key is None or key not in keys:
                    continue
                name = props.get("LogGroupName")
                name = (
                    name if isinstance(name, str) else f"{stack}-{lid}-*" if stack_names else None
                )
                statements = [
                    s
                    for s in t.as_list((keys[key].get("KeyPolicy") or {}).get("Statement"))
                    if s.get("Effect") == "Allow"
                    and "logs." in repr((s.get("Principal") or {}).get("Service"))
                ]
                granted = [
                    s
                    for s in statements
                    if all(
                        any(
                            fnmatch.fnmatchcase(want, a) or a in ("kms:*", want)
                            for a in t.as_list(s.get("Action"))
                        )
                        for want in LOGS_KEY_ACTIONS
                    )
                ]
                where = ("Resources", lid, "Properties", "KmsKeyId")
                if not granted:
                    yield (
                        stack,
                        where,
                        (
                            f"the policy of key {key[1]} ({key[0]}) does not let CloudWatch Logs "
                            "use it"
                        ),
                    )
                    continue
                if name is not None and not any(self._covers(s, name) for s in granted):
                    yield (
                        stack,
                        where,
                        (
                            f"key {key[1]}'s CloudWatch Logs statement limits "
                            f"kms:EncryptionContext:aws:logs:arn to log groups that {name!r} is not"
                        ),
                    )

    @staticmethod
    def _covers(statement: dict, name: str) -> bool:
        import fnmatch

        patterns = []
        for _operator, block in (statement.get("Condition") or {}).items():
            for key, value in (block or {}).items():
                if key.lower() == "kms:encryptioncontext:aws:logs:arn":
                    patterns += [t.joined_text(v) or "" for v in t.as_list(value)]
        if not patterns:
            return True
        groups = [p.split(":log-group:", 1)[1] for p in patterns if ":log-group:" in p]
        return any(
            fnmatch.fnmatchcase(name.replace("*", "x"), g.replace("{}", "*")) for g in groups
        )


# ----------------------------------------------------------------------------------------------- S3
class BucketPolicyResources(TemplateRule, CloudFormationLintRule):
    id = "E9701"
    shortdesc = (
        "PutBucketPolicy: every statement has a principal, and every resource is the bucket the "
        "policy is attached to or its objects (else 'Policy has invalid resource')"
    )
    description = (
        "Amazon S3 user guide, bucket policies: a bucket policy's resources are the bucket and its "
        "objects; PutBucketPolicy refuses others (MalformedPolicy 'Policy has invalid resource')."
    )
    source_url = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html"
    tags: ClassVar[list[str]] = ["s3"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::S3::BucketPolicy").items():
            bucket = t.ref_target(template, props.get("Bucket"))
            name = props.get("Bucket") if isinstance(props.get("Bucket"), str) else None
            for i, s in enumerate(t.as_list((props.get("PolicyDocument") or {}).get("Statement"))):
                where = ("Resources", lid, "Properties", "PolicyDocument", "Statement", i)
                if "Principal" not in s and "NotPrincipal" not in s:
                    yield where, "a bucket policy statement needs a Principal"
                for resource in t.as_list(s.get("Resource")):
                    names = t.references(resource)
                    text = t.joined_text(resource)
                    if bucket and names and bucket not in names:
                        yield (
                            (*where, "Resource"),
                            f"{resource} is not bucket {bucket} or its objects",
                        )
                    elif (
                        name
                        and isinstance(text, str)
                        and not names
                        and not re.fullmatch(rf"arn:aws[a-z-]*:s3:::{re.escape(name)}(/.*)?", text)
                    ):
                        yield (*where, "Resource"), f"{text} is not bucket {name} or its objects"


class DeletedStoresAreEmptiedFirst(TemplateRule, CloudFormationLintRule):
    id = "E9702"
    shortdesc = (
        "DeleteBucket: all objects (versions and delete markers included) must be deleted before "
        "the bucket; DeleteRepository: a repository that holds images is deleted only with force "
        "(EmptyOnDelete): a bucket or repository CloudFormation deletes is emptied first, or the "
        "stack deletion fails"
    )
    description = (
        "Amazon S3 API reference, DeleteBucket: 'All objects (including all object versions and "
        "delete markers) in the bucket must be deleted before the bucket itself can be deleted.' "
        "Amazon ECR, DeleteRepository: 'If the repository isn't empty, you must either delete "
        "the contents of the repository or use the force option' (CloudFormation's "
        "EmptyOnDelete). A bucket is emptied by a custom resource naming it (CDK's "
        "Custom::S3AutoDeleteObjects). Retained ones are not checked."
    )
    source_url = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucket.html"
    tags: ClassVar[list[str]] = ["s3", "ecr", "destroy"]

    def findings(self, template):
        resources = template.get("Resources") or {}
        for lid, resource in resources.items():
            if (
                not isinstance(resource, dict)
                or resource.get("DeletionPolicy", "Delete") != "Delete"
            ):
                continue
            if resource.get("Type") == "AWS::S3::Bucket":
                emptied = any(
                    str(r.get("Type")).startswith("Custom::")
                    and lid in t.references(r.get("Properties"))
                    and "AutoDelete" in str(r.get("Type"))
                    for r in resources.values()
                )
                if not emptied:
                    yield (
                        ("Resources", lid, "DeletionPolicy"),
                        f"{lid} is deleted with the stack but nothing empties it",
                    )
            if (
                resource.get("Type") == "AWS::ECR::Repository"
                and t.literal_bool((resource.get("Properties") or {}).get("EmptyOnDelete"))
                is not True
            ):
                yield (
                    ("Resources", lid, "Properties", "EmptyOnDelete"),
                    f"{lid} is deleted with the stack but EmptyOnDelete is not true",
                )


# ---------------------------------------------------------------------------------- Secrets Manager
class SecretValueSource(TemplateRule, CloudFormationLintRule):
    id = "E9801"
    shortdesc = (
        "AWS::SecretsManager::Secret: SecretString or GenerateSecretString, not both; a generated "
        "password is 1-4096 characters long"
    )
    description = (
        "CloudFormation AWS::SecretsManager::Secret ('Either SecretString or "
        "GenerateSecretString must have a value, but not both'); GetRandomPassword "
        "PasswordLength 1-4096."
    )
    source_url = (
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
        "aws-resource-secretsmanager-secret.html"
    )
    tags: ClassVar[list[str]] = ["secretsmanager"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SecretsManager::Secret").items():
            where = ("Resources", lid, "Properties")
            if "SecretString" in props and "GenerateSecretString" in props:
                yield where, "SecretString and GenerateSecretString exclude each other"
            length = t.literal_int((props.get("GenerateSecretString") or {}).get("PasswordLength"))
            if length is not None and not 1 <= length <= 4096:
                yield (
                    (*where, "GenerateSecretString", "PasswordLength"),
                    f"PasswordLength {length} is outside 1-4096",
                )


# ---------------------------------------------------------------------------------------- CodeBuild
class CodeBuildEnvironment(TemplateRule, CloudFormationLintRule):
    id = "E9901"
    shortdesc = (
        "CodeBuild: an aws/codebuild/standard image runs in a LINUX_CONTAINER (or "
        "LINUX_GPU_CONTAINER) environment, an amazonlinux-aarch64 image in an ARM_CONTAINER; "
        "TimeoutInMinutes is 5-2160 and QueuedTimeoutInMinutes 5-480"
    )
    description = (
        "CodeBuild user guide, 'Docker images provided by CodeBuild' (each image's environment "
        "type); CreateProject timeoutInMinutes and queuedTimeoutInMinutes."
    )
    source_url = (
        "https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-available.html"
    )
    tags: ClassVar[list[str]] = ["codebuild"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::CodeBuild::Project").items():
            where = ("Resources", lid, "Properties")
            env = props.get("Environment") or {}
            image, kind = env.get("Image"), env.get("Type")
            if (
                isinstance(image, str)
                and image.startswith("aws/codebuild/standard:")
                and kind not in ("LINUX_CONTAINER", "LINUX_GPU_CONTAINER")
            ):
                yield (*where, "Environment", "Type"), f"{image} needs LINUX_CONTAINER, not {kind}"
            arm = isinstance(image, str) and image.startswith("aws/codebuild/amazonlinux-aarch64")
            if arm and kind != "ARM_CONTAINER":
                yield (*where, "Environment", "Type"), f"{image} needs ARM_CONTAINER, not {kind}"
            for key, (low, high) in {
                "TimeoutInMinutes": (5, 2160),
                "QueuedTimeoutInMinutes": (5, 480),
            }.items():
                value = t.literal_int(props.get(key))
                if value is not None and not low <= value <= high:
                    yield (*where, key), f"{key} {value} is outside {low}-{high}"


#: Every rule of the book, in id order.
RULES: tuple[type[TemplateRule], ...] = tuple(
    sorted(
        (
            c
            for c in list(globals().values())
            if isinstance(c, type) and issubclass(c, TemplateRule) and c is not TemplateRule
        ),
        key=lambda c: c.id,
    )
)
