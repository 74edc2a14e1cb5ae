"""constructs_lib/agent/monitoring.py: the voice agent's alarm rules, alarm names and its row of the
shared dashboard, from the deployment's name alone (no construct of the service); service.py still
exports every name that moved here."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch

from constructs_lib.agent import monitoring, service
from constructs_lib.agent.monitoring import (
    ALARM_RULE_NAMES,
    agent_alarm_rules,
    alarm_name,
    dashboard_rows,
    metric_dimensions,
)
from tests.unit.constructs_lib.construct_kit import bare_stack


def test_alarm_rules_name_their_metrics_and_thresholds():
    rules = {rule.name: rule for rule in agent_alarm_rules("Prefix", 1200.0)}
    assert tuple(rules) == ALARM_RULE_NAMES
    assert (
        rules["voice-to-voice-p95"].threshold,
        rules["voice-to-voice-p95"].evaluation_periods,
    ) == (1200.0, 5)
    assert (
        rules["llm-errors"].metric.metric_name == "LlmErrors" and rules["llm-errors"].threshold == 0
    )


def test_the_rules_read_the_deployments_metrics_and_the_alarms_carry_its_name():
    (failed, *_) = agent_alarm_rules("Prod", 1500.0)
    assert isinstance(failed.metric, cloudwatch.Metric)
    assert (failed.metric.namespace, failed.metric.dimensions) == (
        "VoiceAgent",
        {"Deployment": "Prod"},
    )
    assert metric_dimensions("Prod") == {"Deployment": "Prod"}
    assert alarm_name("Prod", "llm-errors") == "Prod-agent-llm-errors"


def test_the_dashboard_row_shows_each_alarm_by_its_name():
    stack = bare_stack()
    header, graphs = dashboard_rows(stack, "Prod", 10, 1500.0)
    status = stack.resolve(graphs[-1].to_json())[0]["properties"]
    assert status["title"] == "Voice agent alarms"
    assert [arn["Fn::Join"][1][-1] for arn in status["alarms"]] == [
        f":cloudwatch:us-east-1:123456789012:alarm:Prod-agent-{rule}" for rule in ALARM_RULE_NAMES
    ]
    assert (
        "up to 10 sessions per task"
        in stack.resolve(header[0].to_json())[0]["properties"]["markdown"]
    )


def test_the_service_module_still_exports_the_names_that_moved_here():
    for name in (
        "ALARM_RULE_NAMES",
        "STAGE_SERVICES",
        "LATENCY_MINUTES",
        "LATENCY_BREACHING",
        "agent_metric",
        "alarm_name",
        "agent_alarm_rules",
        "dashboard_rows",
        "metric_dimensions",
    ):
        assert getattr(service, name) is getattr(monitoring, name), name
