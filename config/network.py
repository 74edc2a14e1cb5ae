"""``network.*`` and ``encryption.*``: where the endpoints run (SageMaker-managed networking, or
private subnets with no internet access) and the customer managed key of the deployment's data
(docs/private-deployment.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from config import context as ctx
from config.context import setting
from config.section import Section
from constructs_lib.facts.names import check_kms_key_arn
from constructs_lib.network.props import DEFAULT_VPC_CIDR, ExistingVpc, PrivateNetworkProps


@dataclass(frozen=True)
class NetworkSettings(Section):
    """Where the endpoints run (docs/private-deployment.md): ``public`` is SageMaker-managed
    networking; ``vpc`` puts both Models in private subnets with no internet access, a new VPC
    unless ``vpc_id`` is given."""

    #: ``public`` (SageMaker-managed networking) or ``vpc`` (private subnets, no internet access);
    #: the other network.* keys are allowed only with ``vpc``.
    mode: Literal["public", "vpc"] = "public"
    #: An existing VPC (with subnet_ids, availability_zones and vpc_cidr); None = the stack makes
    #: one.
    vpc_id: str | None = None
    #: With vpc_id: the VPC's private subnets (at least two Availability Zones).
    subnet_ids: list[str] = setting(default_factory=list)
    #: The Availability Zone of each subnet, in the order of subnet_ids (no lookups at synth).
    availability_zones: list[str] = setting(default_factory=list)
    #: The route table of each subnet (the S3 gateway endpoint is added to them); with
    #: create_endpoints only.
    route_table_ids: list[str] = setting(default_factory=list)
    #: Security groups for the Models instead of the one the stack makes.
    security_group_ids: list[str] = setting(default_factory=list)
    #: CIDR block of the new VPC (None = 10.80.0.0/16), or of the existing one (required with
    #: vpc_id).
    vpc_cidr: str | None = None
    #: Availability Zones of a new VPC.
    max_azs: int = setting(default_from=PrivateNetworkProps)
    #: Make the S3, ECR and SageMaker runtime VPC endpoints, with the ECS target ECS's, with
    #: connect.enabled the Connect consumers' (SQS, EventBridge, CloudWatch Logs, a DynamoDB
    #: gateway); off when the VPC has them already (a second interface endpoint with private DNS for
    #: one service in a VPC is refused).
    create_endpoints: bool = setting(default_from=PrivateNetworkProps)
    #: Who may reach the SageMaker runtime endpoint on 443/8443 (None/empty = the VPC's CIDR block).
    caller_cidrs: list[str] = setting(default_factory=list)
    #: The caller policies allow invoking only through the runtime VPC endpoint made here
    #: (aws:SourceVpce).
    require_source_vpce: bool = False

    @property
    def private(self) -> bool:
        return self.mode == "vpc"

    def network_props(
        self,
        kms_key_arn: str | None = None,
        *,
        ecs: bool = False,
        connect: bool = False,
        agent: bool = False,
    ) -> PrivateNetworkProps:
        """The private network's props; ``ecs``: a service runs on the ECS target, so the network
        also gets the endpoints ECS instances and tasks need (when it makes endpoints at all);
        ``connect`` and ``agent``: likewise for the Amazon Connect transcription consumers and
        the voice agent."""
        existing = None
        if self.vpc_id is not None:
            existing = ExistingVpc(
                vpc_id=self.vpc_id,
                subnet_ids=self.subnet_ids,
                availability_zones=self.availability_zones,
                cidr=self.vpc_cidr or "",
                route_table_ids=self.route_table_ids,
            )
        made = self.create_endpoints
        return self.props(
            PrivateNetworkProps,
            existing_vpc=existing,
            vpc_cidr=self.vpc_cidr or DEFAULT_VPC_CIDR,
            kms_key_arn=kms_key_arn,
            ecs_endpoints=ecs and made,
            connect_endpoints=connect and made,
            agent_endpoints=agent and made,
        )

    def problems(self, region: str) -> list[str]:
        p = self.problems_named("network.")
        defaults = NetworkSettings()
        if not self.private:
            for key in ctx.section_keys(NetworkSettings):
                name = key.field
                if name != "mode" and getattr(self, name) != getattr(defaults, name):
                    p.add(
                        name,
                        getattr(self, name),
                        "set only with network.mode=vpc (public mode "
                        "uses SageMaker-managed networking)",
                    )
            return list(p)
        existing_keys = {
            "subnet_ids": self.subnet_ids,
            "availability_zones": self.availability_zones,
            "route_table_ids": self.route_table_ids,
        }
        if self.vpc_id is None:
            for name, value in existing_keys.items():
                if value:
                    p.add(name, value, "set only together with network.vpc_id (an existing VPC)")
        elif self.vpc_cidr is None:
            p.add(
                "vpc_cidr",
                None,
                "must be the CIDR block of the VPC network.vpc_id (what its endpoints let in)",
            )
        elif not self.subnet_ids:
            p.add(
                "subnet_ids",
                [],
                "must list the VPC's private subnets (at least two Availability Zones)",
            )
        if self.vpc_id is None or (self.vpc_cidr is not None and self.subnet_ids):
            self.network_props().problems(p, region)
        if self.require_source_vpce and not self.create_endpoints:
            p.add(
                "require_source_vpce",
                True,
                "needs network.create_endpoints=true (the runtime endpoint made here)",
            )
        return list(p)


@dataclass(frozen=True)
class EncryptionSettings(Section):
    """The customer managed key of the deployment's data (docs/private-deployment.md)."""

    #: A key made elsewhere (a key ARN in the stack's Region; its key policy must let CloudWatch
    #: Logs and CloudWatch use it, docs/private-deployment.md). None = the stack makes one when
    #: create_key says so.
    kms_key_arn: str | None = None
    #: Make a key (rotated yearly). None = yes in network.mode=vpc, no in public mode (today's
    #: encryption).
    create_key: bool | None = None
    #: Encrypt the ECR repository with the key. Changing it REPLACES the repository. None = yes in
    #: vpc mode only.
    repository: bool | None = None

    def problems(self, region: str) -> list[str]:
        p = self.problems_named("encryption.")
        if self.kms_key_arn is not None:
            check_kms_key_arn(p, "kms_key_arn", self.kms_key_arn, region, alias=False)
            if self.create_key:
                p.add(
                    "create_key",
                    True,
                    "must be false or null with encryption.kms_key_arn (one key)",
                )
        return list(p)
