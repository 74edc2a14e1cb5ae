"""Constructs for real-time voice on Amazon SageMaker, with typed props; another CDK app can use
them as they are.

    from constructs_lib import (
        ImageContainer, ProductionVariant, RealtimeEndpoint, RealtimeEndpointProps,
    )

One folder per family, each with a README (what it is, its props and their defaults):

- :mod:`constructs_lib.sagemaker_endpoint`: the real-time endpoint, its props and interface,
  execution role, instance scaling and the monitored endpoint (endpoint + alarms + scaling +
  outputs).
- :mod:`constructs_lib.ecs_service`: the GPU ECS service, its bridge add-on, their props and their
  monitoring.
- :mod:`constructs_lib.artifacts`: the bridge image, the model bucket and the model staging (with
  the CodeBuild source and the waiter Lambda it ships as assets).
- :mod:`constructs_lib.network`: the private network, its props, and the data key.
- :mod:`constructs_lib.monitoring`: metrics, thresholds and alarm rules both families use, the alarm
  topic and the operations dashboard.
- :mod:`constructs_lib.facts`: what the constructs and the settings reason with, with no ``aws_cdk``
  import: GPU capacity, CUDA compatibility, the instance catalogue, names and ARNs,
  :class:`~constructs_lib.facts.S3Prefix`.
- ``validation.py`` (props checks, :class:`PropsError`), ``nag.py`` (cdk-nag acknowledgements),
  ``cleanup.py`` (the custom resources that let ``cdk destroy`` finish), shared by the families;
  ``service_code.py`` finds the code they deploy (``services/handlers``,
  ``services/model_staging``).

The package imports nothing of this project outside it (``config``, ``stacks``, ``voicectl``,
``services``), and each name below is imported on first use: the CDK-free modules (props, checks,
:mod:`constructs_lib.facts`) load without ``aws_cdk``, which the settings layer and ``voicectl``
rely on. The package folders import nothing on their own for the same reason.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The public names, by the module that defines them.
_MODULES = {
    "sagemaker_endpoint.endpoint": ("RealtimeEndpoint", "EndpointBase"),
    "sagemaker_endpoint.interface": ("IEndpoint",),
    "sagemaker_endpoint.props": (
        "RealtimeEndpointProps",
        "ImageContainer",
        "ModelPackageContainer",
        "ProductionVariant",
        "RollingUpdate",
        "VARIANT_NAME",
        "INVOKE",
        "INVOKE_WITH_RESPONSE_STREAM",
        "INVOKE_BIDIRECTIONAL",
    ),
    "sagemaker_endpoint.monitored_endpoint": ("MonitoredEndpoint", "MonitoredEndpointProps"),
    "sagemaker_endpoint.scaling": ("ScalableInstanceCount",),
    "sagemaker_endpoint.scaling_props": (
        "InstanceScaling",
        "TargetTracking",
        "INVOCATIONS_PER_INSTANCE",
        "CONCURRENT_REQUESTS_PER_MODEL",
    ),
    "sagemaker_endpoint.execution_role": ("SageMakerExecutionRole",),
    "monitoring.alarms": ("EndpointAlarms", "EndpointAlarmsProps"),
    "monitoring.thresholds": ("EndpointAlarmThresholds", "BridgeAlarmThresholds"),
    "monitoring.metrics": ("EndpointMetrics", "BridgeMetrics"),
    "monitoring.topic": ("AlarmTopic", "AlarmTopicProps"),
    "monitoring.dashboard": (
        "OperationsDashboard",
        "OperationsDashboardProps",
        "DashboardEndpoint",
    ),
    "artifacts.bridge_image": ("BridgeImage", "BridgeImageProps"),
    "artifacts.model_bucket": ("ModelBucket", "ModelBucketProps"),
    "artifacts.model_staging": ("ModelStaging", "ModelStagingProps"),
    "ecs_service.service": ("GpuEcsService",),
    "ecs_service.bridge_service": ("GpuEcsServiceWithBridge",),
    "ecs_service.props": (
        "GpuEcsServiceProps",
        "GpuEcsServiceWithBridgeProps",
        "GpuCapacity",
        "LoadBalancing",
    ),
    "network.private_network": ("PrivateNetwork",),
    "network.props": ("PrivateNetworkProps", "ExistingVpc", "DataKeyProps"),
    "network.encryption": ("DataKey",),
    "facts": ("S3Prefix",),
    "validation": ("PropsError",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)  # pyright: ignore[reportUnsupportedDunderAll] (names imported on first use, PEP 562)


def __getattr__(name: str) -> Any:
    """Import the module of ``name`` on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
