"""What we alarm on, per endpoint: one :class:`AlarmRule` per alarm, built by :func:`alarm_rules`
from the endpoint's metric helpers, created as CloudWatch alarms by :class:`EndpointAlarms` (every
state change goes to one SNS topic).

The rules are plain values (metric, comparison, threshold after unit conversion, periods,
missing-data treatment and the reason for it), so the dashboard draws exactly the thresholds the
alarms use and tests can read them.

Threshold conversions (thresholds are set in milliseconds and in percent of capacity,
:mod:`constructs_lib.monitoring.thresholds`):

* ``ModelLatency`` and ``OverheadLatency`` are reported in microseconds: ms x 1000 (500 ms ->
  500000).
* ``GPUUtilization`` and ``GPUMemoryUtilization`` run from 0 to 100 x GPUs, ``CPUUtilization`` from
  0 to 100 x vCPUs (SageMaker endpoint instance metrics): percent x GPUs or vCPUs from
  ``constructs_lib/facts/instance_types.py`` (90 % on ml.g6e.12xlarge, 4 GPUs, -> 360). A variant
  with instance pools of different GPU or vCPU counts scales by the fewest
  (:func:`constructs_lib.facts.instance_types.alarm_capacity` says why).
* ``TimeToFirstDelta`` is already in milliseconds; ActiveStreams thresholds are a fraction of the
  stream cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from aws_cdk import (
    Duration,
    aws_cloudwatch as cloudwatch,
    aws_cloudwatch_actions as actions,
    aws_sns as sns,
)
from constructs import Construct

from constructs_lib.facts import instance_types
from constructs_lib.monitoring.metrics import (
    BridgeMetrics,
    EndpointMetrics,
    milliseconds_to_microseconds,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.validation import Problems

if TYPE_CHECKING:
    from constructs_lib.sagemaker_endpoint.interface import IEndpoint

GT = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
GTE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
LT = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
NOT_BREACHING = cloudwatch.TreatMissingData.NOT_BREACHING
BREACHING = cloudwatch.TreatMissingData.BREACHING

#: Error counts are judged over 5 minutes: long enough to sum a burst, short enough for a rollout's
#: baking period.
ERROR_WINDOW = Duration.minutes(5)
#: Utilisation is judged on 5-minute averages, for 15 minutes: a sustained level, not a spike.
UTILISATION_WINDOW = Duration.minutes(5)
#: Consecutive minutes without any instance datapoint before the endpoint is reported down. Instance
#: metrics arrive once a minute, but CloudWatch delivery can leave gaps of a few minutes; ten
#: consecutive empty minutes is an outage, not a delivery hiccup. The alarm pages only: it is not a
#: rollback alarm (see ROLLBACK_ERROR_MINUTES).
HEALTH_MINUTES = 10
#: The rollback alarm on the 5XX error rate judges 1-minute periods and fires when
#: ROLLBACK_ERROR_BREACHING of the last ROLLBACK_ERROR_MINUTES breach. Why not "any 5XX" in a
#: 5-minute sum: a rolling update stops old instances, and a stream that outlives the bridge's drain
#: (DRAIN_S=25 s; SageMaker kills the container 30 s after SIGTERM) is cut, which may count as a
#: 5XX. One batch's cuts fall within one drain window, so in at most two adjacent minutes; requiring
#: three breaching minutes out of five keeps that burst from rolling back the very update that
#: caused it, while a new image that fails requests minute after minute still rolls back within five
#: minutes. A rate rather than a count makes one threshold fit any traffic.
ROLLBACK_ERROR_MINUTES = 5
ROLLBACK_ERROR_BREACHING = 3

# Why each missing-data treatment is right (stated in every alarm's description).
MISSING_ERRORS = "no datapoint means no request, so nothing failed"
MISSING_LATENCY = (
    "no datapoint means no request, so there is no latency to judge; the health alarm reports an "
    "endpoint without instances"
)
MISSING_UTILISATION = (
    "no datapoint means no instance reported, which the health alarm reports; this alarm judges "
    "only levels"
)
MISSING_HEALTH = "no utilisation data means no running instance"
MISSING_BRIDGE = (
    "the bridge sends a datapoint every minute, zeros included; a gap means the container is "
    "down, which the health alarm reports"
)
MISSING_FIRST_DELTA = "no datapoint means no stream started, so there is no first delta to time"


@dataclass(frozen=True)
class AlarmRule:
    """One alarm: what metric, what comparison against which threshold, over how many periods, and
    what missing data means.

    Attributes:
        name: short name, unique per endpoint; the alarm is named ``<endpoint name>-<name>``.
        metric: the metric (its statistic and period are the alarm's).
        comparison: how the metric is compared with ``threshold``.
        threshold: in the metric's own unit (µs for ModelLatency, percent x GPUs for GPUUtilization,
            ...).
        evaluation_periods: periods looked at.
        datapoints_to_alarm: of those, how many must breach.
        treat_missing_data: what a period without a datapoint counts as.
        meaning: one sentence for the on-call reader: what is wrong when this fires.
        missing_data_reason: why ``treat_missing_data`` is right for this metric.
        rollback: SageMaker rolls back a rolling update while this alarm is in ALARM.
    """

    name: str
    metric: cloudwatch.Metric | cloudwatch.MathExpression
    comparison: cloudwatch.ComparisonOperator
    threshold: float
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: cloudwatch.TreatMissingData
    meaning: str
    missing_data_reason: str
    rollback: bool = False

    @property
    def description(self) -> str:
        """AlarmDescription: the meaning, the rule in words and the missing-data choice with its
        reason."""
        minutes = self.metric.period.to_minutes()
        if isinstance(self.metric, cloudwatch.Metric):
            what = f"{self.metric.metric_name} ({self.metric.statistic})"
        else:
            # The rules' math expressions combine plain metrics.
            used = cast("dict[str, cloudwatch.Metric]", self.metric.using_metrics)
            terms = ", ".join(
                f"{name} = {m.metric_name} {m.statistic}" for name, m in sorted(used.items())
            )
            what = f"{self.metric.expression} ({terms})"
        return (
            f"{self.meaning} Fires when {what} is "
            f"{_WORDS[self.comparison]} {self.threshold:g} in {self.datapoints_to_alarm} of "
            f"{self.evaluation_periods} {minutes}-minute periods. Missing data: "
            f"{_MISSING[self.treat_missing_data]}, because {self.missing_data_reason}."
        )


_WORDS = {GT: "above", GTE: "at or above", LT: "below"}
_MISSING = {NOT_BREACHING: "notBreaching", BREACHING: "breaching"}


def alarm_rules(
    m: EndpointMetrics,
    instance_type: str | Sequence[str],
    t: EndpointAlarmThresholds,
    bridge: BridgeAlarmThresholds | None = None,
) -> list[AlarmRule]:
    """The alarms of one endpoint variant, thresholds converted to each metric's unit.

    Args:
        m: the variant's metrics (a
            :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint` is one).
        instance_type: the variant's instance type, or every type of its instance pools: GPU and CPU
            thresholds scale with the GPUs and vCPUs (the fewest among pools:
            :func:`constructs_lib.facts.instance_types.alarm_capacity`).
        t: the SageMaker alarms' thresholds.
        bridge: the thresholds of the bridge's alarms, or None for an endpoint without our bridge.

    Raises:
        ValueError: an instance type is not in ``constructs_lib/facts/instance_types.py``.
    """
    types = [instance_type] if isinstance(instance_type, str) else list(instance_type)
    gpus, vcpus = instance_types.alarm_capacity(types)
    fewest = " (the fewest among the instance pools)" if len(types) > 1 else ""
    rules = [*_request_rules(m, t), *_instance_rules(m, t, vcpus, fewest)]
    if t.rollback_5xx_error_percent is not None:
        rules.insert(1, _rollback_rule(m, t.rollback_5xx_error_percent))
    if gpus:
        rules[4:4] = _gpu_rules(m, t, gpus, fewest)
    if bridge is not None:
        rules += bridge_alarm_rules(
            BridgeMetrics(bridge.namespace, m.endpoint_name, m.variant_name), bridge
        )
    return rules


def _request_rules(m: EndpointMetrics, t: EndpointAlarmThresholds) -> list[AlarmRule]:
    """The requests' errors (5xx, 4xx) and latency (model, overhead) alarms."""
    return [
        AlarmRule(
            "Invocation5XXErrors",
            m.metric_invocation_5xx_errors(ERROR_WINDOW),
            GT,
            t.errors_5xx,
            1,
            1,
            NOT_BREACHING,
            "Requests are failing inside the endpoint (the container or SageMaker answered 5xx).",
            MISSING_ERRORS,
        ),
        AlarmRule(
            "Invocation4XXErrors",
            m.metric_invocation_4xx_errors(ERROR_WINDOW),
            GT,
            t.errors_4xx,
            1,
            1,
            NOT_BREACHING,
            "Callers' requests are rejected (4xx: malformed, unauthorised or throttled).",
            MISSING_ERRORS,
        ),
        AlarmRule(
            "ModelLatencyP90",
            m.metric_model_latency("p90"),
            GT,
            milliseconds_to_microseconds(t.model_latency_p90_ms),
            5,
            3,
            NOT_BREACHING,
            f"The model answers slowly: ModelLatency p90 above {t.model_latency_p90_ms:g} ms "
            "(reported in µs).",
            MISSING_LATENCY,
        ),
        AlarmRule(
            "OverheadLatencyP90",
            m.metric_overhead_latency("p90"),
            GT,
            milliseconds_to_microseconds(t.overhead_latency_p90_ms),
            5,
            3,
            NOT_BREACHING,
            f"SageMaker adds delay: OverheadLatency p90 above {t.overhead_latency_p90_ms:g} ms "
            "(reported in µs).",
            MISSING_LATENCY,
        ),
    ]


def _instance_rules(
    m: EndpointMetrics, t: EndpointAlarmThresholds, vcpus: int, fewest: str
) -> list[AlarmRule]:
    """The instances' CPU, memory and disk alarms, and the endpoint's health (any instance
    reporting)."""
    return [
        AlarmRule(
            "CPUUtilization",
            m.metric_cpu_utilization("Average", UTILISATION_WINDOW),
            GT,
            t.cpu_utilization_percent * vcpus,
            3,
            3,
            NOT_BREACHING,
            f"CPU above {t.cpu_utilization_percent:g} % of {vcpus} vCPUs{fewest} for 15 minutes.",
            MISSING_UTILISATION,
        ),
        AlarmRule(
            "MemoryUtilization",
            m.metric_memory_utilization("Maximum", UTILISATION_WINDOW),
            GT,
            t.memory_percent,
            2,
            2,
            NOT_BREACHING,
            f"Host memory above {t.memory_percent:g} % on an instance for 10 minutes.",
            MISSING_UTILISATION,
        ),
        AlarmRule(
            "DiskUtilization",
            m.metric_disk_utilization("Maximum", UTILISATION_WINDOW),
            GT,
            t.disk_percent,
            1,
            1,
            NOT_BREACHING,
            f"Disk above {t.disk_percent:g} % on an instance.",
            MISSING_UTILISATION,
        ),
        # Pages only, never rolls back: SageMaker itself fails an update whose new instances do not
        # pass /ping, and this alarm (missing data breaching) would be in ALARM whenever the metric
        # is late. It is created after the endpoint is InService (EndpointAlarms waits for it), so
        # it does not page through the first deployment.
        AlarmRule(
            "EndpointHealth",
            m.metric_instances_reporting(),
            LT,
            1,
            HEALTH_MINUTES,
            HEALTH_MINUTES,
            BREACHING,
            f"No instance of the endpoint has reported for {HEALTH_MINUTES} minutes: it cannot "
            "serve.",
            MISSING_HEALTH,
        ),
    ]


def _rollback_rule(m: EndpointMetrics, percent: float) -> AlarmRule:
    """The 5XX error rate a rolling update rolls back on (see ROLLBACK_ERROR_MINUTES)."""
    return AlarmRule(
        "Invocation5XXErrorRate",
        m.metric_invocation_5xx_error_rate(),
        GT,
        percent / 100,
        ROLLBACK_ERROR_MINUTES,
        ROLLBACK_ERROR_BREACHING,
        NOT_BREACHING,
        f"More than {percent:g} % of requests answered 5xx in {ROLLBACK_ERROR_BREACHING} of "
        f"{ROLLBACK_ERROR_MINUTES} minutes: a rolling update rolls back (a burst of streams cut "
        "when old instances stop lasts at most two minutes).",
        MISSING_ERRORS,
        rollback=True,
    )


def _gpu_rules(
    m: EndpointMetrics, t: EndpointAlarmThresholds, gpus: int, fewest: str
) -> list[AlarmRule]:
    """The GPUs' utilisation and memory alarms, in percent x GPUs."""
    return [
        AlarmRule(
            "GPUUtilization",
            m.metric_gpu_utilization("Average", UTILISATION_WINDOW),
            GT,
            t.gpu_utilization_percent * gpus,
            3,
            3,
            NOT_BREACHING,
            f"GPU above {t.gpu_utilization_percent:g} % of {gpus} GPU(s){fewest} for 15 "
            "minutes: the endpoint is saturated.",
            MISSING_UTILISATION,
        ),
        AlarmRule(
            "GPUMemoryUtilization",
            m.metric_gpu_memory_utilization("Maximum", UTILISATION_WINDOW),
            GT,
            t.gpu_memory_percent * gpus,
            2,
            2,
            NOT_BREACHING,
            f"GPU memory above {t.gpu_memory_percent:g} % of {gpus} GPU(s){fewest} on an "
            "instance for 10 minutes.",
            MISSING_UTILISATION,
        ),
    ]


def bridge_alarm_rules(bm: BridgeMetrics, b: BridgeAlarmThresholds) -> list[AlarmRule]:
    """The alarms on the bridge's own metrics, wherever the bridge runs (they read only its
    metrics)."""
    return [
        AlarmRule(
            "UpstreamErrors",
            bm.metric_upstream_errors(ERROR_WINDOW),
            GT,
            0,
            1,
            1,
            NOT_BREACHING,
            "vLLM refused sessions or dropped them mid-stream: callers lost transcripts.",
            MISSING_BRIDGE,
        ),
        AlarmRule(
            "StreamsRejected",
            bm.metric_streams_rejected(ERROR_WINDOW),
            GT,
            0,
            1,
            1,
            NOT_BREACHING,
            "Callers were refused because instances were at their stream cap (server_busy).",
            MISSING_BRIDGE,
        ),
        AlarmRule(
            "TimeToFirstDeltaP90",
            bm.metric_time_to_first_delta("p90"),
            GT,
            b.time_to_first_delta_p90_ms,
            5,
            3,
            NOT_BREACHING,
            f"Callers wait long for the first words: TimeToFirstDelta p90 above "
            f"{b.time_to_first_delta_p90_ms:g} ms.",
            MISSING_FIRST_DELTA,
        ),
        AlarmRule(
            "ActiveStreamsNearCap",
            bm.metric_stream_cap_used_per_instance(),
            GTE,
            round(b.active_streams_fraction * 100, 6),
            5,
            5,
            NOT_BREACHING,
            f"Live streams per instance at {b.active_streams_fraction:g} of each instance's own "
            "stream cap (StreamCapUsed; the instance pools' caps differ) for 5 minutes: "
            "autoscaling is at its maximum or cannot keep up.",
            MISSING_BRIDGE,
        )
        if b.caps_differ
        else AlarmRule(
            "ActiveStreamsNearCap",
            bm.metric_active_streams_per_instance(),
            GTE,
            b.active_streams_threshold,
            5,
            5,
            NOT_BREACHING,
            f"Live streams per instance at {b.active_streams_fraction:g} of the cap of "
            f"{b.stream_cap} for 5 minutes: autoscaling is at its maximum or cannot keep up.",
            MISSING_BRIDGE,
        ),
    ]


def alarm_from_rule(
    scope: Construct,
    construct_id: str,
    rule: AlarmRule,
    alarm_name: str,
    action: actions.SnsAction | None,
) -> cloudwatch.Alarm:
    """The CloudWatch alarm of ``rule``, sending ALARM and OK to ``action`` (when given)."""
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_name=alarm_name,
        alarm_description=rule.description,
        metric=rule.metric,
        comparison_operator=rule.comparison,
        threshold=rule.threshold,
        evaluation_periods=rule.evaluation_periods,
        datapoints_to_alarm=rule.datapoints_to_alarm,
        treat_missing_data=rule.treat_missing_data,
    )
    if action is not None:
        alarm.add_alarm_action(action)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        alarm.add_ok_action(action)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
    return alarm


@dataclass(frozen=True)
class EndpointAlarmsProps:
    """Props of :class:`EndpointAlarms`.

    Attributes:
        endpoint: the endpoint (its metric helpers and instance type) (required).
        thresholds: the SageMaker alarms' thresholds. Default: :class:`EndpointAlarmThresholds`
            defaults.
        bridge: thresholds of the bridge's alarms, for an endpoint running the bridge image.
            Default: none.
        topic: where every alarm sends ALARM and OK. Default: no action.
        alarm_name_prefix: alarms are named ``<prefix>-<rule name>``. Default: the endpoint's name.
    """

    endpoint: IEndpoint
    thresholds: EndpointAlarmThresholds = field(default_factory=EndpointAlarmThresholds)
    bridge: BridgeAlarmThresholds | None = None
    topic: sns.ITopic | None = None
    alarm_name_prefix: str | None = None


class EndpointAlarms(Construct):
    """One CloudWatch alarm per :class:`AlarmRule` of the endpoint.

    * Rollback rules (the 5XX error rate, when the thresholds set a rollback percent) become the
      endpoint's auto-rollback alarms when it has a rolling update
      (:meth:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint.add_rollback_alarm`).
    * Alarms that treat missing data as breaching (EndpointHealth) are created only after the
      endpoint is InService (CloudFormation finishes creating an AWS::SageMaker::Endpoint then), so
      they start with instance data instead of sitting in ALARM, and paging, through the first
      deployment. Rollback alarms cannot wait (the Endpoint's DeploymentConfig names them), and they
      treat missing data as not breaching.

    Usually made by :meth:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint.add_alarms`.

    Attributes:
        rules: the rules, in order.
        alarms: ``{rule name: alarm}``.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid threshold, or an instance type
            the catalogue lacks.
    """

    def __init__(self, scope: Construct, construct_id: str, props: EndpointAlarmsProps) -> None:
        endpoint = props.endpoint
        problems = Problems()
        props.thresholds.problems(problems)
        if props.bridge is not None:
            props.bridge.problems(problems)
        if not endpoint.instance_types:
            problems.note(
                "endpoint: its instance type is unknown (an imported endpoint: pass "
                "instance_type to RealtimeEndpoint.from_endpoint_attributes); the GPU and CPU "
                "alarms scale with it"
            )
        for instance_type in endpoint.instance_types:
            instance_types.check_catalogued(problems, "instance_type", instance_type)
        problems.raise_if_any(f"EndpointAlarms {construct_id}")
        super().__init__(scope, construct_id)

        # An IEndpoint has EndpointMetrics' metric_* methods (interface.py).
        metrics = cast(EndpointMetrics, endpoint)
        self.rules = alarm_rules(metrics, endpoint.instance_types, props.thresholds, props.bridge)
        action = actions.SnsAction(props.topic) if props.topic is not None else None
        prefix = props.alarm_name_prefix or endpoint.endpoint_name
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for rule in self.rules:
            alarm = alarm_from_rule(self, rule.name, rule, f"{prefix}-{rule.name}", action)
            self.alarms[rule.name] = alarm
            if rule.rollback and endpoint.rolling_update is not None:
                endpoint.add_rollback_alarm(alarm)
            elif rule.treat_missing_data == BREACHING and endpoint.when_in_service is not None:
                alarm.node.add_dependency(endpoint.when_in_service)

    @property
    def rollback_alarms(self) -> list[cloudwatch.Alarm]:
        """The alarms a rolling update watches (the 5XX error rate, when the thresholds set one)."""
        return [self.alarms[rule.name] for rule in self.rules if rule.rollback]
