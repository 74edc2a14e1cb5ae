"""The rule book's CloudWatch rules (tools/cfn_rules/aws_cloudwatch.py: alarms): each rule fails on
a template written to break it and holds on the same template mended (test_aws_rules.py holds the
book as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import findings, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import aws_cloudwatch


def alarm(**props) -> dict:
    base = {
        "ComparisonOperator": "GreaterThanThreshold",
        "Threshold": 1,
        "EvaluationPeriods": 3,
        "MetricName": "ModelLatency",
        "Namespace": "AWS/SageMaker",
        "Statistic": "Average",
        "Period": 60,
    }
    return template(Alarm=("AWS::CloudWatch::Alarm", {**base, **props}))


def math_alarm(returned=1, **extra) -> dict:
    metrics = [
        {
            "Id": f"m{i}",
            "ReturnData": i < returned,
            "MetricStat": {
                "Metric": {"MetricName": "x", "Namespace": "n"},
                "Period": 60,
                "Stat": "Sum",
            },
        }
        for i in range(2)
    ]
    return template(
        Alarm=(
            "AWS::CloudWatch::Alarm",
            {
                "ComparisonOperator": "GreaterThanThreshold",
                "Threshold": 1,
                "EvaluationPeriods": 1,
                "Metrics": metrics,
                **extra,
            },
        )
    )


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (aws_cloudwatch.AlarmEvaluationWindow, alarm(Period=90), "not 10, 20, 30", alarm(Period=120)),
    (
        aws_cloudwatch.AlarmEvaluationWindow,
        alarm(Period=300, EvaluationPeriods=300),
        "exceeds 86400",
        alarm(Period=300, EvaluationPeriods=288),
    ),
    (
        aws_cloudwatch.AlarmEvaluationWindow,
        alarm(Period=3600, EvaluationPeriods=169),
        "exceeds 604800",
        alarm(Period=3600, EvaluationPeriods=168),
    ),
    (
        aws_cloudwatch.AlarmEvaluationWindow,
        alarm(DatapointsToAlarm=4),
        "exceeds EvaluationPeriods",
        alarm(DatapointsToAlarm=3),
    ),
    (
        aws_cloudwatch.AlarmEvaluationWindow,
        math_alarm(returned=2),
        "exactly one must",
        math_alarm(),
    ),
    (
        aws_cloudwatch.AlarmEvaluationWindow,
        math_alarm(Namespace="n"),
        "cannot be combined",
        math_alarm(),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []
