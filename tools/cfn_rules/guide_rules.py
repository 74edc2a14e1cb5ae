"""Rules the service developer guides state in prose (a "must", "can't", "only" or "fails if") that
neither the API references' checks of :mod:`aws_rules` nor the grants of :mod:`required_grants`
cover, each checked over a synthesized template dict. Where AWS does not document a fact, the rule's
text says "unconfirmed".
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

#: RollingUpdatePolicy MaximumBatchSize: "Value must be between 5% to 50% of the variant's total
#: instance count."
BATCH_PERCENT_RANGE = (5, 50)


class RollingUpdateBatchSize(TemplateRule, CloudFormationLintRule):
    id = "E9111"
    shortdesc = (
        "RollingUpdatePolicy MaximumBatchSize: CAPACITY_PERCENT between 5 and 50, and a whole "
        "instance at least of the variant's initial count (how SageMaker rounds a percent below "
        "one instance is unconfirmed: state INSTANCE_COUNT 1 instead); INSTANCE_COUNT at least 1"
    )
    description = (
        "RollingUpdatePolicy MaximumBatchSize: 'Value must be between 5% to 50% of the variant's "
        "total instance count.' CapacitySize Value: minimum 1. The rounding of a percent below "
        "one instance is not documented (SageMaker developer guide, 'Use rolling deployments': "
        "unconfirmed). The same sentence read for INSTANCE_COUNT would refuse a batch of 1 on a "
        "one-instance variant (100 %); whether SageMaker applies it to INSTANCE_COUNT, or "
        "accepts a rolling update of a single instance, is unconfirmed: the rule checks the "
        "range for CAPACITY_PERCENT only."
    )
    source_url = (
        "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_RollingUpdatePolicy.html"
    )
    tags: ClassVar[list[str]] = ["sagemaker"]

    def findings(self, template):
        configs = t.resources(template, "AWS::SageMaker::EndpointConfig")
        for lid, props in t.resources(template, "AWS::SageMaker::Endpoint").items():
            policy = (props.get("DeploymentConfig") or {}).get("RollingUpdatePolicy") or {}
            size = policy.get("MaximumBatchSize") or {}
            kind, value = size.get("Type"), t.literal_int(size.get("Value"))
            if value is None:
                continue
            where = (
                "Resources",
                lid,
                "Properties",
                "DeploymentConfig",
                "RollingUpdatePolicy",
                "MaximumBatchSize",
            )
            if value < 1:
                yield where, f"a batch of {value} is below the minimum 1"
            if kind != "CAPACITY_PERCENT":
                continue
            low, high = BATCH_PERCENT_RANGE
            if not low <= value <= high:
                yield where, f"{value} % is outside {low}-{high} %"
            config = configs.get(t.ref_target(template, props.get("EndpointConfigName")) or "", {})
            counts = [
                t.literal_int(v.get("InitialInstanceCount"))
                for v in t.as_list(config.get("ProductionVariants"))
            ]
            for count in (c for c in counts if c is not None):
                if count * value < 100:
                    yield (
                        where,
                        (
                            f"{value} % of {count} instance(s) is less than one instance (rounding "
                            "unconfirmed): use INSTANCE_COUNT 1"
                        ),
                    )


class TargetTrackingMetricIsTheTargets(TemplateRule, CloudFormationLintRule):
    id = "E9112"
    shortdesc = (
        "Target tracking on a customized metric: the metric must change in inverse proportion to "
        "the scalable target's capacity, so it names dimensions of its own (a metric without "
        "dimensions is the sum of every writer of the namespace, another deployment's included)"
    )
    description = (
        "Application Auto Scaling user guide, 'Target tracking scaling policies': the metric "
        "'must increase or decrease in inverse proportion to the number of capacity units'. A "
        "customized metric with no Dimensions (and no metric math) is shared by whatever else "
        "writes that name to the namespace: the dimension requirement is this rule's reading of "
        "that sentence."
    )
    source_url = (
        "https://docs.aws.amazon.com/autoscaling/application/userguide/"
        "application-auto-scaling-target-tracking.html"
    )
    tags: ClassVar[list[str]] = ["autoscaling"]

    def findings(self, template):
        for lid, props in t.resources(
            template, "AWS::ApplicationAutoScaling::ScalingPolicy"
        ).items():
            config = props.get("TargetTrackingScalingPolicyConfiguration") or {}
            custom = config.get("CustomizedMetricSpecification")
            if (
                isinstance(custom, dict)
                and not custom.get("Metrics")
                and not t.as_list(custom.get("Dimensions"))
            ):
                yield (
                    (
                        "Resources",
                        lid,
                        "Properties",
                        "TargetTrackingScalingPolicyConfiguration",
                        "CustomizedMetricSpecification",
                    ),
                    f"{custom.get('Namespace')}/{custom.get('MetricName')} has no dimensions: "
                    "every writer of it counts, not only this target's capacity",
                )


class FargateTaskDefinition(TemplateRule, CloudFormationLintRule):
    id = "E9310"
    shortdesc = (
        "A Fargate task definition: network mode awsvpc, task CPU and memory one of Fargate's "
        "pairs, and no GPU"
    )
    description = (
        "Amazon ECS developer guide, 'Amazon ECS task definition differences for Fargate': "
        "'Fargate task definitions require that the network mode is set to awsvpc'; task CPU and "
        "memory must be one of the supported combinations (the table of "
        "constructs_lib/connect/props.py FARGATE_MEMORY_MIB); GPUs are not supported on Fargate "
        "('Amazon ECS task definitions for GPU workloads')."
    )
    source_url = (
        "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-tasks-services.html"
    )
    tags: ClassVar[list[str]] = ["ecs", "fargate"]

    def findings(self, template):
        from constructs_lib.connect.props import FARGATE_MEMORY_MIB

        for lid, props in t.resources(template, "AWS::ECS::TaskDefinition").items():
            if "FARGATE" not in t.as_list(props.get("RequiresCompatibilities")):
                continue
            where = ("Resources", lid, "Properties")
            if props.get("NetworkMode") != "awsvpc":
                yield (
                    (*where, "NetworkMode"),
                    f"a Fargate task needs awsvpc, not {props.get('NetworkMode')}",
                )
            cpu, memory = t.literal_int(props.get("Cpu")), t.literal_int(props.get("Memory"))
            if (
                cpu is not None
                and memory is not None
                and memory not in FARGATE_MEMORY_MIB.get(cpu, ())
            ):
                yield (*where, "Memory"), f"{cpu} CPU units and {memory} MiB are not a Fargate pair"
            for i, container in enumerate(t.as_list(props.get("ContainerDefinitions"))):
                if any(
                    r.get("Type") == "GPU" for r in t.as_list(container.get("ResourceRequirements"))
                ):
                    yield (*where, "ContainerDefinitions", i), "Fargate does not support GPUs"


class QueueRedrive(TemplateRule, CloudFormationLintRule):
    id = "E9113"
    shortdesc = (
        "SQS redrive: the dead-letter queue of a standard queue is standard and of a FIFO queue "
        "FIFO; maxReceiveCount 1-1000; the dead-letter queue keeps messages longer than the "
        "source queue (expiry counts from the original enqueue time)"
    )
    description = (
        "Amazon SQS developer guide, 'Using dead-letter queues in Amazon SQS': 'The dead-letter "
        "queue of a FIFO queue must also be a FIFO queue. Similarly, the dead-letter queue of a "
        "standard queue must also be a standard queue'; 'The expiration of a message is always "
        "based on its original enqueue timestamp ... always set the retention period of a "
        "dead-letter queue to be longer than the retention period of the original queue.' "
        "RedrivePolicy maxReceiveCount: 1 to 1,000."
    )
    source_url = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html"
    tags: ClassVar[list[str]] = ["sqs"]

    #: SQS's default MessageRetentionPeriod, seconds (4 days; CreateQueue).
    DEFAULT_RETENTION_S = 345_600

    def findings(self, template):
        queues = t.resources(template, "AWS::SQS::Queue")
        for lid, props in queues.items():
            redrive = props.get("RedrivePolicy")
            if not isinstance(redrive, dict):
                continue
            where = ("Resources", lid, "Properties", "RedrivePolicy")
            count = t.literal_int(redrive.get("maxReceiveCount"))
            if count is not None and not 1 <= count <= 1000:
                yield where, f"maxReceiveCount {count} is outside 1-1000"
            target = t.ref_target(template, redrive.get("deadLetterTargetArn"))
            if target not in queues:
                continue
            dlq = queues[target]
            if bool(t.literal_bool(props.get("FifoQueue"))) != bool(
                t.literal_bool(dlq.get("FifoQueue"))
            ):
                yield (
                    where,
                    f"{lid} and its dead-letter queue {target} are not both standard or both FIFO",
                )
            source = t.literal_int(props.get("MessageRetentionPeriod")) or self.DEFAULT_RETENTION_S
            kept = t.literal_int(dlq.get("MessageRetentionPeriod")) or self.DEFAULT_RETENTION_S
            if kept <= source:
                yield (
                    where,
                    (
                        f"{target} keeps messages {kept} s, not longer than {lid}'s {source} s: "
                        "a message moved late expires there at once"
                    ),
                )


class KeyPolicySize(TemplateRule, CloudFormationLintRule):
    id = "E9603"
    shortdesc = "A key policy document is at most 32 KB (32,768 bytes)"
    description = (
        "AWS KMS developer guide, 'Quotas', resource quotas: 'Key policy document size: 32 KB "
        "(32,768 bytes)'. Measured on the template's JSON (intrinsics count as written)."
    )
    source_url = "https://docs.aws.amazon.com/kms/latest/developerguide/resource-limits.html"
    tags: ClassVar[list[str]] = ["kms"]

    LIMIT = 32_768

    def findings(self, template):
        import json

        for lid, props in t.resources(template, "AWS::KMS::Key").items():
            size = len(json.dumps(props.get("KeyPolicy") or {}, separators=(",", ":")).encode())
            if size > self.LIMIT:
                yield (
                    ("Resources", lid, "Properties", "KeyPolicy"),
                    f"the key policy is {size} bytes, over 32 KB",
                )


class ContactFlowContent(TemplateRule, CloudFormationLintRule):
    id = "E9114"
    shortdesc = (
        "AWS::Connect::ContactFlow Content: the flow language JSON is at most 256,000 characters"
    )
    description = (
        "AWS::Connect::ContactFlow Content: 'Length constraints: Minimum length of 1. Maximum "
        "length of 256000.' Measured on the literal text (an Fn::Sub template's text, its "
        "variables unexpanded)."
    )
    source_url = (
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
        "aws-resource-connect-contactflow.html"
    )
    tags: ClassVar[list[str]] = ["connect"]

    LIMIT = 256_000

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::Connect::ContactFlow").items():
            content = props.get("Content")
            if isinstance(content, dict) and "Fn::Sub" in content:
                sub = content["Fn::Sub"]
                content = sub[0] if isinstance(sub, list) else sub
            if isinstance(content, str) and not 1 <= len(content) <= self.LIMIT:
                yield (
                    ("Resources", lid, "Properties", "Content"),
                    f"{len(content)} characters, not 1-256000",
                )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
