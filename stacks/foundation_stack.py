"""FoundationStack: what the other stacks build on when the deployment is private: the data key
(when the stack makes one) and the private network (network.mode=vpc). Absent otherwise, so a public
deployment keeps its templates. What the other stacks take from it:
:class:`stacks.composition.Foundation`."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from config.settings import Settings
from constructs_lib.network.encryption import DataKey
from constructs_lib.network.private_network import PrivateNetwork
from constructs_lib.network.props import DataKeyProps
from constructs_lib.sagemaker_endpoint.endpoint import LOG_GROUP_PREFIX


class FoundationStack(Stack):
    """The data key (:class:`~constructs_lib.network.encryption.DataKey`) and the VPC
    (:class:`~constructs_lib.network.private_network.PrivateNetwork`), each when the settings ask
    for it.

    Attributes:
        key: the data key, or None (no customer managed key, or one given by ARN: the stacks use the
            ARN).
        network: the private network, or None in public mode.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.key: DataKey | None = None
        self.network: PrivateNetwork | None = None
        if settings.makes_key:
            self.key = DataKey(
                self,
                "DataKey",
                DataKeyProps(
                    retain=settings.retain_data,
                    # The endpoints' log groups, and the log groups CDK names after the app's stacks
                    # (staging, flow logs).
                    log_group_prefixes=(LOG_GROUP_PREFIX, f"{settings.stack_name_prefix}-"),
                    # The Connect stack's transcripts bus is encrypted with this key (EventBridge
                    # must be let use it).
                    event_buses=settings.connect.enabled,
                ),
            )
            CfnOutput(
                self,
                "DataKeyArn",
                value=self.key.key_arn,
                description="KMS key of the deployment's data",
            )
        if settings.network.private:
            key_arn = self.key.key_arn if self.key else settings.encryption.kms_key_arn
            self.network = PrivateNetwork(
                self,
                "Network",
                settings.network.network_props(
                    key_arn,
                    ecs=settings.uses_ecs,
                    connect=settings.connect.enabled,
                    agent=settings.agent.enabled,
                ),
            )
            CfnOutput(
                self, "VpcId", value=self.network.vpc.vpc_id, description="VPC of the endpoints"
            )
            if self.network.runtime_endpoint is not None:
                CfnOutput(
                    self,
                    "RuntimeVpcEndpointId",
                    value=self.network.runtime_endpoint.vpc_endpoint_id,
                    description="SageMaker runtime VPC endpoint (callers; voicectl --endpoint-url)",
                )
