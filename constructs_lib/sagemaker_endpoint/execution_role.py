"""SageMakerExecutionRole: the role a SageMaker Model runs as, granted only what it uses."""

from __future__ import annotations

import jsii
from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from constructs_lib.nag import acknowledge_compliance, nag_render

#: Namespace of SageMaker's per-instance endpoint metrics (CPUUtilization, GPUUtilization, ...; SageMaker
#: developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch").
SAGEMAKER_INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"
#: The service principal of SageMaker (trust policy of every execution role).
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"


@jsii.implements(iam.IGrantable)
class SageMakerExecutionRole(Construct):
    """An IAM role assumable by ``sagemaker.amazonaws.com`` that starts with no permissions.

    Each ``grant_*`` method adds one narrowly scoped statement to the role's policy. There is no
    AmazonSageMakerFullAccess and no managed policy. Where AWS offers no resource-level permission
    (``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData``) the statement uses ``*`` and the cdk-nag finding is
    acknowledged on the spot with the reason. Constructs that take an ``iam.IRole`` (such as
    :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint`) take :attr:`role` and add their own statements to the same
    policy; the construct itself is an ``IGrantable``, so ``bucket.grant_read(execution_role)`` works too.

    The role is confused-deputy safe: the trust policy requires ``aws:SourceAccount`` to be this account.

    Args:
        description: the role's description. Default: "SageMaker execution role".
        path: the role's IAM path (e.g. ``/realtime-voice/model-data/``), so that a bucket policy can name the roles
            that may use the data by ``aws:PrincipalArn`` before they exist. Changing it replaces the role. Default ``/``.

    Attributes:
        role: the IAM role (an ``iam.IRole``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, description: str = "SageMaker execution role",
                 path: str | None = None) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            path=path,
            assumed_by=iam.ServicePrincipal(SAGEMAKER_PRINCIPAL).with_conditions(
                {"StringEquals": {"aws:SourceAccount": account}}
            ),
        )
        acknowledge_compliance(self, {
            "IAMNoInlinePolicy": "The execution role's statements are scoped to this endpoint's image, model data, log "
                                 "group and metrics; an inline policy belongs to this role alone and goes with it.",
        })

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The role, for ``grant_*`` methods of other constructs."""
        return self.role

    @property
    def role_arn(self) -> str:
        return self.role.role_arn

    def _add(self, statement: iam.PolicyStatement) -> None:
        self.role.add_to_principal_policy(statement)

    def _acknowledge(self, finding: str, reason: str) -> None:
        """Acknowledge one cdk-nag finding on this role's policy; ``reason`` is kept in the cloud assembly."""
        Validations.of(self.role).acknowledge(Acknowledgment(id=finding, reason=reason))

    def grant_model_data_read(self, bucket_name: str, prefix: str) -> None:
        """Read the objects under ``prefix`` (e.g. ``models/org/name/``, no leading ``/``) of one bucket, and list
        only that prefix. SageMaker lists and copies an ``S3Prefix`` ModelDataSource to ``/opt/ml/model``.

        Args:
            bucket_name: the bucket's name (a plain string or a token such as ``Fn::ImportValue``).
            prefix: key prefix ending with ``/``.
        """
        partition = Stack.of(self).partition
        bucket_arn = f"arn:{partition}:s3:::{bucket_name}"
        objects = f"{bucket_arn}/{prefix}*"
        self._add(iam.PolicyStatement(sid="ReadModelPrefix", actions=["s3:GetObject"], resources=[objects]))
        self._add(
            iam.PolicyStatement(
                sid="ListModelPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        self._acknowledge(
            f"AwsSolutions-IAM5[Resource::{nag_render(Stack.of(self), objects)}]",
            "The wildcard covers the files of the model prefix only (weights, tokenizer, config); their names vary "
            "by model revision.",
        )

    def grant_image_pull(self, repository_arn: str) -> None:
        """Pull images from one ECR repository."""
        self._add(
            iam.PolicyStatement(
                sid="PullImage",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[repository_arn],
            )
        )
        self._add(iam.PolicyStatement(sid="EcrAuthorizationToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        self._acknowledge(
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken supports no resource-level permission (Service Authorization Reference for "
            "Amazon ECR); it only issues a registry login token, image access stays limited to one repository.",
        )

    def grant_metrics(self, *namespaces: str) -> None:
        """Put CloudWatch metrics, only in ``namespaces`` (a ``cloudwatch:namespace`` condition).

        Pass :data:`SAGEMAKER_INSTANCE_METRICS_NAMESPACE` for every endpoint: the execution-role permissions that
        the CreateModel API documents include ``cloudwatch:PutMetricData``, and SageMaker's instance metrics
        (CPU, memory, disk, GPU) in that namespace are reported with it; without them the utilisation alarms and
        the endpoint-health alarm would see no data.
        """
        self._add(
            iam.PolicyStatement(
                sid="PutMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": list(namespaces)}},
            )
        )
        self._acknowledge(
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData supports no resource-level permission (Service Authorization Reference for "
            "CloudWatch); a cloudwatch:namespace condition limits it to the endpoint's instance metrics and the "
            "bridge's namespace.",
        )

    def grant_key_read(self, key_arn: str) -> None:
        """Decrypt with one KMS key: model data in an SSE-KMS bucket (S3 GetObject needs kms:Decrypt)."""
        self._add(iam.PolicyStatement(sid="DecryptModelData", actions=["kms:Decrypt", "kms:DescribeKey"],
                                      resources=[key_arn]))
