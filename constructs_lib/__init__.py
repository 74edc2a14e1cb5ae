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

#: The public names, by the module that defines them.
_MODULES = {
    "endpoint": ("RealtimeEndpoint", "EndpointBase"),
    "endpoint_interface": ("IEndpoint",),
    "endpoint_props": ("RealtimeEndpointProps", "ImageContainer", "ModelPackageContainer", "ProductionVariant",
                       "RollingUpdate", "VARIANT_NAME", "INVOKE", "INVOKE_WITH_RESPONSE_STREAM", "INVOKE_BIDIRECTIONAL"),
    "monitored_endpoint": ("MonitoredEndpoint", "MonitoredEndpointProps"),
    "scaling": ("ScalableInstanceCount",),
    "scaling_props": ("InstanceScaling", "TargetTracking", "INVOCATIONS_PER_INSTANCE", "CONCURRENT_REQUESTS_PER_MODEL"),
    "execution_role": ("SageMakerExecutionRole",),
    "monitoring.alarms": ("EndpointAlarms", "EndpointAlarmsProps"),
    "monitoring.thresholds": ("EndpointAlarmThresholds", "BridgeAlarmThresholds"),
    "monitoring.metrics": ("EndpointMetrics", "BridgeMetrics"),
    "monitoring.topic": ("AlarmTopic", "AlarmTopicProps"),
    "monitoring.dashboard": ("OperationsDashboard", "OperationsDashboardProps", "DashboardEndpoint"),
    "bridge_image": ("BridgeImage", "BridgeImageProps"),
    "model_bucket": ("ModelBucket", "ModelBucketProps"),
    "model_staging": ("ModelStaging", "ModelStagingProps"),
    "ecs_service": ("GpuEcsService", "GpuEcsServiceProps"),
    "ecs_props": ("GpuCapacity", "LoadBalancing"),
    "network": ("PrivateNetwork",),
    "network_props": ("PrivateNetworkProps", "ExistingVpc", "DataKeyProps"),
    "encryption": ("DataKey",),
    "validation": ("PropsError",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the module of ``name`` on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
