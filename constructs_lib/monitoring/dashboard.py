"""OperationsDashboard: one CloudWatch dashboard for every endpoint of the deployment.

Per endpoint, one row of graphs: live streams (Voxtral) or invocations (Sonic), time to first delta
(Voxtral), latency, errors, GPU and memory use, and instance count. Each alarm's threshold is drawn
on its graph as a horizontal annotation, from the same
:class:`~constructs_lib.monitoring.alarms.AlarmRule` the alarm uses, converted to the graph's unit
(latency in ms, utilisation in percent of capacity).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, aws_cloudwatch as cloudwatch
from constructs import Construct

from constructs_lib.facts import instance_types
from constructs_lib.facts.names import is_token
from constructs_lib.monitoring.alarms import AlarmRule, alarm_rules
from constructs_lib.monitoring.metrics import (
    MICROSECONDS_PER_MILLISECOND,
    BridgeMetrics,
    EndpointMetrics,
    default_label,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.sagemaker_endpoint.props import VARIANT_NAME
from constructs_lib.validation import Problems

#: Dashboard grid: 24 columns; three graphs per row.
WIDTH = 8
HEIGHT = 6
ALARM_COLOR = "#d62728"
LIMIT_COLOR = "#7f7f7f"
TARGET_COLOR = "#2ca02c"


@dataclass(frozen=True)
class DashboardEndpoint:
    """One endpoint on the dashboard, by name (the dashboard may live in another stack than the
    endpoint).

    Attributes:
        title: human name, e.g. ``Voxtral speech to text``.
        endpoint_name: the EndpointName.
        instance_type: the variant's instance type (graphs show GPU and CPU use in percent of its
            capacity).
        instance_pools: the variant's instance pools, when it has them (capacity then counts as the
            alarms count it: the fewest GPUs and vCPUs among the pools). Default: none.
        thresholds: the same thresholds as the endpoint's alarms, drawn on the graphs.
        bridge: the bridge's alarm thresholds, for an endpoint running the bridge image. Default:
            none.
        min_capacity / max_capacity: the instance-count range, drawn on the instance-count graph.
            Default 1 and 1.
        scaling_target: the target-tracking value, drawn on the live-streams graph (live streams per
            instance).
            Default: none.
        variant_name: default ``AllTraffic``.
    """

    title: str
    endpoint_name: str
    instance_type: str
    thresholds: EndpointAlarmThresholds = field(default_factory=EndpointAlarmThresholds)
    bridge: BridgeAlarmThresholds | None = None
    min_capacity: int = 1
    max_capacity: int = 1
    scaling_target: float | None = None
    variant_name: str = VARIANT_NAME
    instance_pools: Sequence[str] = ()

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every instance type the variant may run: the pools, else the instance type."""
        return tuple(self.instance_pools) or (self.instance_type,)

    def problems(self, p: Problems) -> None:
        for instance_type in self.instance_types:
            if instance_types.is_instance_type(instance_type):
                instance_types.check_catalogued(p, "instance_type", instance_type)
            else:
                instance_types.check_instance_type(p, "instance_type", instance_type)
        self.thresholds.problems(p)
        if self.bridge is not None:
            self.bridge.problems(p)


#: CloudWatch dashboard names: letters, digits, '-' and '_', at most 255 (PutDashboard API
#: reference).
DASHBOARD_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,255}")


@dataclass(frozen=True)
class OperationsDashboardProps:
    """Props of :class:`OperationsDashboard`.

    Attributes:
        dashboard_name: CloudWatch dashboard names are unique per account across regions; include
            the region.
        endpoints: the endpoints, one row each, in this order.
    """

    dashboard_name: str
    endpoints: Sequence[DashboardEndpoint]

    def problems(self, p: Problems) -> None:
        if not is_token(self.dashboard_name) and not DASHBOARD_NAME_RE.fullmatch(
            self.dashboard_name
        ):
            p.add(
                "dashboard_name", self.dashboard_name, "must be 1-255 letters, digits, '-' or '_'"
            )
        for endpoint in self.endpoints:
            endpoint.problems(p)


class OperationsDashboard(Construct):
    """A CloudWatch dashboard with one section per endpoint.

    Attributes:
        dashboard: the CloudWatch dashboard.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(
        self, scope: Construct, construct_id: str, props: OperationsDashboardProps
    ) -> None:
        problems = Problems()
        props.problems(problems)
        problems.raise_if_any(f"OperationsDashboard {construct_id}")
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=props.dashboard_name,
            default_interval=Duration.hours(3),
        )
        for item in props.endpoints:
            for row in endpoint_rows(item):
                self.dashboard.add_widgets(*row)


def _alarm_line(rule: AlarmRule, value: float, unit: str) -> cloudwatch.HorizontalAnnotation:
    return cloudwatch.HorizontalAnnotation(
        value=value, label=f"alarm {rule.name}: {value:g} {unit}".strip(), color=ALARM_COLOR
    )


def _labelled(metric: cloudwatch.IMetric, label: str | None = None) -> cloudwatch.IMetric:
    """``metric`` with a graph label: ``label``, else the one it already has, else
    :func:`default_label` (math expressions carry their own). A label set earlier is never replaced
    by the default."""
    if isinstance(metric, cloudwatch.Metric):
        return metric.with_(label=label or metric.label or default_label(metric))
    return metric


def _scaled(metric_id: str, rule: AlarmRule, divisor: int, label: str) -> cloudwatch.MathExpression:
    """The alarm's own metric (statistic and period) divided by ``divisor`` GPUs or vCPUs: percent
    of capacity."""
    return cloudwatch.MathExpression(
        period=rule.metric.period,
        expression=f"{metric_id} / {divisor}",
        using_metrics={metric_id: rule.metric},
        label=label,
    )


def _graph(
    title: str,
    left: list,
    annotations: list,
    right: list | None = None,
    label: str = "",
    right_annotations: list | None = None,
    right_label: str = "",
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title,
        left=[_labelled(metric) for metric in left],
        right=[_labelled(metric) for metric in right or []],
        left_annotations=annotations,
        right_annotations=right_annotations or [],
        left_y_axis=cloudwatch.YAxisProps(min=0, label=label, show_units=False),
        right_y_axis=cloudwatch.YAxisProps(min=0, label=right_label, show_units=False)
        if right_label
        else None,
        width=WIDTH,
        height=HEIGHT,
        live_data=True,
    )


def endpoint_rows(item: DashboardEndpoint) -> list[list[cloudwatch.IWidget]]:
    """The widgets of one endpoint, as dashboard rows: a header, then the graphs three to a row."""
    m = EndpointMetrics(item.endpoint_name, item.variant_name)
    bm = (
        BridgeMetrics(item.bridge.namespace, item.endpoint_name, item.variant_name)
        if item.bridge
        else None
    )
    rules = {
        rule.name: rule
        for rule in alarm_rules(m, item.instance_types, item.thresholds, item.bridge)
    }
    gpus, vcpus = instance_types.alarm_capacity(item.instance_types)
    header = _header(item)
    graphs: list[cloudwatch.IWidget] = []
    if item.bridge is not None and bm is not None:
        graphs += _stream_graphs(item, item.bridge, bm, rules)
    else:
        graphs.append(
            _graph(
                "Invocations",
                [m.metric_invocations(), m.metric_invocations_per_instance()],
                [],
                label="requests / minute",
            )
        )
    graphs.append(_latency_graph(rules))
    graphs.append(_errors_graph(rules, bridge=bm is not None))
    graphs.append(_usage_graph(rules, gpus, vcpus))
    graphs.append(_instances_graph(item, rules))
    rows: list[list[cloudwatch.IWidget]] = [[header]]
    return rows + [graphs[i : i + 3] for i in range(0, len(graphs), 3)]


def _header(item: DashboardEndpoint) -> cloudwatch.TextWidget:
    """The endpoint's title, name, instance types and instance range."""
    described = []
    for instance_type in item.instance_types:
        spec = instance_types.lookup(instance_type)
        assert spec is not None  # alarm_rules raised otherwise
        described.append(f"{instance_type} ({spec.gpus} x {spec.gpu_model}, {spec.vcpus} vCPUs)")
    return cloudwatch.TextWidget(
        markdown=(
            f"## {item.title}: `{item.endpoint_name}`\n{', else '.join(described)}, "
            f"{item.min_capacity}-{item.max_capacity} instances. Red lines are alarm thresholds."
        ),
        width=24,
        height=2,
    )


