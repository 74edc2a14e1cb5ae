"""SageMakerExecutionRole: the role a SageMaker Model runs as, granted only what it uses."""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import Acknowledgment, Stack, Validations, aws_iam as iam
from constructs import Construct

from constructs_lib.nag import acknowledge_compliance, nag_render, skip_checkov

#: Namespace of SageMaker's per-instance endpoint metrics (CPUUtilization, GPUUtilization, ...;
#: SageMaker developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch").
SAGEMAKER_INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"
#: The service principal of SageMaker (trust policy of every execution role).
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"


@jsii.implements(iam.IGrantable)
class SageMakerExecutionRole(Construct):
    """An IAM role assumable by ``sagemaker.amazonaws.com`` that starts with no permissions.

    Each ``grant_*`` method adds one narrowly scoped statement to the role's policy. There is no
    AmazonSageMakerFullAccess and no managed policy. Where AWS offers no resource-level permission
    (``ecr:GetAuthorizationToken``, ``cloudwatch:PutMetricData``) the statement uses ``*`` and the
    cdk-nag finding is acknowledged on the spot with the reason. Constructs that take an
    ``iam.IRole`` (such as :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint`)
    take :attr:`role` and add their own statements to the same policy; the construct itself is an
    ``IGrantable``, so ``bucket.grant_read(execution_role)`` works too.

    The role is confused-deputy safe: the trust policy requires ``aws:SourceAccount`` to be this
    account.

    Args:
        description: the role's description. Default: "SageMaker execution role".
        path: the role's IAM path (e.g. ``/realtime-voice/model-data/``), so that a bucket policy
            can name the roles that may use the data by ``aws:PrincipalArn`` before they exist.
            Changing it replaces the role. Default ``/``.

    Attributes:
        role: the IAM role (an ``iam.IRole``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str = "SageMaker execution role",
        path: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        account = Stack.of(self).account
        self.role = iam.Role(
            self,
            "Role",
            description=description,
            path=path,
            assumed_by=iam.ServicePrincipal(SAGEMAKER_PRINCIPAL).with_conditions(  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                {"StringEquals": {"aws:SourceAccount": account}}
            ),
        )
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "The execution role's statements are scoped to this "
                "endpoint's image, model data, log group and metrics; an inline policy belongs "
                "to this role alone and goes with it.",
            },
        )

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
        """Acknowledge one cdk-nag finding on this role's policy; ``reason`` is kept in the cloud
        assembly."""
        Validations.of(self.role).acknowledge(Acknowledgment(id=finding, reason=reason))

    def grant_model_data_read(self, bucket_name: str, prefix: str) -> None:
        """Read the objects under ``prefix`` (e.g. ``models/org/name/``, no leading ``/``) of one
        bucket, and list only that prefix. SageMaker lists and copies an ``S3Prefix``
        ModelDataSource to ``/opt/ml/model``.

        Args:
            bucket_name: the bucket's name (a plain string or a token such as ``Fn::ImportValue``).
            prefix: key prefix ending with ``/``.
        """
        partition = Stack.of(self).partition
        bucket_arn = f"arn:{partition}:s3:::{bucket_name}"
        objects = f"{bucket_arn}/{prefix}*"
        self._add(
            iam.PolicyStatement(
                sid="ReadModelPrefix", actions=["s3:GetObject"], resources=[objects]
            )
        )
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
            "The wildcard covers the files of the model prefix only (weights, tokenizer, "
            "config); their names vary by model revision.",
        )

    def grant_image_pull(self, repository_arn: str) -> None:
        """Pull images from one ECR repository."""
        self._add(
            iam.PolicyStatement(
                sid="PullImage",
                actions=[
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                resources=[repository_arn],
            )
        )
        self._add(
            iam.PolicyStatement(
                sid="EcrAuthorizationToken", actions=["ecr:GetAuthorizationToken"], resources=["*"]
            )
        )
        self._acknowledge(
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken supports no resource-level permission (Service "
            "Authorization Reference for Amazon ECR); it only issues a registry login token, "
            "image access stays limited to one repository.",
        )

    def grant_metrics(self, *namespaces: str) -> None:
        """Put CloudWatch metrics, only in ``namespaces`` (a ``cloudwatch:namespace`` condition).

        Pass :data:`SAGEMAKER_INSTANCE_METRICS_NAMESPACE` for every endpoint: the execution-role
        permissions that the CreateModel API documents include ``cloudwatch:PutMetricData``, and
        SageMaker's instance metrics (CPU, memory, disk, GPU) in that namespace are reported with
        it; without them the utilisation alarms and the endpoint-health alarm would see no data.
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
            "cloudwatch:PutMetricData supports no resource-level permission (Service "
            "Authorization Reference for CloudWatch); a cloudwatch:namespace condition limits it "
            "to the endpoint's instance metrics and the bridge's namespace.",
        )

    def grant_key_read(self, key_arn: str) -> None:
        """Decrypt with one KMS key: model data in an SSE-KMS bucket (S3 GetObject needs
        kms:Decrypt)."""
        self._add(
            iam.PolicyStatement(
                sid="DecryptModelData",
                actions=["kms:Decrypt", "kms:DescribeKey"],
                resources=[key_arn],
            )
        )

    def grant_vpc_access(self, subnets: Sequence[str], security_groups: Sequence[str]) -> None:
        """Create, describe and delete the network interfaces of a Model whose ``VpcConfig`` names
        ``subnets`` and ``security_groups``: see :func:`grant_vpc_access`."""
        grant_vpc_access(self.role, subnets, security_groups)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)


