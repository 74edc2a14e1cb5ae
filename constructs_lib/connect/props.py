"""Props of :class:`~constructs_lib.connect.transcription.ConnectTranscription` and the facts they
are checked against (Amazon Connect, Kinesis Video Streams and Fargate rules; the construct's module
docstring gives each rule its source).

CDK-free (no ``aws_cdk`` import; CDK types appear in annotations only), like the other families'
props: the app's settings layer, which ``voicectl`` imports, builds and checks these props with
``connect.enabled=true`` without starting jsii.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from constructs_lib.validation import Problems

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2, aws_sns as sns

INSTANCE_ARN_PATTERN = re.compile(
    r"^arn:aws[a-z-]*:connect:([a-z0-9-]+):(\d{12}):instance/[0-9a-f-]{36}$"
)
QUEUE_ARN_PATTERN = re.compile(
    r"^(arn:aws[a-z-]*:connect:[a-z0-9-]+:\d{12}:instance/[0-9a-f-]{36})/queue/[0-9a-f-]{36}$"
)
"""A queue's ARN: <instance ARN>/queue/<queue id> (Amazon Connect's resource types, "queue")."""
STREAM_PREFIX_PATTERN = re.compile(r"^[a-zA-Z0-9_.-]{1,128}$")
"""InstanceStorageConfig Prefix: 1-128 characters; stream names allow [a-zA-Z0-9_.-]
(CreateStream)."""
MAX_RETENTION_HOURS = 87600
MAX_FLOW_CHARACTERS = 256000
METRIC_NAMESPACE = "VoiceConnect"
#: The dimension the consumers' metrics carry (value: the deployment's name prefix; the task
#: definition sets it in METRIC_DIMENSIONS), so that two deployments in one account and Region
#: write, scale and alarm on separate series: target tracking needs a metric that falls as the
#: service's own capacity grows (Application Auto Scaling user guide, "Target tracking scaling
#: policies").
METRIC_DIMENSION = "Deployment"
"""The consumers' metrics (services/connect_consumer/service.py, embedded metric format)."""
FUNCTION_TIMEOUT_S = 3
"""The start function answers within the flow block's InvocationTimeLimitSeconds (3 in the example
flow, at most 8)."""
QUEUE_VISIBILITY_S = 120
"""The consumer extends a running call's message every 60 s (services/connect_consumer/service.py
VISIBILITY_TIMEOUT_S)."""
SCALING_TARGET_FRACTION = 0.7
"""Calls per task autoscaling aims at, as a fraction of ``calls_per_task`` (room for a burst of new
calls)."""
MAX_RECEIVES = 5
"""A call message received this often without finishing goes to the dead-letter queue (alarmed:
calls dropped)."""
CALLS_WAITING_ALARM_MINUTES = 5
"""Minutes in a row with a call waiting for a full endpoint before the calls-waiting alarm fires: a
short wait while the endpoint scales out is expected, five minutes of a caller's words not
transcribed yet is not."""
ALARM_RULE_NAMES = (
    "calls-dropped",
    "calls-failed",
    "behind-real-time",
    "calls-waiting",
    "calls-untranscribed",
)
#: The alarm on the transcripts bus's dead-letter queue (a bus under a customer managed key only).
BUS_DEAD_LETTERS_RULE = "transcripts-undelivered"
KVS_ENDPOINT_PORT = 443
KVS_ENDPOINT_REGIONS = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-2",
        "ca-central-1",
        "sa-east-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-central-1",
        "eu-south-2",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-5",
        "ap-south-1",
        "ap-east-1",
        "af-south-1",
        "il-central-1",
        "cn-north-1",
        "us-gov-east-1",
        "us-gov-west-1",
    }
)
"""Regions with the ``com.amazonaws.REGION.kinesisvideo`` interface endpoint (Kinesis Video Streams
developer guide, "Access Amazon Kinesis Video Streams using AWS PrivateLink", Availability)."""
FARGATE_MEMORY_MIB: dict[int, tuple[int, ...]] = {
    256: (512, 1024, 2048),
    512: tuple(range(1024, 4096 + 1, 1024)),
    1024: tuple(range(2048, 8192 + 1, 1024)),
    2048: tuple(range(4096, 16384 + 1, 1024)),
    4096: tuple(range(8192, 30720 + 1, 1024)),
    8192: tuple(range(16384, 61440 + 1, 4096)),
    16384: tuple(range(32768, 122880 + 1, 8192)),
}
"""Task CPU units -> the task memory (MiB) Fargate accepts with it, on Linux (ECS
RegisterTaskDefinition API reference, ``memory``: "If using the Fargate launch type ... you must use
one of the following values"; 8192 and 16384 CPU units need Linux platform version 1.4.0 or later,
which LATEST is). Anything else fails at deploy with "No Fargate configuration exists for given
values"."""