def _stream_graphs(
    item: DashboardEndpoint,
    bridge: BridgeAlarmThresholds,
    bm: BridgeMetrics,
    rules: dict[str, AlarmRule],
) -> list[cloudwatch.IWidget]:
    """The bridge's graphs: live streams per instance (the stream cap, the near-cap alarm and the
    scaling target drawn) and the time to first delta."""
    near_cap = rules["ActiveStreamsNearCap"]
    lines = [
        cloudwatch.HorizontalAnnotation(
            value=bridge.stream_cap,
            label=f"stream cap {bridge.stream_cap}",
            color=LIMIT_COLOR,
        ),
        _alarm_line(near_cap, near_cap.threshold, "streams"),
    ]
    if item.scaling_target is not None:
        lines.append(
            cloudwatch.HorizontalAnnotation(
                value=item.scaling_target,
                label=f"scaling target {item.scaling_target:g}",
                color=TARGET_COLOR,
            )
        )
    streams = _graph(
        "Live streams per instance",
        [
            _labelled(near_cap.metric, "Live streams per instance (ActiveStreams, Average)"),
            _labelled(
                bm.metric_active_streams_busiest_instance(),
                "Busiest instance (ActiveStreams, Maximum)",
            ),
        ],
        lines,
        right=[bm.metric_streams_started(), bm.metric_streams_rejected()],
        label="streams",
    )
    first_delta = rules["TimeToFirstDeltaP90"]
    return [
        streams,
        _graph(
            "Time to first delta (ms)",
            [bm.metric_time_to_first_delta("p50"), first_delta.metric],
            [_alarm_line(first_delta, first_delta.threshold, "ms")],
            label="ms",
        ),
    ]


def _latency_graph(rules: dict[str, AlarmRule]) -> cloudwatch.GraphWidget:
    """ModelLatency and OverheadLatency p90: SageMaker reports µs; the graph shows ms, and the alarm
    lines are converted back to ms."""
    model, overhead = rules["ModelLatencyP90"], rules["OverheadLatencyP90"]
    return _graph(
        "Latency p90 (ms)",
        [
            cloudwatch.MathExpression(
                period=model.metric.period,
                expression=f"model / {MICROSECONDS_PER_MILLISECOND}",
                using_metrics={"model": model.metric},
                label="ModelLatency p90 (ms)",
            ),
            cloudwatch.MathExpression(
                period=overhead.metric.period,
                expression=f"overhead / {MICROSECONDS_PER_MILLISECOND}",
                using_metrics={"overhead": overhead.metric},
                label="OverheadLatency p90 (ms)",
            ),
        ],
        [
            _alarm_line(model, model.threshold / MICROSECONDS_PER_MILLISECOND, "ms"),
            _alarm_line(overhead, overhead.threshold / MICROSECONDS_PER_MILLISECOND, "ms"),
        ],
        label="ms",
    )