#: The actions a Model with ``VpcConfig`` needs on its execution role. SageMaker developer guide,
#: "CreateModel API: Execution Role Permissions" ("If you use your own IAM policy, you must add the
#: following permissions") and "Give SageMaker Hosted Endpoints Access to Resources in Your Amazon
#: VPC" (which adds ec2:DescribeVpcEndpoints).
VPC_ACCESS_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcEndpoints",
)
#: Of :data:`VPC_ACCESS_ACTIONS`, those the Service Authorization Reference (Amazon EC2) lists with
#: no resource type, or with an optional one a request need not carry
#: (DeleteNetworkInterfacePermission names a permission id, not an interface): IAM grants them on
#: "*" only.
VPC_ACCESS_UNSCOPED_ACTIONS = (
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcEndpoints",
)
VPC_ACCESS_SOURCE = (
    "SageMaker developer guide, 'CreateModel API: Execution Role Permissions' "
    "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-roles.html#sagemaker-roles-"
    "createmodel-perms); Service Authorization Reference, Amazon EC2 "
    "(https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_amazonec2.html)"
)


def grant_vpc_access(
    role: iam.IRole, subnets: Sequence[str], security_groups: Sequence[str]
) -> None:
    """Let ``role`` (a Model's execution role) manage the network interfaces SageMaker attaches to
    the endpoint's instances in ``subnets`` with ``security_groups``; SageMaker creates and deletes
    them as that role, so without these the endpoint fails to start (or leaves interfaces it cannot
    delete).

    Scoped as the Service Authorization Reference (Amazon EC2) allows: CreateNetworkInterface on a
    new network-interface and only these subnets and security groups (ARNs; ``ec2:Vpc`` is not a key
    of the new interface, so a condition on it would refuse the call);
    CreateNetworkInterfacePermission and DeleteNetworkInterface on interfaces in these subnets
    (``ec2:Subnet``, the subnet's ARN). Whom SageMaker authorizes on the interface
    (``ec2:AuthorizedService``, ``ec2:AuthorizedUser``) is not documented: unconfirmed, so not
    conditioned. The describe actions and DeleteNetworkInterfacePermission take ``*`` only; the
    cdk-nag and checkov findings are acknowledged with that source. A role given from outside that
    CDK cannot change (``iam.Role.from_role_arn(..., mutable=False)``) must hold these already.
    Subnet ARNs name this account: a subnet another account shares (AWS RAM) is named by its
    owner's, so it is not covered (docs/private-deployment.md).
    """
    stack = Stack.of(role)
    arn = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}"
    subnet_arns = [f"{arn}:subnet/{s}" for s in subnets]
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="CreateEndpointInterfaces",
            actions=["ec2:CreateNetworkInterface"],
            resources=[
                f"{arn}:network-interface/*",
                *subnet_arns,
                *(f"{arn}:security-group/{group}" for group in security_groups),
            ],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="ManageEndpointInterfaces",
            actions=["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface"],
            resources=[f"{arn}:network-interface/*"],
            conditions={"ArnEquals": {"ec2:Subnet": subnet_arns}},
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="DescribeEndpointNetwork",
            actions=list(VPC_ACCESS_UNSCOPED_ACTIONS),
            resources=["*"],
        )
    )
    if isinstance(role, iam.Role):
        interfaces = f"{arn}:network-interface/*"
        for resource in ("*", interfaces):
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, resource)}]",
                    reason="A Model in a VPC: SageMaker creates and deletes the endpoint's "
                    "network interfaces as the execution role; their ids are not known before, "
                    "and the describe actions and DeleteNetworkInterfacePermission support no "
                    "resource-level permission. Creation is limited to the Model's subnets and "
                    f"security groups. {VPC_ACCESS_SOURCE}",
                )
            )
        policy = role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            skip_checkov(
                policy,
                "AWS::IAM::Policy",
                {
                    "CKV_AWS_109": "ec2:DeleteNetworkInterfacePermission (permissions "
                    "management) supports no resource-level permission in the requests "
                    "SageMaker makes (a permission id, not an interface); "
                    "CreateNetworkInterfacePermission is limited to the Model's subnets. "
                    f"{VPC_ACCESS_SOURCE}",
                    "CKV_AWS_111": "ec2:DeleteNetworkInterfacePermission supports no "
                    "resource-level permission; the other network-interface writes are limited "
                    f"to the Model's subnets. {VPC_ACCESS_SOURCE}",
                    "CKV_AWS_356": "the ec2:Describe* actions a Model in a VPC needs support no "
                    f"resource-level permission. {VPC_ACCESS_SOURCE}",
                },
            )
