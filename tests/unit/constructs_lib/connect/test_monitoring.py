"""constructs_lib/connect/monitoring.py: the Connect alarms' rules (on the metrics they are given
and the consumers' own), their names, and the row of the shared dashboard, with no construct of
the Connect stack; transcription.py still exports every name that moved here."""

from __future__ import annotations

from aws_cdk import Duration, aws_cloudwatch as cloudwatch

from constructs_lib.connect import monitoring, transcription
from constructs_lib.connect.monitoring import (
    bus_dead_letters_rule,
    connect_alarm_rules,
    dashboard_rows,
)
from constructs_lib.connect.props import (
    ALARM_RULE_NAMES,
    BUS_DEAD_LETTERS_RULE,
    CALLS_WAITING_ALARM_MINUTES,
    METRIC_NAMESPACE,
)
from tests.unit.constructs_lib.construct_kit import bare_stack


def queue_metric(name: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/SQS",
        metric_name="ApproximateNumberOfMessagesVisible",
        dimensions_map={"QueueName": name},
        statistic="Maximum",
        period=Duration.minutes(1),
    )


def test_the_rules_watch_the_dead_letters_given_and_the_consumers_metrics():
    dropped = queue_metric("calls-dlq")
    rules = {rule.name: rule for rule in connect_alarm_rules(dropped, "prod", 7000)}
    assert tuple(rules) == ALARM_RULE_NAMES
    assert rules["calls-dropped"].metric is dropped
    behind = rules["behind-real-time"]
    assert isinstance(behind.metric, cloudwatch.Metric)
    assert (behind.metric.namespace, behind.metric.metric_name, behind.metric.dimensions) == (
        METRIC_NAMESPACE,
        "MillisBehindNow",
        {"Deployment": "prod"},
    )
    assert (behind.threshold, behind.evaluation_periods, behind.datapoints_to_alarm) == (7000, 5, 3)
    waiting = rules["calls-waiting"]
    assert (waiting.evaluation_periods, waiting.datapoints_to_alarm) == (
        CALLS_WAITING_ALARM_MINUTES,
        CALLS_WAITING_ALARM_MINUTES,
    )


def test_the_bus_dead_letters_rule_fires_on_any_undelivered_event():
    undelivered = queue_metric("bus-dlq")
    rule = bus_dead_letters_rule(undelivered)
    assert (rule.name, rule.metric, rule.threshold) == (BUS_DEAD_LETTERS_RULE, undelivered, 0)
    assert rule.comparison == cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
    assert "EventBridge could not encrypt or decrypt them" in rule.description


def test_the_dashboard_row_shows_each_alarm_by_its_name_and_the_bus_alarm_with_a_key():
    def alarm_arns(bus_dead_letters: bool) -> list[str]:
        stack = bare_stack()
        _, graphs = dashboard_rows(stack, "prod", 7000, 50, bus_dead_letters)
        status = stack.resolve(graphs[-1].to_json())[0]["properties"]
        return [arn["Fn::Join"][1][-1].rpartition(":alarm:")[2] for arn in status["alarms"]]

    names = [f"prod-connect-{rule}" for rule in ALARM_RULE_NAMES]
    assert alarm_arns(False) == names
    assert alarm_arns(True) == [*names, f"prod-connect-{BUS_DEAD_LETTERS_RULE}"]


def test_the_transcription_module_still_exports_the_names_that_moved_here():
    for name in ("metric_dimensions", "alarm_name", "dashboard_rows"):
        assert getattr(transcription, name) is getattr(monitoring, name), name