@dataclass(frozen=True)
class ConnectTranscriptionProps:
    """Attributes: see the ``connect.*`` settings (README, "Amazon Connect")."""

    instance_arn: str
    stream_prefix: str
    image_directory: str
    image_uri: str | None = None  # a prebuilt consumer image instead of building image_directory
    endpoint_name: str | None = None  # the SageMaker target
    endpoint_url: str | None = None  # the ECS target's bridge URL (with token_secret_arn)
    token_secret_arn: str | None = None
    token_secret_kms_key_arn: str | None = (
        None  # the customer managed key token_secret_arn is encrypted with
    )
    create_storage_config: bool = False
    retention_hours: int = 24
    stream_kms_key_arn: str | None = None  # the key Connect encrypts the streams with
    associate_function: bool = True
    create_example_flow: bool = False
    queue_arn: str | None = (
        None  # the queue the example flow transfers calls to (the instance's BasicQueue, say)
    )
    calls_per_task: int = 50
    min_tasks: int = 1
    max_tasks: int = 10
    cpu: int = 1024
    memory_mib: int = 2048
    transcript_ttl_days: int = 7
    alarm_millis_behind: int = 10000
    retain_data: bool = False
    log_retention_days: int = 30
    kms_key_arn: str | None = (
        None  # the data key for the table, queue and logs (None: AWS-owned keys)
    )
    kvs_vpc_endpoint: bool = (
        True  # with vpc: the Kinesis Video Streams interface endpoint (see the module docstring)
    )
    region: str | None = (
        None  # the stack's region, to check the endpoint's availability (None: not checked)
    )
    vpc: ec2.IVpc | None = (
        None  # None: a VPC of public subnets only is made (tasks get public IPs, no NAT)
    )
    subnets: ec2.SubnetSelection | None = None
    security_groups: list[ec2.ISecurityGroup] = field(default_factory=list)
    alarm_topic: sns.ITopic | None = None
    name_prefix: str = "voice"

    def problems(self, p: Problems) -> None:
        if not INSTANCE_ARN_PATTERN.match(self.instance_arn):
            p.add(
                "instance_arn",
                self.instance_arn,
                "must be an Amazon Connect instance ARN "
                "(arn:aws:connect:REGION:ACCOUNT:instance/ID)",
            )
        if not STREAM_PREFIX_PATTERN.match(self.stream_prefix):
            p.add(
                "stream_prefix",
                self.stream_prefix,
                "must be 1-128 of [a-zA-Z0-9_.-] (InstanceStorageConfig "
                "Prefix; Kinesis video stream names)",
            )
        if not 1 <= self.retention_hours <= MAX_RETENTION_HOURS:
            p.add(
                "retention_hours",
                self.retention_hours,
                f"must be 1-{MAX_RETENTION_HOURS}: 0 keeps no data, and "
                "the consumer reads stored fragments to resume and to wait",
            )
        if self.create_storage_config and not (self.stream_kms_key_arn or self.kms_key_arn):
            p.add(
                "stream_kms_key_arn",
                None,
                "a media streams storage config needs a KMS key (EncryptionConfig is "
                "required): set it, or use a data key (encryption.*)",
            )
        if self.create_example_flow and self.queue_arn is None:
            p.add(
                "queue_arn",
                None,
                "must name the queue the example flow transfers calls to when "
                "create_example_flow=true (TransferContactToQueue uses the contact's target "
                "queue, which UpdateContactTargetQueue sets; an inbound call has none): the "
                "instance's BasicQueue ARN from the Connect console, Routing, Queues",
            )
        elif self.queue_arn is not None:
            match = QUEUE_ARN_PATTERN.match(self.queue_arn)
            if match is None:
                p.add(
                    "queue_arn",
                    self.queue_arn,
                    "must be an Amazon Connect queue ARN "
                    "(arn:aws:connect:REGION:ACCOUNT:instance/ID/queue/QUEUE_ID)",
                )
            elif match.group(1) != self.instance_arn:
                p.add(
                    "queue_arn",
                    self.queue_arn,
                    f"must be a queue of the instance {self.instance_arn} (a flow "
                    "can route only to its own instance's queues)",
                )
        if (
            self.kvs_vpc_endpoint
            and self.vpc is not None
            and self.region
            and self.region not in KVS_ENDPOINT_REGIONS
        ):
            p.add(
                "kvs_vpc_endpoint",
                True,
                f"Kinesis Video Streams has no interface VPC endpoint in {self.region}",
            )
        if (self.endpoint_name is None) == (self.endpoint_url is None):
            p.note("exactly one of endpoint_name (SageMaker) and endpoint_url (ECS) is set")
        if not 1 <= self.calls_per_task <= 100:
            p.add(
                "calls_per_task",
                self.calls_per_task,
                "must be 1-100 (one GetMedia reader thread per call: "
                "services/connect_consumer/kvs.py READER_THREADS)",
            )
        if not 1 <= self.min_tasks <= self.max_tasks:
            p.add(
                "min_tasks",
                self.min_tasks,
                f"must be at least 1 and at most max_tasks ({self.max_tasks})",
            )
        if not 1 <= self.transcript_ttl_days <= 3650:
            p.add("transcript_ttl_days", self.transcript_ttl_days, "must be 1-3650")
        if self.cpu not in FARGATE_MEMORY_MIB:
            p.add(
                "cpu",
                self.cpu,
                "must be Fargate task CPU units, one of "
                f"{', '.join(map(str, FARGATE_MEMORY_MIB))} (1024 = 1 vCPU)",
            )
        elif self.memory_mib not in FARGATE_MEMORY_MIB[self.cpu]:
            allowed = FARGATE_MEMORY_MIB[self.cpu]
            listed = (
                ", ".join(map(str, allowed))
                if len(allowed) <= 8
                else f"{allowed[0]}-{allowed[-1]} in steps of {allowed[1] - allowed[0]}"
            )
            p.add(
                "memory_mib",
                self.memory_mib,
                f"must be a memory Fargate pairs with connect.cpu={self.cpu}: "
                f"{listed} MiB (ECS task definition, Fargate CPU/memory)",
            )
        if self.alarm_millis_behind < 1:
            p.add(
                "alarm_millis_behind",
                self.alarm_millis_behind,
                "must be at least 1 (milliseconds behind the call)",
            )
