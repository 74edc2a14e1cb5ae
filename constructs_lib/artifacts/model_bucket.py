"""ModelBucket: the S3 bucket that holds model artifacts (uncompressed weights under a prefix)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from aws_cdk import (
    Acknowledgment,
    CfnResource,
    Duration,
    Fn,
    RemovalPolicy,
    Stack,
    Validations,
    aws_iam as iam,
    aws_kms as kms,
    aws_s3 as s3,
)
from constructs import Construct

from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    skip_checkov,
    stack_singletons,
)

#: Days after which noncurrent versions of weights are removed; staging overwrites files only on a
#: revision change.
NONCURRENT_VERSION_EXPIRATION_DAYS = 30
#: Days to keep the server access logs of the model bucket.
ACCESS_LOG_EXPIRATION_DAYS = 365


@dataclass(frozen=True)
class ModelBucketProps:
    """Props of :class:`ModelBucket`.

    Attributes:
        retain_data: keep the buckets and their objects on ``cdk destroy`` (otherwise both are
            emptied and deleted).
        encryption_key: a customer managed key for the model bucket (SSE-KMS with an S3 Bucket Key,
            which cuts KMS requests). Readers then need kms:Decrypt on it. Default: SSE-S3.
        data_principal_arns: when given, the bucket policy denies reading, writing and deleting
            objects to every principal whose ARN matches none of these (``aws:PrincipalArn``,
            wildcards allowed), except the bucket's own auto-delete function. Default: no such
            restriction (IAM policies decide).
    """

    retain_data: bool = False
    encryption_key: kms.IKey | None = None
    data_principal_arns: Sequence[str] = ()


class ModelBucket(Construct):
    """A private, TLS-only, encrypted, versioned bucket for model weights, with server access logs
    to a log bucket.

    Encryption is SSE-S3 so that SageMaker's execution role needs no KMS grant to read the weights.
    With ``retain_data`` false both buckets are emptied (an auto-delete custom resource) and deleted
    on destroy.

    Attributes:
        bucket: the model bucket.
        access_log_bucket: the bucket receiving the model bucket's server access logs.
    """

    def __init__(self, scope: Construct, construct_id: str, props: ModelBucketProps) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY
        auto_delete = not props.retain_data

        self.access_log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            # SSE-S3 only: a target bucket of server access logs cannot use SSE-KMS ("the
            # destination bucket ... can use SSE-S3 only", S3 user guide, "Enabling Amazon S3 server
            # access logging").
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # S3 server access logging delivers with the bucket-owner-enforced setting through a
            # bucket policy.
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=Duration.days(ACCESS_LOG_EXPIRATION_DAYS))
            ],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        Validations.of(self.access_log_bucket).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="This is the destination of the model bucket's server access logs; "
                "logging it to itself would loop.",
            )
        )
        acknowledge_compliance(
            self.access_log_bucket,
            {
                "S3DefaultEncryptionKMS": "A target bucket of S3 server access logs can use "
                "SSE-S3 only (S3 user guide, 'Enabling Amazon S3 server access logging').",
                "S3BucketVersioningEnabled": "Access logs are written once by the S3 logging "
                "service and removed only by the lifecycle rule; there is no object to recover "
                "from an overwrite.",
                "S3BucketReplicationEnabled": "Access logs stay in the deployment's Region; "
                "copying them elsewhere is the user's choice, not a default.",
            },
        )

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.KMS
            if props.encryption_key
            else s3.BucketEncryption.S3_MANAGED,
            encryption_key=props.encryption_key,
            bucket_key_enabled=True if props.encryption_key else None,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="model-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_EXPIRATION_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        acknowledge_compliance(
            self.bucket,
            {
                "S3BucketReplicationEnabled": "The weights are a copy of a pinned model hub "
                "revision that staging can write again; replicating them would copy the data out "
                "of the Region the user chose.",
            },
        )
        skip_checkov(
            self.access_log_bucket,
            "AWS::S3::Bucket",
            {
                "CKV_AWS_18": "This bucket receives the model bucket's server access logs; "
                "logging it to itself would loop.",
                "CKV_AWS_21": "Access logs are written once by the S3 logging service and "
                "removed only by the lifecycle rule.",
            },
        )
        for provider in stack_singletons(self, "Custom::S3AutoDeleteObjects"):
            skip_checkov(provider, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
        if auto_delete:
            # Destroy: the log bucket is emptied only after the model bucket is gone (its emptying
            # writes access logs too). S3 delivers server access logs late ("best effort", most
            # within a few hours: S3 user guide, "Server access log delivery"), so a record can
            # still arrive after the emptying; README, "Destroy".
            self.access_log_bucket.node.find_child(
                "AutoDeleteObjectsCustomResource"
            ).node.add_dependency(self.bucket)
        if props.data_principal_arns:
            self._deny_other_principals(props.data_principal_arns, auto_delete)

    def _deny_other_principals(self, principal_arns: Sequence[str], auto_delete: bool) -> None:
        """Deny object reads, writes and deletes to every principal but ``principal_arns`` (and the
        auto-delete function's role, which empties the bucket on destroy)."""
        allowed = list(principal_arns)
        if auto_delete:
            provider = self.bucket.node.try_find_child("AutoDeleteObjectsCustomResource")
            if provider is not None:
                # CDK's auto-delete provider is one per stack; its role is
                # "Custom::S3AutoDeleteObjects...Role".
                stack = Stack.of(self)
                role = stack.node.find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
                role_resource = cast(CfnResource, role.node.find_child("Role"))
                allowed.append(Fn.get_att(role_resource.logical_id, "Arn").to_string())
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="OnlyModelRolesUseObjects",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                actions=["s3:GetObject*", "s3:PutObject*", "s3:DeleteObject*"],
                resources=[self.bucket.arn_for_objects("*")],
                conditions={"ArnNotLike": {"aws:PrincipalArn": allowed}},
            )
        )
