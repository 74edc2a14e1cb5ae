"""OperationsStack: the alarm topic every endpoint's alarms publish to, and the dashboard of all
endpoints.

A stack of its own so that both exist whichever endpoints are enabled, and so that the dashboard
sees every endpoint; the endpoint stacks import the topic (and deploy after this stack). The
dashboard refers to metrics by name and draws thresholds computed from the same settings as the
alarms, so it needs nothing from the endpoint stacks.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from config.settings import Settings
from constructs_lib.monitoring.dashboard import (
    DashboardEndpoint,
    OperationsDashboard,
    OperationsDashboardProps,
)
from constructs_lib.monitoring.topic import AlarmTopic, AlarmTopicProps


class OperationsStack(Stack):
    """Alarm topic (KMS-encrypted, TLS only, optional e-mail subscription) and the operations
    dashboard."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.alarm_topic = AlarmTopic(
            self,
            "AlarmTopic",
            # A key given by ARN encrypts the topic too; a key the app makes does not: the topic
            # keeps its own, so that CloudWatch (which must encrypt what it publishes) has no use of
            # the key of the model data and logs.
            AlarmTopicProps(
                display_name=f"{settings.stack_name_prefix} alarms",
                email=settings.alarm_email,
                kms_key_arn=settings.encryption.kms_key_arn,
            ),
        )

        # The same thresholds as the endpoints' alarms (the settings build both).
        voxtral, sonic = settings.voxtral, settings.sonic
        endpoints = []
        # On the ECS target a service's stack has a dashboard of its own (its load balancer's
        # metrics need its ids).
        if voxtral.enabled and voxtral.target == "sagemaker":
            endpoints.append(
                voxtral.props(
                    DashboardEndpoint,
                    title="Voxtral speech to text",
                    thresholds=voxtral.thresholds(),
                    bridge=voxtral.bridge_thresholds(settings.capacity_plan),
                    scaling_target=settings.capacity_plan.streams_target,
                )
            )
        if sonic.enabled and sonic.target == "sagemaker":
            endpoints.append(
                sonic.props(
                    DashboardEndpoint, title="Sonic text to speech", thresholds=sonic.thresholds()
                )
            )
        # Dashboard names are unique per account across regions: the region is part of the name.
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            OperationsDashboardProps(
                dashboard_name=f"{settings.stack_name_prefix}-{settings.region}",
                endpoints=endpoints,
            ),
        )

        if settings.connect.enabled:
            # The Connect row: metrics by namespace and alarms by name, so nothing of the Connect
            # stack is needed.
            from constructs_lib.connect.transcription import dashboard_rows

            for row in dashboard_rows(
                self,
                settings.stack_name_prefix,
                settings.connect.alarm_millis_behind,
                settings.connect.calls_per_task,
                bus_dead_letters=settings.uses_key,
            ):
                self.dashboard.dashboard.add_widgets(*row)

        if settings.agent.enabled:
            # The voice agent's row: metrics by namespace and alarms by name, as the Connect row.
            from constructs_lib.agent.service import dashboard_rows as agent_rows

            for row in agent_rows(
                self,
                settings.stack_name_prefix,
                settings.agent.max_sessions_per_task,
                settings.agent.alarm_voice_to_voice_p95_ms,
            ):
                self.dashboard.dashboard.add_widgets(*row)

        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.alarm_topic.topic.topic_arn,
            description="SNS topic of every alarm (subscribe on-call tools here)",
        )
        CfnOutput(
            self,
            "DashboardName",
            value=self.dashboard.dashboard.dashboard_name,
            description="CloudWatch dashboard of the endpoints",
        )
