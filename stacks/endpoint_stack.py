"""EndpointStack: what the Voxtral and Sonic stacks share, an execution role and a monitored, autoscaled endpoint built
from one settings section; each subclass chooses only what differs (container, invoke actions, rolling update,
scaling metric, outputs)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from aws_cdk import Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from config.settings import EndpointSettings, Settings
from constructs_lib.sagemaker_endpoint.props import ImageContainer, ModelPackageContainer, RealtimeEndpointProps, RollingUpdate
from constructs_lib.sagemaker_endpoint.execution_role import SageMakerExecutionRole
from constructs_lib.sagemaker_endpoint.monitored_endpoint import MonitoredEndpoint, MonitoredEndpointProps
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from constructs_lib.sagemaker_endpoint.scaling_props import InstanceScaling, TargetTracking
from stacks.foundation_stack import Foundation


class EndpointStack(Stack):
    """A stack holding one endpoint of the app.

    Attributes:
        role: the endpoint's execution role (subclasses grant what their container reads).
        endpoint: the :class:`~constructs_lib.sagemaker_endpoint.monitored_endpoint.MonitoredEndpoint` (set by :meth:`add_endpoint`).
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, section: EndpointSettings,
                 foundation: Foundation, alarm_topic: sns.ITopic, role_path: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self._settings, self._section, self._alarm_topic = settings, section, alarm_topic
        self._foundation = foundation
        self.role = SageMakerExecutionRole(self, "ExecutionRole", path=role_path,
                                           description=f"SageMaker execution role of {section.endpoint_name}")

    def add_endpoint(self, name: str, *, container: ImageContainer | ModelPackageContainer, description: str,
                     invoke_actions: Sequence[str], tracking: TargetTracking,
                     rolling_update: RollingUpdate | None = None, bridge: BridgeAlarmThresholds | None = None,
                     outputs: Mapping[str, tuple[str, str]],
                     pool_environment: Mapping[str, Mapping[str, str]] | None = None) -> MonitoredEndpoint:
        """The endpoint, its alarms (to the alarm topic), its autoscaling (within the section's instance range, by
        ``tracking`` while it is a range) and its outputs ``<name>...``. ``pool_environment``: the instance pools that
        run a Model of their own, with the environment variables that differ (RealtimeEndpointProps)."""
        section, foundation = self._section, self._foundation
        if foundation.key_arn and section.volume_kms_key_arn is None:
            # The ML storage volumes under the data key unless the section names a key of its own.
            section = dataclasses.replace(section, volume_kms_key_arn=foundation.key_arn)
        self.endpoint = MonitoredEndpoint(
            # Construct id "Default": CDK leaves it out of logical ids, so the endpoint, its alarms and its scaling
            # keep the ids they were first deployed with (CDK Developer Guide, "Identifiers": logical IDs).
            self, "Default",
            MonitoredEndpointProps(
                name=name,
                endpoint=section.props(
                    RealtimeEndpointProps, container=container, variant=section.variant(), role=self.role.role,
                    log_retention_days=self._settings.log_retention_days, rolling_update=rolling_update,
                    invoke_actions=invoke_actions, description=description,
                    # Both Models run without network access (the Marketplace package requires it; the bridge image
                    # gets its weights from S3 through SageMaker and reaches nothing else).
                    enable_network_isolation=True,
                    vpc_subnets=foundation.subnet_ids, security_groups=foundation.security_group_ids,
                    require_source_vpce=foundation.source_vpce_ids, log_kms_key_arn=foundation.key_arn,
                    pool_environment=dict(pool_environment or {})),
                thresholds=section.thresholds(),
                bridge=bridge,
                alarm_topic=self._alarm_topic,
                scaling=section.props(InstanceScaling, tracking=tracking),
                outputs=outputs,
            ),
        )
        return self.endpoint