def _errors_graph(rules: dict[str, AlarmRule], bridge: bool) -> cloudwatch.GraphWidget:
    """Errors per 5 minutes, the alarms' window (the bridge's too, with ``bridge``), and the
    rollback alarm's 5XX error rate."""
    errors_5xx, errors_4xx = rules["Invocation5XXErrors"], rules["Invocation4XXErrors"]
    error_metrics = [errors_5xx.metric, errors_4xx.metric]
    error_lines = [
        _alarm_line(errors_5xx, errors_5xx.threshold, ""),
        _alarm_line(errors_4xx, errors_4xx.threshold, ""),
    ]
    if bridge:
        error_metrics += [rules["UpstreamErrors"].metric, rules["StreamsRejected"].metric]
    # The rollback alarm's 5XX error rate (a fraction per minute), drawn in percent on the right
    # axis.
    rate_metrics: list[cloudwatch.IMetric] = []
    rate_lines: list[cloudwatch.HorizontalAnnotation] = []
    rate = rules.get("Invocation5XXErrorRate")
    if rate is not None:
        rate_metrics.append(
            cloudwatch.MathExpression(
                period=rate.metric.period,
                expression="rate * 100",
                using_metrics={"rate": rate.metric},
                label="5XX error rate (% of requests per minute)",
            )
        )
        rate_lines.append(_alarm_line(rate, rate.threshold * 100, "% (rolls updates back)"))
    return _graph(
        "Errors (per 5 minutes)",
        error_metrics,
        error_lines,
        right=rate_metrics,
        label="count",
        right_annotations=rate_lines,
        right_label="% of requests" if rate_metrics else "",
    )


def _usage_graph(rules: dict[str, AlarmRule], gpus: int, vcpus: int) -> cloudwatch.GraphWidget:
    """Utilisation in percent of capacity: GPU metrics / GPUs, CPU / vCPUs; alarm lines are the
    settings' percents."""
    # Each line is the alarm's own metric (statistic and period: Maximum for GPU memory, memory and
    # disk), so the graph shows what the alarm evaluates.
    usage: list[cloudwatch.IMetric] = []
    usage_lines: list[cloudwatch.HorizontalAnnotation] = []
    if gpus:
        for name, metric_id in (("GPUUtilization", "gpu"), ("GPUMemoryUtilization", "gpumem")):
            rule = rules[name]
            usage.append(
                _scaled(metric_id, rule, gpus, f"{name} ({_statistic(rule)}, % of {gpus} GPU)")
            )
            usage_lines.append(_alarm_line(rule, rule.threshold / gpus, "%"))
    cpu = rules["CPUUtilization"]
    usage.append(
        _scaled("cpu", cpu, vcpus, f"CPUUtilization ({_statistic(cpu)}, % of {vcpus} vCPUs)")
    )
    usage += [rules["MemoryUtilization"].metric, rules["DiskUtilization"].metric]
    usage_lines += [
        _alarm_line(rules["CPUUtilization"], rules["CPUUtilization"].threshold / vcpus, "%"),
        _alarm_line(rules["MemoryUtilization"], rules["MemoryUtilization"].threshold, "%"),
        _alarm_line(rules["DiskUtilization"], rules["DiskUtilization"].threshold, "%"),
    ]
    return _graph("GPU and memory use (% of capacity)", usage, usage_lines, label="%")


def _instances_graph(
    item: DashboardEndpoint, rules: dict[str, AlarmRule]
) -> cloudwatch.GraphWidget:
    """Instances reporting, with the range and the health alarm's line."""
    health = rules["EndpointHealth"]
    return _graph(
        "Instances",
        [_labelled(health.metric, "Instances (CPUUtilization samples per minute)")],
        [
            cloudwatch.HorizontalAnnotation(
                value=item.max_capacity, label=f"max {item.max_capacity}", color=LIMIT_COLOR
            ),
            cloudwatch.HorizontalAnnotation(
                value=item.min_capacity, label=f"min {item.min_capacity}", color=LIMIT_COLOR
            ),
            _alarm_line(health, health.threshold, "(below: no instance)"),
        ],
        label="instances",
    )


def _statistic(rule: AlarmRule) -> str:
    """The statistic of a rule on one metric (the usage graph's GPU and CPU rules)."""
    assert isinstance(rule.metric, cloudwatch.Metric), rule.name
    return rule.metric.statistic
