"""IEndpoint: what alarms and autoscaling need of an endpoint.
:class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint` and the endpoints its
``from_endpoint_*`` methods import provide it; :mod:`constructs_lib.monitoring.alarms` and
:mod:`constructs_lib.sagemaker_endpoint.scaling` accept any object that does (so they need not
import the endpoint module, which makes them through ``add_alarms`` and
``auto_scale_instance_count``).

CDK types appear in annotations only: this module imports no ``aws_cdk``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aws_cdk import aws_cloudwatch as cloudwatch
    from constructs import IDependable, Node

    from constructs_lib.sagemaker_endpoint.props import RollingUpdate
    from constructs_lib.sagemaker_endpoint.scaling import ScalableInstanceCount


class IEndpoint(Protocol):
    """An endpoint variant: its names, facts, metric helpers (it is also a
    :class:`~constructs_lib.monitoring.metrics.EndpointMetrics`: ``metric_*``) and the hooks its
    alarms and autoscaling call.

    Attributes:
        endpoint_name / endpoint_arn / variant_name: what it is.
        instance_type / initial_instance_count: the variant's, or None when unknown (an imported
            endpoint).
        instance_types: every instance type the variant may run (instance pools), empty when
            unknown.
        rolling_update: its rolling update, or None.
        when_in_service: met once CloudFormation created the endpoint, or None (an imported
            endpoint).
        scalable_instance_count: its
            :class:`~constructs_lib.sagemaker_endpoint.scaling.ScalableInstanceCount`, once made.
    """

    node: Node
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    instance_type: str | None
    instance_types: tuple[str, ...]
    initial_instance_count: int | None
    rolling_update: RollingUpdate | None
    when_in_service: IDependable | None
    scalable_instance_count: ScalableInstanceCount | None

    def add_rollback_alarm(self, alarm: cloudwatch.IAlarm) -> None:
        """Roll updates back while ``alarm`` is in ALARM."""

    def register_scaling(self, scaling: ScalableInstanceCount) -> None:
        """Record the variant's autoscaling (called by
        :class:`~constructs_lib.sagemaker_endpoint.scaling.ScalableInstanceCount`)."""
