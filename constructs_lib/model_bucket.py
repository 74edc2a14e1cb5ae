"""ModelBucket: the S3 bucket that holds model artifacts (uncompressed weights under a prefix)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_s3 as s3
from constructs import Construct

#: Days after which noncurrent versions of weights are removed; staging overwrites files only on a revision change.
NONCURRENT_VERSION_EXPIRATION_DAYS = 30
#: Days to keep the server access logs of the model bucket.
ACCESS_LOG_EXPIRATION_DAYS = 365


@dataclass(frozen=True)
class ModelBucketProps:
    """Props of :class:`ModelBucket`.

    Attributes:
        retain_data: keep the buckets and their objects on ``cdk destroy`` (otherwise both are emptied and deleted).
    """

    retain_data: bool = False


class ModelBucket(Construct):
    """A private, TLS-only, encrypted, versioned bucket for model weights, with server access logs to a log bucket.

    Encryption is SSE-S3 so that SageMaker's execution role needs no KMS grant to read the weights. With
    ``retain_data`` false both buckets are emptied (an auto-delete custom resource) and deleted on destroy.

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
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # S3 server access logging delivers with the bucket-owner-enforced setting through a bucket policy.
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(ACCESS_LOG_EXPIRATION_DAYS))],
            removal_policy=removal,
            auto_delete_objects=auto_delete,
        )
        Validations.of(self.access_log_bucket).acknowledge(Acknowledgment(
            id="AwsSolutions-S1",
            reason="This is the destination of the model bucket's server access logs; logging it to itself would loop.",
        ))

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
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
