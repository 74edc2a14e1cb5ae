"""DataKey: the one customer managed KMS key for the data of a deployment (model bucket, ML storage
volumes, log groups, ECR repository, staging build), made here or given by ARN. Props:
:class:`constructs_lib.network.props.DataKeyProps`.

Where a service cannot use a customer managed key, its construct says so beside the resource (S3
server access logs: :mod:`constructs_lib.artifacts.model_bucket`).
"""

from __future__ import annotations

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    aws_iam as iam,
    aws_kms as kms,
    aws_secretsmanager as secretsmanager,
)
from constructs import Construct

from constructs_lib.network.props import DataKeyProps
from constructs_lib.validation import Problems

#: A removed key waits this long before KMS deletes it (7-30 days; KMS ScheduleKeyDeletion). No
#: charge while pending.
KEY_DELETION_WINDOW = Duration.days(7)
#: What a service encrypting data at rest with the key uses (KMS developer guide, "Permissions for
#: AWS services in key policies"); no kms:CreateGrant, kms:ScheduleKeyDeletion or administration.
DATA_ACTIONS = [
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
]
#: What a role reading data encrypted with the key uses (S3 GetObject on an SSE-KMS object needs
#: kms:Decrypt).
READ_ACTIONS = ["kms:Decrypt", "kms:DescribeKey"]
#: What a role writing SSE-KMS objects uses (PutObject and multipart uploads need both; S3 user
#: guide, "Using server-side encryption with AWS KMS keys").
WRITE_ACTIONS = ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey"]
#: What EventBridge needs of a customer managed key that encrypts an event bus (EventBridge user
#: guide, "Authorizing EventBridge to use a customer managed key").
EVENT_BUS_ACTIONS = ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"]
#: Of :data:`EVENT_BUS_ACTIONS`, the ones the guide's example key statement conditions on the bus.
EVENT_BUS_DATA_ACTIONS = ["kms:GenerateDataKey", "kms:Decrypt"]
EVENT_BUS_DESCRIBE_ACTIONS = ["kms:DescribeKey"]


def secret_decrypt_statement(
    secret: secretsmanager.ISecret, key_arn: str, sid: str | None = None
) -> iam.PolicyStatement:
    """kms:Decrypt on a secret's customer managed key, only through Secrets Manager and only for
    that secret.

    ``grant_read`` of a secret whose key is imported by ARN adds no KMS permission (CDK cannot
    change that key's policy and drops the grant), yet GetSecretValue needs kms:Decrypt on it
    (Secrets Manager user guide, "Secret encryption and decryption": the ``kms:ViaService`` and
    ``kms:EncryptionContext:SecretARN`` conditions). A secret known by name gets a ``StringLike`` on
    its full ARN (the name, "-" and six random characters).
    """
    region = Stack.of(secret).region
    conditions: dict[str, dict[str, str]] = {
        "StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}
    }
    if secret.secret_full_arn is not None:
        conditions["StringEquals"]["kms:EncryptionContext:SecretARN"] = secret.secret_full_arn
    else:
        conditions["StringLike"] = {
            "kms:EncryptionContext:SecretARN": f"{secret.secret_arn}-??????"
        }
    return iam.PolicyStatement(
        sid=sid, actions=["kms:Decrypt"], resources=[key_arn], conditions=conditions
    )


class DataKey(Construct):
    """A customer managed key for data at rest: new (rotated yearly, a key policy naming the
    services that use it, kept on destroy when ``retain``) or existing (``kms_key_arn``; its key
    policy is its owner's).

    A new key's policy: the account administers it and IAM policies grant its use (the key policy
    CDK writes by default), and it names the service principals that encrypt with it on their own:
    CloudWatch Logs, for the log groups under ``log_group_prefixes`` only
    (``kms:EncryptionContext:aws:logs:arn``; CloudWatch Logs user guide, "Encrypt log data in
    CloudWatch Logs using AWS KMS"), and ``service_principals``. Roles (execution roles, the staging
    build) get their use by :meth:`grant_read` and :meth:`grant_write` on their own policies, which
    name this key; a key policy naming roles of later stacks would make this stack depend on them.

    Attributes:
        key: the key (``kms.IKey``).
        key_arn: its ARN.
        created: whether this construct made it.

    Raises:
        constructs_lib.validation.PropsError: a malformed ARN or one of another Region.
    """

    def __init__(
        self, scope: Construct, construct_id: str, props: DataKeyProps | None = None
    ) -> None:
        props = props or DataKeyProps()
        region = Stack.of(scope).region
        problems = Problems()
        props.problems(problems, None if Token.is_unresolved(region) else region)
        problems.raise_if_any(f"DataKey {construct_id}")
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.created = props.kms_key_arn is None
        if props.kms_key_arn is not None:  # not created
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Key", props.kms_key_arn)
            self.key_arn: str = props.kms_key_arn
            return
        key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the data of {stack.stack_name}'s deployment (model bucket, "
            "volumes, logs, images)",
            enable_key_rotation=True,
            pending_window=KEY_DELETION_WINDOW,
            removal_policy=RemovalPolicy.RETAIN if props.retain else RemovalPolicy.DESTROY,
        )
        if props.log_group_prefixes:
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="CloudWatchLogsEncryptLogGroups",
                    principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                    actions=DATA_ACTIONS,
                    # In a key policy "*" means this key.
                    resources=["*"],
                    conditions={
                        "ArnLike": {
                            "kms:EncryptionContext:aws:logs:arn": [
                                f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:{prefix}*"
                                for prefix in props.log_group_prefixes
                            ]
                        }
                    },
                )
            )
        if props.service_principals:
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="ServicesEncrypt",
                    principals=[
                        iam.ServicePrincipal(principal) for principal in props.service_principals
                    ],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
                )
            )
        if props.event_buses:
            # EventBridge user guide, "Authorizing EventBridge to use a customer managed key":
            # kms:DescribeKey (to find the key and check it is symmetric, when a bus is created or
            # updated), kms:GenerateDataKey and kms:Decrypt. The page's example conditions the last
            # two only (aws:SourceAccount, aws:SourceArn of the bus); DescribeKey, which
            # CreateEventBus calls, is granted without them, as the page lists it.
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EventBridgeDescribeKey",
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                    actions=EVENT_BUS_DESCRIBE_ACTIONS,
                    resources=["*"],
                )
            )
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EventBridgeEncryptBuses",
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                    actions=EVENT_BUS_DATA_ACTIONS,
                    resources=["*"],
                    conditions={
                        "StringEquals": {"aws:SourceAccount": stack.account},
                        "ArnLike": {
                            "aws:SourceArn": f"arn:{stack.partition}:events:{stack.region}:"
                            f"{stack.account}:event-bus/*"
                        },
                    },
                )
            )
        self.key = key  # pyright: ignore[reportAttributeAccessIssue] (jsii binding: parameter names differ from the interface's)
        self.key_arn = key.key_arn

    def grant_read(self, role: iam.IRole) -> None:
        """Let ``role`` decrypt what the key encrypts (e.g. SSE-KMS model weights), on ``role``'s
        own policy."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DecryptWithDataKey", actions=READ_ACTIONS, resources=[self.key_arn]
            )
        )

    def grant_write(self, role: iam.IRole) -> None:
        """Let ``role`` write data encrypted with the key (SSE-KMS PutObject, multipart), on
        ``role``'s own policy."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EncryptWithDataKey", actions=WRITE_ACTIONS, resources=[self.key_arn]
            )
        )
