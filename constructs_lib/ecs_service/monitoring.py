"""Monitoring of the GPU ECS service: its metrics (GPU use from the CloudWatch agent, the load
balancer's and target group's, Container Insights' running tasks), its alarm rules and its
dashboard rows; and what the bridge add-on adds to them. The bridge's own metrics and alarm rules
are shared with SageMaker (:mod:`constructs_lib.monitoring`).

Read in this order: the constants, :class:`GpuEcsServiceMetrics`, :func:`service_alarm_rules`,
:func:`bridge_alarm_rules_on_ecs`, :func:`service_dashboard_rows`, :func:`bridge_dashboard_rows`.
Plain functions of props and metrics: no construct of the service is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import (
    Duration,
    aws_autoscaling as autoscaling,
    aws_cloudwatch as cloudwatch,
    aws_ecs as ecs,
    aws_elasticloadbalancingv2 as elbv2,
)

from constructs_lib.ecs_service.props import GpuEcsServiceProps
from constructs_lib.monitoring.alarms import (
    BREACHING,
    ERROR_WINDOW,
    GT,
    LT,
    MISSING_BRIDGE,
    MISSING_ERRORS,
    NOT_BREACHING,
    UTILISATION_WINDOW,
    AlarmRule,
    bridge_alarm_rules,
)
from constructs_lib.monitoring.dashboard import ALARM_COLOR
from constructs_lib.monitoring.metrics import BridgeMetrics, default_label
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds

#: GPU metrics: the CloudWatch agent on each instance, with its ``nvidia_gpu`` input (CloudWatch
#: agent user guide, "Collect NVIDIA GPU metrics"), aggregated per Auto Scaling group. Container
#: Insights for ECS reports GPUs reserved, not used, so it cannot say how busy a GPU is. Metric
#: names are the agent's (``nvidia_smi_<field>``).
GPU_UTILIZATION_METRIC = "nvidia_smi_utilization_gpu"
GPU_MEMORY_USED_METRIC = "nvidia_smi_memory_used"
GPU_MEMORY_TOTAL_METRIC = "nvidia_smi_memory_total"

#: An unhealthy target for this many minutes pages (a task restarting once is not an outage).
UNHEALTHY_MINUTES = 5

MISSING_ALB = (
    "the load balancer reports its metrics only when there is traffic or a target, so "
    "no datapoint means nothing happened"
)
MISSING_GPU = (
    "no datapoint means no instance reported, which the unhealthy-targets and "
    "running-tasks alarms report; this alarm judges only levels"
)
MISSING_TASKS = (
    "ECS reports running tasks every minute while the service exists; no datapoint "
    "means no task runs"
)


@dataclass(frozen=True)
class GpuEcsServiceMetrics:
    """Metric factories of one service (as :class:`~constructs_lib.monitoring.metrics.BridgeMetrics`
    is of the bridge): GPU metrics by Auto Scaling group, running tasks by cluster and service,
    response time by target group.
    """

    gpu_namespace: str
    auto_scaling_group: autoscaling.IAutoScalingGroup
    cluster: ecs.ICluster
    service: ecs.Ec2Service
    load_balancer: elbv2.ApplicationLoadBalancer
    target_group: elbv2.ApplicationTargetGroup

    def _gpu_metric(self, name: str, statistic: str) -> cloudwatch.Metric:
        group = self.auto_scaling_group.auto_scaling_group_name
        return cloudwatch.Metric(
            namespace=self.gpu_namespace,
            metric_name=name,
            statistic=statistic,
            period=UTILISATION_WINDOW,
            dimensions_map={"AutoScalingGroupName": group},
        )

    def metric_gpu_utilization(self) -> cloudwatch.Metric:
        """Busy time of the instances' GPUs, 0-100 per GPU, averaged over GPUs (CloudWatch agent);
        Percent."""
        return self._gpu_metric(GPU_UTILIZATION_METRIC, "Average")

    def metric_gpu_memory_used(self) -> cloudwatch.Metric:
        """GPU memory in use on the fullest GPU (CloudWatch agent); MiB (nvidia-smi's unit)."""
        return self._gpu_metric(GPU_MEMORY_USED_METRIC, "Maximum")

    def metric_gpu_memory_used_percent(self) -> cloudwatch.MathExpression:
        """GPU memory in use on the fullest GPU as a share of the memory nvidia-smi reports as
        total; 0-100, Percent.

        A share of the reported total, not of the catalogue's GiB: nvidia-smi's total is below the
        marketing figure (an L4 sold as 24 GB reports about 23 GiB), so a threshold in MiB from the
        catalogue could never be reached.
        """
        return cloudwatch.MathExpression(
            expression="100 * used / total",
            label="GPU memory used (% of total, fullest GPU)",
            using_metrics={
                "used": self.metric_gpu_memory_used(),
                "total": self._gpu_metric(GPU_MEMORY_TOTAL_METRIC, "Maximum"),
            },
            period=UTILISATION_WINDOW,
        )

    def metric_running_tasks(self) -> cloudwatch.Metric:
        """Tasks running in the service (Container Insights, ``ECS/ContainerInsights``
        RunningTaskCount); Count."""
        return cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name="RunningTaskCount",
            statistic="Minimum",
            period=Duration.minutes(1),
            dimensions_map={
                "ClusterName": self.cluster.cluster_name,
                "ServiceName": self.service.service_name,
            },
        )

    def metric_response_time_p90(self) -> cloudwatch.Metric:
        """p90 of the targets' response time (``AWS/ApplicationELB`` TargetResponseTime);
        Seconds."""
        return self.target_group.metrics.target_response_time(period=ERROR_WINDOW, statistic="p90")


