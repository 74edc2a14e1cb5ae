"""``connect.*``: live call transcription for Amazon Connect (docs/connect.md), the
``<prefix>-Connect`` stack. Its fields are those of :class:`ConnectTranscriptionProps`, whose
defaults they take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.context import setting
from config.section import Section
from constructs_lib.connect.props import (
    INSTANCE_ARN_PATTERN,
    KVS_ENDPOINT_REGIONS,
    ConnectTranscriptionProps,
)
from constructs_lib.facts.names import check_ecr_image_uri, check_kms_key_arn

if TYPE_CHECKING:
    from config.settings import Settings


@dataclass(frozen=True)
class ConnectSettings(Section):
    """Live call transcription for Amazon Connect (docs/connect.md): the ``<prefix>-Connect``
    stack."""

    #: Deploy the <prefix>-Connect stack (needs voxtral.enabled and instance_arn).
    enabled: bool = False
    #: The Amazon Connect instance (arn:aws:connect:REGION:ACCOUNT:instance/ID), in this app's
    #: region.
    instance_arn: str | None = None
    #: The instance's media streams prefix (data storage, "Live media streaming"): the consumers may
    #: read only streams whose names begin with it (unconfirmed: Connect names streams
    #: <prefix>-...).
    stream_prefix: str = "voice-live"
    #: Make the instance's MEDIA_STREAMS storage config (an instance has one: leave false if it is
    #: set already).
    create_storage_config: bool = setting(default_from=ConnectTranscriptionProps)
    #: Hours Kinesis Video Streams keeps call audio (the storage config; the consumer needs at least
    #: 1 to resume).
    retention_hours: int = setting(default_from=ConnectTranscriptionProps)
    #: The key Connect encrypts the streams with (the existing storage config's, or for the one made
    #: here); None = the data key (encryption.*).
    stream_kms_key_arn: str | None = setting(default_from=ConnectTranscriptionProps)
    #: Associate the start function with the instance (so flows can invoke it).
    associate_function: bool = setting(default_from=ConnectTranscriptionProps)
    #: Add an example contact flow (Start media streaming, invoke the function, transfer to queue).
    create_example_flow: bool = setting(default_from=ConnectTranscriptionProps)
    #: The queue the example flow transfers calls to
    #: (arn:aws:connect:REGION:ACCOUNT:instance/ID/queue/QUEUE_ID, e.g. the instance's BasicQueue);
    #: required with create_example_flow.
    queue_arn: str | None = setting(default_from=ConnectTranscriptionProps)
    #: Live calls one consumer task transcribes at once.
    calls_per_task: int = setting(default_from=ConnectTranscriptionProps)
    #: Consumer task minimum (these always run).
    min_tasks: int = setting(default_from=ConnectTranscriptionProps)
    #: Consumer task maximum.
    max_tasks: int = setting(default_from=ConnectTranscriptionProps)
    #: CPU units of a consumer task (1024 = 1 vCPU).
    cpu: int = setting(default_from=ConnectTranscriptionProps)
    #: Memory of a consumer task, MiB.
    memory_mib: int = setting(default_from=ConnectTranscriptionProps)
    #: Days a call's transcript is kept (the table's time to live).
    transcript_ttl_days: int = setting(default_from=ConnectTranscriptionProps)
    #: Alarm when the consumers read this many milliseconds behind the live call (MillisBehindNow,
    #: maximum).
    alarm_millis_behind: int = setting(default_from=ConnectTranscriptionProps)
    #: A consumer image built elsewhere (services/connect_consumer/Dockerfile); None = built from
    #: this repository at deploy.
    image_uri: str | None = setting(default_from=ConnectTranscriptionProps)
    #: With network.mode=vpc: make the Kinesis Video Streams interface endpoint
    #: (com.amazonaws.REGION.kinesisvideo, private DNS on, which then serves every Kinesis Video
    #: Streams client in the VPC, and WebRTC fails there), so that call audio stays in the VPC.
    #: False: the VPC has one already, or runs WebRTC (audio then leaves by egress); an existing VPC
    #: (network.vpc_id) only, as the VPC the app makes has no egress. The consumers' other endpoints
    #: (SQS, EventBridge, CloudWatch Logs, DynamoDB) come with network.create_endpoints.
    kvs_vpc_endpoint: bool = setting(default_from=ConnectTranscriptionProps)

    def problems(self, settings: Settings) -> list[str]:
        if not self.enabled:
            return []
        p = self.problems_named("connect.")
        region, network = settings.region, settings.network
        if self.instance_arn is None:
            p.add(
                "instance_arn",
                None,
                "must name the Amazon Connect instance when connect.enabled=true",
            )
        elif (match := INSTANCE_ARN_PATTERN.match(self.instance_arn)) and match.group(1) != region:
            p.add(
                "instance_arn",
                self.instance_arn,
                f"must be in the app's region {region} (a contact flow invokes functions of its "
                "own region)",
            )
        if not settings.voxtral.enabled:
            p.note(
                "connect.enabled=true needs voxtral.enabled=true (the consumers stream to the "
                "Voxtral endpoint)"
            )
        # network.mode=vpc: the network makes the consumers' endpoints (SQS, EventBridge, CloudWatch
        # Logs, the DynamoDB gateway; constructs_lib/network/props.py CONNECT_*_ENDPOINTS) when it
        # makes endpoints at all; with network.create_endpoints=false an existing VPC's own
        # endpoints or NAT serve them.
        made_vpc = network.private and network.vpc_id is None
        if made_vpc and not network.create_endpoints:
            p.note(
                "connect.enabled=true with network.mode=vpc, no network.vpc_id and "
                "network.create_endpoints=false leaves the consumers no way to SQS, "
                "EventBridge, DynamoDB, CloudWatch Logs and ECR: the VPC this app makes has no "
                "route to the internet; keep network.create_endpoints=true"
            )
        if made_vpc and not self.kvs_vpc_endpoint:
            p.add(
                "kvs_vpc_endpoint",
                False,
                "must be true with network.mode=vpc and no network.vpc_id: the VPC this app "
                "makes has no route to the internet, so the Kinesis Video Streams interface "
                "endpoint is the consumers' only way to the call audio",
            )
        if network.private and self.kvs_vpc_endpoint and region not in KVS_ENDPOINT_REGIONS:
            remedy = (
                "set it false, and call audio reaches Kinesis Video Streams through the "
                "subnets' egress"
                if network.vpc_id is not None
                else "name an existing VPC whose subnets have egress (network.vpc_id) and set it "
                "false: the VPC this app makes has none"
            )
            p.add(
                "kvs_vpc_endpoint",
                True,
                f"Kinesis Video Streams has no interface VPC endpoint in {region} (it has one in "
                f"{', '.join(sorted(KVS_ENDPOINT_REGIONS))}): {remedy}",
            )
        if self.image_uri is not None:
            check_ecr_image_uri(p, "image_uri", self.image_uri, region)
        if self.stream_kms_key_arn is not None:
            # Connect's EncryptionConfig KeyId is "the full ARN of the encryption key" and the
            # consumers' kms:Decrypt grant names it: a key ARN (no alias), in the app's region
            # (where Connect writes the streams).
            check_kms_key_arn(p, "stream_kms_key_arn", self.stream_kms_key_arn, region, alias=False)
        if self.instance_arn is not None:
            made_key = "the data key this app makes" if settings.makes_key else None
            self.props(
                settings,
                image_directory=".",
                kms_key_arn=settings.encryption.kms_key_arn or made_key,
            ).problems(p)
        return list(p)

    def props(self, settings: Settings, **kwargs: Any) -> ConnectTranscriptionProps:
        """The consumers' props: this section's, the Voxtral target they call, the app's
        retention, key and name prefix; ``kwargs`` on top."""
        on_ecs = settings.voxtral.target == "ecs"
        given: dict[str, Any] = {
            "instance_arn": self.instance_arn or "",
            "endpoint_name": None if on_ecs else settings.voxtral.endpoint_name,
            "endpoint_url": "wss://ecs" if on_ecs else None,
            "region": settings.region,
            "retain_data": settings.retain_data,
            "log_retention_days": settings.log_retention_days,
            "kms_key_arn": settings.encryption.kms_key_arn,
            "name_prefix": settings.stack_name_prefix,
        }
        return super().props(ConnectTranscriptionProps, **{**given, **kwargs})
