"""SageMakerExecutionRole: the role a SageMaker Model runs as, granted only what it uses."""

from __future__ import annotations

from typing import Sequence

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from constructs_lib.nag import nag_render


#: Namespace of SageMaker's per-instance endpoint metrics (CPUUtilization, GPUUtilization, ...; SageMaker
#: developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch").
SAGEMAKER_INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"


class SageMakerExecutionRole(Construct):
    """An IAM role assumable by ``sagemaker.amazonaws.com`` that starts with no permissions.

    Each ``grant_*`` method adds one narrowly scoped statement to the role's inline policy. There is no
    AmazonSageMakerFullAccess and no managed policy. Where AWS offers no resource-level permission
    (``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData``) the statement uses ``*`` and the cdk-nag finding is
    acknowledged on the spot with the reason.

    The role is confused-deputy safe: the trust policy requires ``aws:SourceAccount`` to be this account.

    Attributes:
        role: the IAM role.
    """

    def __init__(self, scope: Construct, construct_id: str, *, description: str) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                {"StringEquals": {"aws:SourceAccount": account}}
            ),
        )
        self._policy = iam.Policy(self, "Policy", roles=[self.role])

    def _add(self, statement: iam.PolicyStatement) -> None:
        self._policy.add_statements(statement)

    def _acknowledge(self, finding: str, reason: str) -> None:
        """Acknowledge one cdk-nag finding on this role's policy; ``reason`` is kept in the cloud assembly."""
        Validations.of(self._policy).acknowledge(Acknowledgment(id=finding, reason=reason))

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
                sid="PullBridgeImage",
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

    def grant_log_write(self, log_group: logs.ILogGroup) -> None:
        """Create streams in and write events to one log group (the endpoint's ``/aws/sagemaker/Endpoints/<name>``)."""
        streams = f"{log_group.log_group_arn}:log-stream:*"
        self._add(
            iam.PolicyStatement(
                sid="WriteEndpointLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_group.log_group_arn, streams],
            )
        )
        self._acknowledge(
            f"AwsSolutions-IAM5[Resource::{nag_render(Stack.of(self), streams)}]",
            "Log stream names are chosen by SageMaker per instance; the wildcard is confined to this endpoint's "
            "log group.",
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

    def grant_describe_alarms(self, alarms: Sequence[cloudwatch.IAlarm]) -> None:
        """Describe exactly ``alarms`` (``cloudwatch:DescribeAlarms`` on their ARNs), the auto-rollback alarms of the
        endpoint's DeploymentConfig.

        SageMaker reads the rollback alarms' state as the execution role: "Ensure that your IAM execution role has
        permission to perform the cloudwatch:DescribeAlarms action on the auto-rollback alarms you specify"
        (SageMaker developer guide, "Auto-Rollback Configuration and Monitoring",
        https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html). DescribeAlarms
        supports the ``alarm`` resource type (Service Authorization Reference for CloudWatch), so no wildcard.

        Raises:
            ValueError: ``alarms`` is empty (a statement needs at least one resource).
        """
        if not alarms:
            raise ValueError("grant_describe_alarms needs at least one alarm (the endpoint's auto-rollback alarms)")
        self._add(
            iam.PolicyStatement(
                sid="DescribeRollbackAlarms",
                actions=["cloudwatch:DescribeAlarms"],
                resources=[alarm.alarm_arn for alarm in alarms],
            )
        )
