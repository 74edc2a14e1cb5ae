"""The Connect consumers' metrics, alarm rules and their row of the shared operations dashboard:
:func:`metric_dimensions`, :func:`connect_alarm_rules` and :func:`bus_dead_letters_rule` (the rules
:class:`~constructs_lib.connect.transcription.ConnectTranscription` makes its alarms from),
:func:`alarm_name` and :func:`dashboard_rows`. They take names and metrics, never the construct:
the Operations stack, which deploys first, draws the row from literals.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack, aws_cloudwatch as cloudwatch
from constructs import Construct

from constructs_lib.connect.props import (
    ALARM_RULE_NAMES,
    BUS_DEAD_LETTERS_RULE,
    CALLS_WAITING_ALARM_MINUTES,
    MAX_RECEIVES,
    METRIC_DIMENSION,
    METRIC_NAMESPACE,
)
from constructs_lib.monitoring.alarms import AlarmRule
from constructs_lib.monitoring.dashboard import ALARM_COLOR


def metric_dimensions(name_prefix: str) -> dict[str, str]:
    """The dimensions of the consumers' metrics in a deployment named ``name_prefix``: what the task
    definition gives them (METRIC_DIMENSIONS) and what its scaling, alarms and dashboards read."""
    return {METRIC_DIMENSION: name_prefix}


def alarm_name(name_prefix: str, rule: str) -> str:
    """The AlarmName of one of the Connect alarms (fixed, so that the shared dashboard can show them
    by ARN)."""
    return f"{name_prefix}-connect-{rule}"


def connect_alarm_rules(
    dropped: cloudwatch.Metric, name_prefix: str, alarm_millis_behind: int
) -> list[AlarmRule]:
    """The Connect alarms' rules, in the order of :data:`ALARM_RULE_NAMES`: calls dropped
    (``dropped``: the calls dead-letter queue's visible messages), failed, behind real time
    (``alarm_millis_behind``), waiting and untranscribed (the consumers' metrics in the deployment
    ``name_prefix``)."""
    emf = {
        "namespace": METRIC_NAMESPACE,
        "period": Duration.minutes(1),
        "dimensions_map": metric_dimensions(name_prefix),
    }
    rules = [
        AlarmRule(
            "calls-dropped",
            dropped,
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            0,
            1,
            1,
            cloudwatch.TreatMissingData.NOT_BREACHING,
            "Calls were dropped: their messages reached the dead-letter queue after "
            f"{MAX_RECEIVES} tries (the consumers could not run them).",
            "SQS reports every minute; no datapoint means the queue reported nothing to count",
        ),
        AlarmRule(
            "calls-failed",
            cloudwatch.Metric(metric_name="CallsFailed", statistic="Sum", **emf),
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            0,
            1,
            1,
            cloudwatch.TreatMissingData.NOT_BREACHING,
            "Calls failed (a bad fragment, an endpoint error): see Call Failed events and "
            "the consumer logs.",
            "the consumers report a failure only when one happens",
        ),
        AlarmRule(
            "behind-real-time",
            cloudwatch.Metric(metric_name="MillisBehindNow", statistic="Maximum", **emf),
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            alarm_millis_behind,
            5,
            3,
            cloudwatch.TreatMissingData.NOT_BREACHING,
            "The consumers read fragments far behind the live call (the endpoint is slow or "
            "full, or the consumers are at capacity).",
            "no datapoint means no live call is being read",
        ),
        AlarmRule(
            "calls-waiting",
            cloudwatch.Metric(metric_name="CallsWaiting", statistic="Maximum", **emf),
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            0,
            CALLS_WAITING_ALARM_MINUTES,
            CALLS_WAITING_ALARM_MINUTES,
            cloudwatch.TreatMissingData.NOT_BREACHING,
            f"Calls have waited {CALLS_WAITING_ALARM_MINUTES} minutes for the endpoint "
            "(server_busy: every stream in use): raise its capacity; see Call Waiting "
            "events.",
            "the consumers report the waiting calls every minute while they run",
        ),
        AlarmRule(
            "calls-untranscribed",
            cloudwatch.Metric(metric_name="CallsUntranscribed", statistic="Sum", **emf),
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            0,
            1,
            1,
            cloudwatch.TreatMissingData.NOT_BREACHING,
            "Calls ended while they waited for the endpoint and were not transcribed: see "
            "Call Ended events with transcribed false (each track's untranscribed seconds).",
            "the consumers report one only when it happens",
        ),
    ]
    assert tuple(rule.name for rule in rules) == ALARM_RULE_NAMES
    return rules


def bus_dead_letters_rule(undelivered: cloudwatch.Metric) -> AlarmRule:
    """Events the bus could not encrypt or decrypt wait in its dead-letter queue (``undelivered``:
    its visible messages): transcripts no target got."""
    return AlarmRule(
        BUS_DEAD_LETTERS_RULE,
        undelivered,
        cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        0,
        1,
        1,
        cloudwatch.TreatMissingData.NOT_BREACHING,
        "Transcript events reached the bus's dead-letter queue: EventBridge could not "
        "encrypt or decrypt them with the data key (disabled, scheduled for deletion, or "
        "its policy no longer lets EventBridge use it).",
        "SQS reports every minute; no datapoint means the queue reported nothing to count",
    )


def dashboard_rows(
    scope: Construct,
    name_prefix: str,
    alarm_millis_behind: int,
    calls_per_task: int,
    bus_dead_letters: bool = False,
) -> list[list[cloudwatch.IWidget]]:
    """The Connect row of the shared operations dashboard: the consumers' own metrics (namespace
    :data:`METRIC_NAMESPACE`, the deployment's :func:`metric_dimensions`, a literal: nothing of the
    Connect stack is referenced and the Operations stack deploys first) and the state of the Connect
    alarms, by name. The Connect stack's own dashboard adds the calls queue's figures, which need
    the queue's name. ``bus_dead_letters``: the bus is under a customer managed key, so it has a
    dead-letter queue and its alarm."""
    stack = Stack.of(scope)
    emf = {
        "namespace": METRIC_NAMESPACE,
        "period": Duration.minutes(1),
        "dimensions_map": metric_dimensions(name_prefix),
    }
    header = cloudwatch.TextWidget(
        markdown=(
            f"## Amazon Connect live transcription\nConsumers on Fargate, up to {calls_per_task} "
            "calls per task. Red lines are alarm thresholds."
        ),
        width=24,
        height=2,
    )
    calls = cloudwatch.GraphWidget(
        title="Live calls per task",
        width=6,
        left=[
            cloudwatch.Metric(
                metric_name="ActiveCalls", statistic="Average", label="average", **emf
            ),
            cloudwatch.Metric(
                metric_name="ActiveCalls", statistic="Maximum", label="busiest task", **emf
            ),
        ],
        left_annotations=[
            cloudwatch.HorizontalAnnotation(value=calls_per_task, label="calls per task")
        ],
    )
    behind = cloudwatch.GraphWidget(
        title="Behind the live call (ms)",
        width=6,
        left=[
            cloudwatch.Metric(
                metric_name="MillisBehindNow", statistic="Maximum", label="MillisBehindNow", **emf
            )
        ],
        left_annotations=[
            cloudwatch.HorizontalAnnotation(
                value=alarm_millis_behind,
                label=f"alarm behind-real-time: {alarm_millis_behind} ms",
                color=ALARM_COLOR,
            )
        ],
    )
    failed = cloudwatch.GraphWidget(
        title="Calls failed, waiting, untranscribed",
        width=6,
        left=[
            cloudwatch.Metric(
                metric_name="CallsFailed", statistic="Sum", label="CallsFailed", **emf
            ),
            cloudwatch.Metric(
                metric_name="CallsWaiting", statistic="Maximum", label="CallsWaiting", **emf
            ),
            cloudwatch.Metric(
                metric_name="CallsUntranscribed", statistic="Sum", label="CallsUntranscribed", **emf
            ),
        ],
    )
    status = cloudwatch.AlarmStatusWidget(
        title="Connect alarms",
        width=6,
        alarms=[
            cloudwatch.Alarm.from_alarm_arn(
                scope,
                f"ConnectAlarm{i}",
                stack.format_arn(
                    service="cloudwatch",
                    resource="alarm",
                    resource_name=alarm_name(name_prefix, rule),
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                ),
            )
            for i, rule in enumerate(
                ALARM_RULE_NAMES + ((BUS_DEAD_LETTERS_RULE,) if bus_dead_letters else ())
            )
        ],
    )
    return [[header], [calls, behind, failed, status]]