# --- Alarm rules ---------------------------------------------------------------------------------


def service_alarm_rules(
    props: GpuEcsServiceProps, metrics: GpuEcsServiceMetrics, serves: str = "container"
) -> list[AlarmRule]:
    """The service's alarms: load balancer and target health, running tasks, GPU use (CloudWatch
    agent), and the p90 response time when ``props.response_time_p90_ms`` is set. ``serves``
    names what answers behind the load balancer (``container``, or ``bridge``)."""
    tg, alb = metrics.target_group.metrics, metrics.load_balancer.metrics
    cap = props.capacity
    rules = [
        AlarmRule(
            "UnhealthyTargets",
            tg.unhealthy_host_count(period=Duration.minutes(1), statistic="Maximum"),
            GT,
            0,
            UNHEALTHY_MINUTES,
            UNHEALTHY_MINUTES,
            NOT_BREACHING,
            f"A task has failed the load balancer's {props.health_path} check for "
            f"{UNHEALTHY_MINUTES} minutes.",
            MISSING_ALB,
        ),
        AlarmRule(
            "LoadBalancer5XX",
            alb.http_code_elb(
                elbv2.HttpCodeElb.ELB_5XX_COUNT, period=ERROR_WINDOW, statistic="Sum"
            ),
            GT,
            0,
            1,
            1,
            NOT_BREACHING,
            "The load balancer answered 5xx (no healthy task, or a task reset the connection).",
            MISSING_ERRORS,
        ),
        AlarmRule(
            "Target5XX",
            tg.http_code_target(
                elbv2.HttpCodeTarget.TARGET_5XX_COUNT, period=ERROR_WINDOW, statistic="Sum"
            ),
            GT,
            0,
            1,
            1,
            NOT_BREACHING,
            f"The {serves} answered 5xx (not ready, or draining).",
            MISSING_ERRORS,
        ),
        AlarmRule(
            "RunningTasks",
            metrics.metric_running_tasks(),
            LT,
            cap.min_tasks,
            10,
            10,
            BREACHING,
            f"Fewer than {cap.min_tasks} tasks have run for 10 minutes (no GPU capacity, "
            "Spot interruptions, or tasks failing to start).",
            MISSING_TASKS,
        ),
        AlarmRule(
            "GPUUtilization",
            metrics.metric_gpu_utilization(),
            GT,
            90,
            3,
            3,
            NOT_BREACHING,
            "GPUs above 90 % busy for 15 minutes: the service is saturated.",
            MISSING_GPU,
        ),
        AlarmRule(
            "GPUMemoryUsed",
            metrics.metric_gpu_memory_used_percent(),
            GT,
            97,
            2,
            2,
            NOT_BREACHING,
            "GPU memory above 97 % of a GPU's total for 10 minutes (vLLM reserves its share "
            "at start; more means something else uses the GPU).",
            MISSING_GPU,
        ),
    ]
    if props.response_time_p90_ms is not None:
        # TargetResponseTime is in seconds (Elastic Load Balancing user guide, "CloudWatch metrics
        # for your Application Load Balancer"): from the request leaving the load balancer to the
        # response headers.
        rules.append(
            AlarmRule(
                "ResponseTimeP90",
                metrics.metric_response_time_p90(),
                GT,
                props.response_time_p90_ms / 1000,
                3,
                3,
                NOT_BREACHING,
                f"The targets' p90 response time has been above {props.response_time_p90_ms:g} ms "
                "for 15 minutes.",
                MISSING_ALB,
            )
        )
    return rules


def bridge_alarm_rules_on_ecs(
    bridge_metrics: BridgeMetrics, thresholds: BridgeAlarmThresholds
) -> list[AlarmRule]:
    """What the bridge adds on ECS: its own alarms
    (:func:`~constructs_lib.monitoring.alarms.bridge_alarm_rules`, the same rules as on SageMaker),
    then its task scale-in protection's errors."""
    protection = AlarmRule(
        "TaskProtectionErrors",
        bridge_metrics.metric_task_protection_errors(ERROR_WINDOW),
        GT,
        0,
        1,
        1,
        NOT_BREACHING,
        "The bridge could not set its task scale-in protection through the ECS agent: a scale-in "
        "or a deployment may stop a task with live streams.",
        MISSING_BRIDGE,
    )
    return [*bridge_alarm_rules(bridge_metrics, thresholds), protection]


