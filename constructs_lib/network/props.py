"""Props of :class:`constructs_lib.network.private_network.PrivateNetwork` and
:class:`constructs_lib.network.encryption.DataKey`, with their checks and the facts they rest on.
CDK-free (no ``aws_cdk`` import): the app's settings layer runs the same checks.

Sources:

* SageMaker developer guide, "Give SageMaker AI Hosted Endpoints Access to Resources in Your Amazon
  VPC" (https://docs.aws.amazon.com/sagemaker/latest/dg/host-vpc.html): a Model's ``VpcConfig``
  needs subnets in at least two Availability Zones ("even if you have only one hosting instance");
  without internet access the model containers reach S3 only through an S3 VPC endpoint.
* Resource id forms: :mod:`constructs_lib.facts.names`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from constructs_lib.facts.names import (
    ROUTE_TABLE_ID_RE,
    SECURITY_GROUP_ID_RE,
    SUBNET_ID_RE,
    VPC_ID_RE,
    check_ids,
    check_kms_key_arn,
    is_token,
)
from constructs_lib.validation import Problems

#: An Availability Zone name: the Region code plus one letter (``us-east-1a``).
AVAILABILITY_ZONE_RE = re.compile(r"(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d)[a-z]")
#: SageMaker hosting in a VPC: subnets in at least this many Availability Zones (host-vpc page, see
#: module docstring).
MIN_AVAILABILITY_ZONES = 2
#: Prefix lengths a VPC's CIDR block may have (Amazon VPC user guide, "VPC CIDR blocks": /16 to
#: /28).
VPC_PREFIX_RANGE = (16, 28)
#: The address range of a VPC the stack creates, unless given: a /16 from RFC 1918 space.
DEFAULT_VPC_CIDR = "10.80.0.0/16"

#: Ports a caller of the SageMaker runtime VPC endpoint uses: 443 (InvokeEndpoint, response
#: streaming) and 8443 (bidirectional streaming over HTTP/2). 8443 is reported by third parties, not
#: by AWS documentation: unconfirmed.
RUNTIME_PORTS = (443, 8443)

#: Interface endpoints ECS container instances and tasks need in subnets with no route to the
#: internet, beyond the S3 gateway and ECR endpoints SageMaker uses too: ``{construct id: (service
#: name suffix, who calls it)}``. Sources: Amazon ECS developer guide, "Amazon ECS interface VPC
#: endpoints (AWS PrivateLink)" (``ecs-agent``, ``ecs-telemetry`` and ``ecs`` for the container
#: agent; ``secretsmanager`` to inject secrets; ``logs`` for the awslogs driver); CloudWatch agent
#: user guide (``monitoring`` for PutMetricData; ``ec2`` for DescribeTags, which resolves the
#: ``${aws:AutoScalingGroupName}`` dimension). Not needed: SSM (CloudFormation resolves the GPU
#: AMI's public parameter at deploy time; the agent reads no parameter and ECS Exec is off), STS
#: (instances get credentials from IMDS, tasks from the agent), KMS (S3, Logs and Secrets Manager
#: decrypt on the service side), ``ecr.api``/``ecr.dkr`` and S3 (made for SageMaker already). The
#: AL2023 package repositories the user data installs the CloudWatch agent from are S3 buckets,
#: reached through the S3 gateway endpoint.
ECS_INTERFACE_ENDPOINTS: dict[str, tuple[str, str]] = {
    "Ecs": ("ecs", "the container agent (registration, task state, task scale-in protection)"),
    "EcsAgent": ("ecs-agent", "the container agent's connection for tasks and credentials"),
    "EcsTelemetry": ("ecs-telemetry", "the container agent's metrics (Container Insights)"),
    "Logs": ("logs", "the awslogs log driver (the bridge's logs and embedded-format metrics)"),
    "Monitoring": ("monitoring", "the CloudWatch agent's GPU metrics (PutMetricData)"),
    "SecretsManager": ("secretsmanager", "the agent injects the bearer token into tasks"),
    "Ec2": ("ec2", "the CloudWatch agent's DescribeTags (the Auto Scaling group dimension)"),
}


#: Endpoints the Amazon Connect transcription consumers (ECS Fargate tasks in the private subnets,
#: ``constructs_lib/connect/transcription.py``; their code in ``services/connect_consumer/``) call,
#: beyond the S3 gateway and ECR endpoints made for SageMaker, which also serve the Fargate image
#: : pull: ``{construct id: (service name suffix, who calls it)}``. A key the ECS table has too
#: : (``Logs``) is one endpoint, made by whichever table comes first. Sources: Amazon ECR user
#: : guide, "Amazon ECR interface VPC endpoints (AWS PrivateLink)", considerations for Fargate
#: (platform version 1.4.0 or
#: later needs ``ecr.dkr``, ``ecr.api`` and the S3 gateway endpoint; tasks with the awslogs driver
#: need ``logs``); Amazon SQS, EventBridge developer guides (interface endpoints ``sqs``,
#: ``events``). Not needed: ``monitoring`` (the consumer's metrics are embedded-metric-format log
#: lines, shipped by awslogs), STS (Fargate tasks get their role's credentials from the ECS agent's
#: endpoint, 169.254.170.2), KMS (SQS, DynamoDB, CloudWatch Logs and Kinesis Video Streams decrypt
#: on the service side), ``secretsmanager`` (only the ECS target's bearer token is read from it, and
#: that target makes the ECS table's endpoint), ``sagemaker.runtime`` (made for the callers
#: already), ``kinesisvideo`` (made by the Connect construct, ``connect.kvs_vpc_endpoint``: one
#: owner).
CONNECT_INTERFACE_ENDPOINTS: dict[str, tuple[str, str]] = {
    "Sqs": (
        "sqs",
        "the consumers' ReceiveMessage, ChangeMessageVisibility and DeleteMessage on the calls "
        "queue",
    ),
    "Events": ("events", "the consumers' PutEvents of transcript segments to the transcript bus"),
    "Logs": ("logs", "the awslogs log driver (the consumers' logs and embedded-format metrics)"),
}
#: Interface endpoints the voice agent's Fargate tasks (``constructs_lib/agent/service.py``) call,
#: beyond the S3 gateway, ECR and SageMaker runtime endpoints made for SageMaker (the image pull and
#: the Voxtral and Sonic streams): ``{construct id: (service name suffix, who calls it)}``. A key
#: another table has too (``Logs``, ``Ecs``) is one endpoint, made by whichever table comes first.
#: Sources: Amazon Bedrock user guide, "Use interface VPC endpoints (AWS PrivateLink)"
#: (``bedrock-runtime`` serves Converse and ConverseStream); Amazon ECR user guide (Fargate's image
#: pull: ``ecr.api``, ``ecr.dkr``, the S3 gateway; ``logs`` for the awslogs driver). ``ecs``: the
#: task scale-in protection the bot asks the ECS agent for is an UpdateTaskProtection call made with
#: the task role; whether Fargate's agent sends it through the task's network is not documented
#: (unconfirmed), so the endpoint is made. Not needed: ``monitoring`` (the bot's metrics are
#: embedded-metric-format log lines), STS (the agent's credentials endpoint), KMS.
AGENT_INTERFACE_ENDPOINTS: dict[str, tuple[str, str]] = {
    "BedrockRuntime": ("bedrock-runtime", "the voice agent's ConverseStream to the LLM"),
    "Logs": ("logs", "the awslogs log driver (the agent's logs and embedded-format metrics)"),
    "Ecs": ("ecs", "the container agent (task scale-in protection while a session is live)"),
}
#: Gateway endpoints the Connect consumers call: ``{construct id: (service name suffix, who calls
#: it)}``. DynamoDB has both kinds; the gateway costs nothing and needs only the subnets' route
#: tables (Amazon VPC user guide, "Gateway endpoints for Amazon DynamoDB").
CONNECT_GATEWAY_ENDPOINTS: dict[str, tuple[str, str]] = {
    "DynamoDb": (
        "dynamodb",
        "the consumers' checkpoints and transcript segments (PutItem, UpdateItem, GetItem)",
    ),
}


def check_cidr(p: Problems, prop: str, value: str, *, vpc: bool) -> None:
    """An IPv4 CIDR block (``10.0.0.0/16``); ``vpc`` also requires a prefix length a VPC allows."""
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        p.add(prop, value, "must be an IPv4 CIDR block such as '10.80.0.0/16' (host bits zero)")
        return
    low, high = VPC_PREFIX_RANGE
    if vpc and not low <= network.prefixlen <= high:
        p.add(
            prop,
            value,
            f"must have a prefix length between /{low} and /{high} (a VPC's CIDR block)",
        )


@dataclass(frozen=True)
class ExistingVpc:
    """A VPC made elsewhere, described without a lookup (synth stays offline).

    Attributes:
        vpc_id: ``vpc-...``.
        subnet_ids: the private subnets the Models' network interfaces (and the interface endpoints)
            use.
        availability_zones: the Availability Zone of each subnet, in the same order; at least two
            different ones.
        route_table_ids: the route table of each subnet, in the same order; needed only when the S3
            gateway endpoint is made here (``PrivateNetworkProps.create_endpoints``).
        cidr: the VPC's CIDR block (what the endpoints' security group lets in when no caller CIDRs
            are given).
    """

    vpc_id: str
    subnet_ids: Sequence[str]
    availability_zones: Sequence[str]
    cidr: str
    route_table_ids: Sequence[str] = ()

    def problems(self, p: Problems, region: str | None, *, needs_route_tables: bool) -> None:
        if not is_token(self.vpc_id) and not VPC_ID_RE.fullmatch(self.vpc_id):
            p.add("vpc_id", self.vpc_id, "must be a VPC id such as 'vpc-0123456789abcdef0'")
        check_ids(
            p,
            "subnet_ids",
            self.subnet_ids,
            SUBNET_ID_RE,
            "subnet ids such as 'subnet-0123456789abcdef0'",
        )
        zones = list(self.availability_zones)
        bad = [
            zone
            for zone in zones
            if not (match := AVAILABILITY_ZONE_RE.fullmatch(zone))
            or (region is not None and match["region"] != region)
        ]
        if bad:
            p.add(
                "availability_zones",
                zones,
                f"must be Availability Zones of {region or 'the stack Region'} such as "
                f"'{region or 'us-east-1'}a'; not: {', '.join(map(repr, bad))}",
            )
        if len(zones) != len(self.subnet_ids):
            p.add(
                "availability_zones",
                zones,
                f"must name the zone of each of the {len(self.subnet_ids)} subnet(s), "
                f"in the order of {p.name('subnet_ids')}",
            )
        elif len(set(zones)) < MIN_AVAILABILITY_ZONES:
            p.add(
                "subnet_ids",
                list(self.subnet_ids),
                f"must be in at least {MIN_AVAILABILITY_ZONES} Availability Zones (SageMaker "
                f"hosting in a VPC); all are in {', '.join(sorted(set(zones))) or 'none'}",
            )
        if needs_route_tables or self.route_table_ids:
            if len(self.route_table_ids) != len(self.subnet_ids):
                p.add(
                    "route_table_ids",
                    list(self.route_table_ids),
                    f"must name the route table of each of the {len(self.subnet_ids)} subnet(s) "
                    "(the S3 gateway endpoint is added to them), or set "
                    f"{p.name('create_endpoints')}=false if the VPC has its endpoints",
                )
            else:
                check_ids(
                    p,
                    "route_table_ids",
                    self.route_table_ids,
                    ROUTE_TABLE_ID_RE,
                    "route table ids such as 'rtb-0123456789abcdef0'",
                )
        check_cidr(p, "vpc_cidr", self.cidr, vpc=True)


@dataclass(frozen=True)
class PrivateNetworkProps:
    """Props of :class:`~constructs_lib.network.private_network.PrivateNetwork`.

    Attributes:
        existing_vpc: a VPC made elsewhere. Default: a new VPC with private isolated subnets in
            ``max_azs`` Availability Zones, no internet or NAT gateway, and flow logs.
        vpc_cidr: CIDR block of a new VPC. Default :data:`DEFAULT_VPC_CIDR`.
        max_azs: Availability Zones of a new VPC (at least 2). Default 2.
        security_group_ids: security groups for the Models' network interfaces, instead of the one
            made here (the endpoints' security group then lets them in on 443). Default: one made
            here, with no inbound rule and outbound 443 only to the S3 prefix list and the interface
            endpoints.
        create_endpoints: make the VPC endpoints (S3 gateway; ECR api and dkr, SageMaker runtime
            interfaces). Turn off for a VPC that has them already (a second interface endpoint with
            private DNS for the same service in one VPC is refused). Default true.
        caller_cidrs: who may reach the SageMaker runtime endpoint on 443 and 8443 (peered VPCs, on
            premises over VPN or Direct Connect). Default: the VPC's own CIDR block.
        flow_log_retention_days: retention of the flow log group (a CloudWatch Logs retention).
            Default 365.
        kms_key_arn: the key that encrypts the flow log group. Default: CloudWatch Logs' own
            encryption.
        ecs_endpoints: also make the interface endpoints that ECS container instances and their
            tasks need without a route to the internet (:data:`ECS_INTERFACE_ENDPOINTS`), reachable
            on 443 from the VPC's CIDR block, and let the VPC's CIDR block reach the ECR endpoints
            (the instances pull the images). With ``create_endpoints`` only. Default false
            (SageMaker needs none of them).
        connect_endpoints: also make the endpoints the Amazon Connect transcription consumers need
            without a route to the internet (:data:`CONNECT_INTERFACE_ENDPOINTS`, reachable on 443
            from the VPC's CIDR block, and :data:`CONNECT_GATEWAY_ENDPOINTS` on the subnets' route
            tables), and let the VPC's CIDR block reach the ECR endpoints (Fargate pulls the
            consumer image) and the SageMaker runtime endpoint (the consumers call it). With
            ``create_endpoints`` only. Default false.
        agent_endpoints: also make the endpoints the voice agent's Fargate tasks need without a
            route to the internet (:data:`AGENT_INTERFACE_ENDPOINTS`, reachable on 443 from the
            VPC's CIDR block), and let the VPC's CIDR block reach the ECR endpoints (the image pull)
            and the SageMaker runtime endpoint (Voxtral and Sonic). With ``create_endpoints`` only.
            Default false.
    """

    existing_vpc: ExistingVpc | None = None
    vpc_cidr: str = DEFAULT_VPC_CIDR
    max_azs: int = 2
    security_group_ids: Sequence[str] = ()
    create_endpoints: bool = True
    caller_cidrs: Sequence[str] = ()
    flow_log_retention_days: int = 365
    kms_key_arn: str | None = None
    ecs_endpoints: bool = False
    connect_endpoints: bool = False
    agent_endpoints: bool = False

    def problems(self, p: Problems, region: str | None = None) -> None:
        if self.existing_vpc is not None:
            self.existing_vpc.problems(p, region, needs_route_tables=self.create_endpoints)
        else:
            check_cidr(p, "vpc_cidr", self.vpc_cidr, vpc=True)
            if self.max_azs < MIN_AVAILABILITY_ZONES:
                p.add(
                    "max_azs",
                    self.max_azs,
                    f"must be at least {MIN_AVAILABILITY_ZONES} (SageMaker hosting in a VPC "
                    "needs subnets in two Availability Zones)",
                )
        check_ids(
            p,
            "security_group_ids",
            self.security_group_ids,
            SECURITY_GROUP_ID_RE,
            "security group ids such as 'sg-0123456789abcdef0'",
        )
        for cidr in self.caller_cidrs:
            check_cidr(p, "caller_cidrs", cidr, vpc=False)
        if self.kms_key_arn is not None:
            check_kms_key_arn(p, "kms_key_arn", self.kms_key_arn, region, alias=False)
        if self.ecs_endpoints and not self.create_endpoints:
            p.add(
                "ecs_endpoints",
                True,
                f"needs {p.ref('create_endpoints', True)} (the endpoints are made here)",
            )
        if self.connect_endpoints and not self.create_endpoints:
            p.add(
                "connect_endpoints",
                True,
                f"needs {p.ref('create_endpoints', True)} (the endpoints are made here)",
            )
        if self.agent_endpoints and not self.create_endpoints:
            p.add(
                "agent_endpoints",
                True,
                f"needs {p.ref('create_endpoints', True)} (the endpoints are made here)",
            )

    @property
    def cidr(self) -> str:
        """The VPC's CIDR block (the new one's, or the existing one's)."""
        return self.existing_vpc.cidr if self.existing_vpc is not None else self.vpc_cidr


@dataclass(frozen=True)
class DataKeyProps:
    """Props of :class:`~constructs_lib.network.encryption.DataKey`.

    Attributes:
        kms_key_arn: a key made elsewhere (a key ARN, not an alias: IAM grants must name the key).
            Default: a new key, rotated yearly.
        retain: keep a new key on ``cdk destroy`` (it decrypts retained data). Default false
            (scheduled for deletion after 7 days).
        log_group_prefixes: log group name prefixes CloudWatch Logs may encrypt with a new key (the
            key policy names them). Default: none.
        service_principals: other AWS service principals the key policy lets encrypt with a new key
            (for example SNS's or CloudWatch's). Default: none.
        event_buses: let EventBridge use a new key for this account's event buses (kms:DescribeKey,
            kms:GenerateDataKey, kms:Decrypt for ``events.amazonaws.com``, conditioned on the
            account and on an event-bus source ARN: EventBridge user guide, "Authorizing EventBridge
            to use a customer managed key"; without it an encrypted bus cannot encrypt its events).
            Default false.
    """

    kms_key_arn: str | None = None
    retain: bool = False
    log_group_prefixes: Sequence[str] = field(default_factory=tuple)
    service_principals: Sequence[str] = field(default_factory=tuple)
    event_buses: bool = False

    def problems(self, p: Problems, region: str | None = None) -> None:
        if self.kms_key_arn is not None:
            check_kms_key_arn(p, "kms_key_arn", self.kms_key_arn, region, alias=False)
