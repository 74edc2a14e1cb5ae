"""AlarmTopic: the one SNS topic every alarm of the deployment publishes to."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    aws_iam as iam,
    aws_kms as kms,
    aws_sns as sns,
    aws_sns_subscriptions as subscriptions,
)
from constructs import Construct

from constructs_lib.facts.names import check_email
from constructs_lib.validation import Problems

#: The principal CloudWatch alarms publish as (CloudWatch user guide, "Using Amazon SNS topics with
#: alarms").
CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"
#: A removed key waits this long before KMS deletes it (7-30 days; KMS ScheduleKeyDeletion). No
#: charge while pending.
KEY_DELETION_WINDOW = Duration.days(7)


@dataclass(frozen=True)
class AlarmTopicProps:
    """Props of :class:`AlarmTopic`.

    Attributes:
        display_name: the "From" name of notifications. Default: "<stack name> alarms".
        email: an address to subscribe (SNS sends it a confirmation link first). Default: no
            subscription.
        kms_key_arn: a customer managed key made elsewhere for the topic; its key policy must let
            ``cloudwatch.amazonaws.com`` use kms:Decrypt and kms:GenerateDataKey*. Default: a key of
            the topic's own.
    """

    display_name: str | None = None
    email: str | None = None
    kms_key_arn: str | None = None


class AlarmTopic(Construct):
    """An SNS topic for CloudWatch alarms: encrypted with its own KMS key, TLS-only, optionally with
    an e-mail subscription.

    * Encryption: a customer managed key (rotated yearly), because the AWS managed key
      ``alias/aws/sns`` cannot grant CloudWatch the use of it, and CloudWatch must encrypt what it
      publishes (CloudWatch user guide, alarms and encrypted topics). The key policy lets CloudWatch
      use it.
    * Topic policy: denies any request not made over TLS (``aws:SecureTransport``), and allows
      CloudWatch to publish only for alarms of this account and region (``aws:SourceArn``), which a
      custom policy must state.

    Attributes:
        topic: the SNS topic (pass it to ``EndpointAlarmsProps.topic``).
        topic_arn: its ARN.
        key: its KMS key.

    Raises:
        constructs_lib.validation.PropsError: an invalid e-mail address.
    """

    def __init__(
        self, scope: Construct, construct_id: str, props: AlarmTopicProps | None = None
    ) -> None:
        props = props or AlarmTopicProps()
        problems = Problems()
        if props.email is not None:
            check_email(problems, "email", props.email)
        problems.raise_if_any(f"AlarmTopic {construct_id}")
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        alarm_arns = f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"

        if props.kms_key_arn is not None:
            self.key: kms.IKey = kms.Key.from_key_arn(self, "Key", props.kms_key_arn)
        else:
            self.key = self._own_key(stack)  # pyright: ignore[reportAttributeAccessIssue] (jsii binding: parameter names differ from the interface's)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=props.display_name or f"{stack.stack_name} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"ArnLike": {"aws:SourceArn": alarm_arns}},
            )
        )
        if props.email:
            self.topic.add_subscription(subscriptions.EmailSubscription(props.email))  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        self.topic_arn: str = self.topic.topic_arn

    def _own_key(self, stack: Stack) -> kms.Key:
        """A key for the topic alone, rotated yearly, that CloudWatch may use."""
        key = kms.Key(
            self,
            "Key",
            description=f"Encrypts the alarm topic of {stack.stack_name}",
            enable_key_rotation=True,
            pending_window=KEY_DELETION_WINDOW,
            # The key protects notifications in flight only; nothing stored needs it once the topic
            # is gone.
            removal_policy=RemovalPolicy.DESTROY,
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsEncryptNotifications",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                # In a key policy "*" means this key. No source condition: the SNS documentation's
                # statement for AWS service publishers has none, and the topic policy below already
                # limits publishing to this account's alarms; a condition CloudWatch does not send
                # would silently drop every notification.
                resources=["*"],
            )
        )
        return key
