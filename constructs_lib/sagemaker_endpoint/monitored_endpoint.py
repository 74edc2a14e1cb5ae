"""MonitoredEndpoint: a real-time endpoint with its alarms, its autoscaling and its stack outputs,
in one construct.

What the stacks of this app share, and the quickest way for another app to get a production-shaped
endpoint: the endpoint (:class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint`), its
alarms (:class:`~constructs_lib.monitoring.alarms.EndpointAlarms`, the rollback alarm wired into the
rolling update), a scalable target with one target-tracking policy
(:class:`~constructs_lib.sagemaker_endpoint.scaling.ScalableInstanceCount`) unless the size is
fixed, and outputs callers and ``voicectl`` read. The parts are siblings under this construct (ids:
the endpoint's ``name``, ``Alarms``, ``Autoscaling``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import aws_sns as sns
from constructs import Construct

from constructs_lib.monitoring.alarms import EndpointAlarms, EndpointAlarmsProps
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.props import RealtimeEndpointProps
from constructs_lib.sagemaker_endpoint.scaling import ScalableInstanceCount
from constructs_lib.sagemaker_endpoint.scaling_props import InstanceScaling
from constructs_lib.validation import Problems


@dataclass(frozen=True)
class MonitoredEndpointProps:
    """Props of :class:`MonitoredEndpoint`.

    Attributes:
        name: the construct id of the endpoint and the prefix of the outputs (``Voxtral`` gives the
            outputs ``VoxtralEndpointName``, ``VoxtralRegion``, ...) (required).
        endpoint: the endpoint (required).
        thresholds: the alarms' thresholds. Default: :class:`EndpointAlarmThresholds` defaults.
        bridge: thresholds of the bridge's alarms, for an endpoint running the bridge image.
            Default: none.
        alarm_topic: where the alarms send ALARM and OK. Default: no action.
        scaling: instance-count range and target-tracking policy. Default: fixed size (initial
            instance count).
        outputs: extra stack outputs ``{name: (value, description)}``, named ``<name><key>``.
            Default: none.
    """

    name: str
    endpoint: RealtimeEndpointProps
    thresholds: EndpointAlarmThresholds = field(default_factory=EndpointAlarmThresholds)
    bridge: BridgeAlarmThresholds | None = None
    alarm_topic: sns.ITopic | None = None
    scaling: InstanceScaling | None = None
    outputs: Mapping[str, tuple[str, str]] = field(default_factory=dict)


class MonitoredEndpoint(Construct):
    """A :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint` with alarms,
    autoscaling and outputs.

    Attributes:
        endpoint: the endpoint (names, ARN, metric helpers, ``grant_invoke``).
        alarms: its alarms.
        scaling: its scalable instance count, or None at a fixed size.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop (the endpoint's, the
            alarms' and the scaling's are checked by their constructs).
    """

    def __init__(self, scope: Construct, construct_id: str, props: MonitoredEndpointProps) -> None:
        scaling = props.scaling or InstanceScaling(
            props.endpoint.variant.initial_instance_count,
            props.endpoint.variant.initial_instance_count,
        )
        problems = Problems()
        scaling.problems(problems, props.endpoint.variant.initial_instance_count)
        problems.raise_if_any(f"MonitoredEndpoint {construct_id}")
        super().__init__(scope, construct_id)

        self.endpoint = RealtimeEndpoint(self, props.name, props.endpoint)
        self.alarms = EndpointAlarms(
            self,
            "Alarms",
            EndpointAlarmsProps(
                endpoint=self.endpoint,  # pyright: ignore[reportArgumentType] (a Construct's node is a property; IEndpoint's an attribute)
                thresholds=props.thresholds,
                bridge=props.bridge,
                topic=props.alarm_topic,
            ),
        )
        self.scaling: ScalableInstanceCount | None = None
        if scaling.scales:
            self.scaling = ScalableInstanceCount(
                self,
                "Autoscaling",
                endpoint=self.endpoint,  # pyright: ignore[reportArgumentType] (a Construct's node is a property; IEndpoint's an attribute)
                min_capacity=scaling.min_capacity,
                max_capacity=scaling.max_capacity,
            )
            assert scaling.tracking is not None  # required while min < max (checked above)
            self.scaling.scale_to_track("Policy", scaling.tracking)
        self.endpoint.add_outputs(props.name, props.outputs)
