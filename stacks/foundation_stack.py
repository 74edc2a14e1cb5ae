"""FoundationStack: what the other stacks build on when the deployment is private: the data key (when the stack makes
one) and the private network (network.mode=vpc). Absent otherwise, so a public deployment keeps its templates."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from config.settings import Settings
from constructs_lib.network.encryption import DataKey
from constructs_lib.sagemaker_endpoint.endpoint import LOG_GROUP_PREFIX
from constructs_lib.network.private_network import PrivateNetwork
from constructs_lib.network.props import DataKeyProps


@dataclass(frozen=True)
class Foundation:
    """What the other stacks take from the settings and the Foundation stack (empty in a public deployment).

    Attributes:
        key_arn: the data key's ARN (given or made), or None.
        encrypts_repository: whether the ECR repository uses the key (changing it replaces the repository).
        subnet_ids / security_group_ids: the Models' VpcConfig (empty in public mode).
        source_vpce_ids: VPC endpoints the caller policies require (aws:SourceVpce), or none.
        model_data_role_path: IAM path of the roles that may use the model bucket's objects (the bucket policy names
            them by it, before they exist), or None when the bucket is not restricted.
        vpc / private_subnets: the private network and its subnets (ECS target in vpc mode), or None / empty.
        caller_cidrs: who may call the services (network.caller_cidrs; empty = the VPC's CIDR block).
    """

    key_arn: str | None = None
    encrypts_repository: bool = False
    subnet_ids: list[str] = field(default_factory=list)
    security_group_ids: list[str] = field(default_factory=list)
    source_vpce_ids: list[str] = field(default_factory=list)
    model_data_role_path: str | None = None
    vpc: ec2.IVpc | None = None
    private_subnets: list[ec2.ISubnet] = field(default_factory=list)
    caller_cidrs: list[str] = field(default_factory=list)


class FoundationStack(Stack):
    """The data key (:class:`~constructs_lib.network.encryption.DataKey`) and the VPC
    (:class:`~constructs_lib.network.private_network.PrivateNetwork`), each when the settings ask for it.

    Attributes:
        key: the data key, or None (no customer managed key, or one given by ARN: the stacks use the ARN).
        network: the private network, or None in public mode.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.key: DataKey | None = None
        self.network: PrivateNetwork | None = None
        if settings.makes_key:
            self.key = DataKey(self, "DataKey", DataKeyProps(
                retain=settings.retain_data,
                # The endpoints' log groups, and the log groups CDK names after the app's stacks (staging, flow logs).
                log_group_prefixes=(LOG_GROUP_PREFIX, f"{settings.stack_name_prefix}-"),
            ))
            CfnOutput(self, "DataKeyArn", value=self.key.key_arn, description="KMS key of the deployment's data")
        if settings.network.private:
            key_arn = self.key.key_arn if self.key else settings.encryption.kms_key_arn
            self.network = PrivateNetwork(self, "Network",
                                          settings.network.network_props(key_arn, ecs=settings.uses_ecs))
            CfnOutput(self, "VpcId", value=self.network.vpc.vpc_id, description="VPC of the endpoints")
            if self.network.runtime_endpoint is not None:
                CfnOutput(self, "RuntimeVpcEndpointId", value=self.network.runtime_endpoint.vpc_endpoint_id,
                          description="SageMaker runtime VPC endpoint (callers; voicectl --endpoint-url)")


def foundation_refs(settings: Settings, stack: FoundationStack | None) -> Foundation:
    """What the other stacks need of the Foundation stack (None when there is none) and of the settings."""
    network = stack.network if stack else None
    key = stack.key if stack else None
    return Foundation(
        key_arn=key.key_arn if key else settings.encryption.kms_key_arn,
        encrypts_repository=settings.encrypts_repository,
        subnet_ids=network.subnet_ids if network else [],
        security_group_ids=network.model_security_group_ids if network else [],
        source_vpce_ids=[network.runtime_endpoint.vpc_endpoint_id]
        if network and network.runtime_endpoint and settings.network.require_source_vpce else [],
        model_data_role_path=model_data_role_path(settings) if network else None,
        vpc=network.vpc if network else None,
        private_subnets=network.subnets if network else [],
        # Literal CIDRs (not the VPC's CidrBlock attribute), so the security group rules say what they let in.
        caller_cidrs=list(settings.network.caller_cidrs or [settings.network.network_props().cidr]) if network else [],
    )


def model_data_role_path(settings: Settings) -> str:
    """IAM path of the Voxtral execution role and the staging build role in vpc mode: the model bucket's policy lets
    only roles on this path use its objects."""
    return f"/{settings.stack_name_prefix}/model-data/"