# --- Dashboard rows ------------------------------------------------------------------------------


def _graph(
    rules: list[AlarmRule],
    title: str,
    series: list[cloudwatch.IMetric],
    *rule_names: str,
    label: str = "",
) -> cloudwatch.GraphWidget:
    """A graph of ``series`` with a red line at the threshold of each rule of ``rule_names``."""
    by_name = {rule.name: rule for rule in rules}
    lines = [
        cloudwatch.HorizontalAnnotation(
            value=by_name[name].threshold, label=f"alarm {name}", color=ALARM_COLOR
        )
        for name in rule_names
    ]
    return cloudwatch.GraphWidget(
        title=title,
        width=8,
        height=6,
        live_data=True,
        left_annotations=lines,
        left=[
            m.with_(label=default_label(m)) if isinstance(m, cloudwatch.Metric) else m
            for m in series
        ],
        left_y_axis=cloudwatch.YAxisProps(min=0, label=label, show_units=False),
    )


def _header(title: str, props: GpuEcsServiceProps) -> cloudwatch.TextWidget:
    cap = props.capacity
    return cloudwatch.TextWidget(
        markdown=(
            f"## {title}: ECS service `{props.service_name}`\n{cap.instance_type}, "
            f"{'Spot' if cap.spot else 'On-Demand'}, {cap.min_tasks}-{cap.max_tasks} tasks "
            "(one GPU each). GPU metrics: CloudWatch agent (nvidia_gpu). Red lines are alarm "
            "thresholds."
        ),
        width=24,
        height=2,
    )


def _errors(
    rules: list[AlarmRule], title: str, more: list[cloudwatch.IMetric]
) -> cloudwatch.GraphWidget:
    """The load balancer's and the targets' 5xx and unhealthy targets, then ``more``."""
    by_name = {rule.name: rule for rule in rules}
    return _graph(
        rules,
        title,
        [
            by_name["LoadBalancer5XX"].metric,
            by_name["Target5XX"].metric,
            by_name["UnhealthyTargets"].metric,
            *more,
        ],
        "LoadBalancer5XX",
        label="count",
    )


def _capacity_row(
    rules: list[AlarmRule], metrics: GpuEcsServiceMetrics
) -> list[cloudwatch.IWidget]:
    """GPU use, GPU memory and running tasks."""
    return [
        _graph(
            rules, "GPU use", [metrics.metric_gpu_utilization()], "GPUUtilization", label="percent"
        ),
        _graph(
            rules,
            "GPU memory used",
            [metrics.metric_gpu_memory_used_percent()],
            "GPUMemoryUsed",
            label="percent",
        ),
        _graph(
            rules, "Running tasks", [metrics.metric_running_tasks()], "RunningTasks", label="tasks"
        ),
    ]


def service_dashboard_rows(
    title: str, props: GpuEcsServiceProps, metrics: GpuEcsServiceMetrics, rules: list[AlarmRule]
) -> list[list[cloudwatch.IWidget]]:
    """Dashboard rows of the service: a header, then requests, errors and health, response time,
    then GPU use and tasks; red lines at the thresholds of ``rules``."""
    requests = _graph(
        rules,
        "Requests per task",
        [
            metrics.target_group.metrics.request_count_per_target(
                period=Duration.minutes(1), statistic="Sum"
            )
        ],
        label="per minute",
    )
    latency_rules = ["ResponseTimeP90"] if any(r.name == "ResponseTimeP90" for r in rules) else []
    latency = _graph(
        rules,
        "Response time p90",
        [metrics.metric_response_time_p90()],
        *latency_rules,
        label="seconds",
    )
    errors = _errors(rules, "Load balancer and model errors", [])
    return [[_header(title, props)], [requests, errors, latency], _capacity_row(rules, metrics)]


def bridge_dashboard_rows(
    title: str,
    props: GpuEcsServiceProps,
    metrics: GpuEcsServiceMetrics,
    bridge_metrics: BridgeMetrics,
    rules: list[AlarmRule],
) -> list[list[cloudwatch.IWidget]]:
    """Dashboard rows of the service with the bridge: a header, then live streams, errors (the
    bridge's refused callers and task protection errors too) and time to first delta, then GPU use
    and tasks."""
    by_name = {rule.name: rule for rule in rules}
    streams = _graph(
        rules,
        "Live streams per task",
        [
            bridge_metrics.metric_active_streams_per_instance(),
            bridge_metrics.metric_active_streams_busiest_instance(),
        ],
        "ActiveStreamsNearCap",
        label="streams",
    )
    errors = _errors(
        rules,
        "Load balancer and bridge errors",
        [bridge_metrics.metric_unauthorized(ERROR_WINDOW), by_name["TaskProtectionErrors"].metric],
    )
    first = _graph(
        rules,
        "Time to first delta",
        [bridge_metrics.metric_time_to_first_delta("p90")],
        "TimeToFirstDeltaP90",
        label="ms",
    )
    return [[_header(title, props)], [streams, errors, first], _capacity_row(rules, metrics)]
