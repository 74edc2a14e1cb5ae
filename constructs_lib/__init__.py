"""Constructs for real-time voice on Amazon SageMaker, with typed props; another CDK app can use them as they are.

    from constructs_lib import ProductionVariant, RealtimeEndpoint, RealtimeEndpointProps, ImageContainer

The package imports nothing of this project outside it (``config``, ``stacks``, ``voicectl``, ``container``), and
each name below is imported on first use: the CDK-free modules (props, checks, facts such as
:mod:`constructs_lib.instance_types`, and the model staging code in ``model_staging_build``) load without
``aws_cdk``, which the settings layer and ``voicectl`` rely on.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "RealtimeEndpoint": "endpoint", "EndpointBase": "endpoint",
    "RealtimeEndpointProps": "endpoint_props", "ImageContainer": "endpoint_props",
    "ModelPackageContainer": "endpoint_props", "ProductionVariant": "endpoint_props", "RollingUpdate": "endpoint_props",
    "VARIANT_NAME": "endpoint_props", "INVOKE": "endpoint_props", "INVOKE_WITH_RESPONSE_STREAM": "endpoint_props",
    "INVOKE_BIDIRECTIONAL": "endpoint_props",
    "MonitoredEndpoint": "monitored_endpoint", "MonitoredEndpointProps": "monitored_endpoint",
    "ScalableInstanceCount": "scaling",
    "InstanceScaling": "scaling_props", "TargetTracking": "scaling_props",
    "INVOCATIONS_PER_INSTANCE": "scaling_props", "CONCURRENT_REQUESTS_PER_MODEL": "scaling_props",
    "SageMakerExecutionRole": "execution_role",
    "EndpointAlarms": "monitoring.alarms", "EndpointAlarmsProps": "monitoring.alarms",
    "EndpointAlarmThresholds": "monitoring.thresholds", "BridgeAlarmThresholds": "monitoring.thresholds",
    "EndpointMetrics": "monitoring.metrics", "BridgeMetrics": "monitoring.metrics",
    "AlarmTopic": "monitoring.topic", "AlarmTopicProps": "monitoring.topic",
    "OperationsDashboard": "monitoring.dashboard", "OperationsDashboardProps": "monitoring.dashboard",
    "DashboardEndpoint": "monitoring.dashboard",
    "BridgeImage": "bridge_image", "BridgeImageProps": "bridge_image",
    "ModelBucket": "model_bucket", "ModelBucketProps": "model_bucket",
    "ModelStaging": "model_staging", "ModelStagingProps": "model_staging",
    "PropsError": "validation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the module of ``name`` on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
