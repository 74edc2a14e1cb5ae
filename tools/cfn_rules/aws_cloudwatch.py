"""The rule book's CloudWatch rules (E92xx): alarms as PutMetricAlarm states them
(:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

CW_API = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference"


class AlarmEvaluationWindow(TemplateRule, CloudFormationLintRule):
    id = "E9201"
    shortdesc = (
        "PutMetricAlarm: Period is 10, 20, 30 or a multiple of 60; Period x EvaluationPeriods is "
        "at most 604,800 s, and at most 86,400 s when Period is under an hour; DatapointsToAlarm "
        "<= EvaluationPeriods; a Metrics array has exactly one ReturnData expression and no "
        "MetricName, Namespace, Dimensions, Period, Unit, Statistic or ExtendedStatistic beside "
        "it"
    )
    description = "PutMetricAlarm, Period, DatapointsToAlarm ('M out of N') and Metrics."
    source_url = f"{CW_API}/API_PutMetricAlarm.html"
    tags: ClassVar[list[str]] = ["cloudwatch"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::CloudWatch::Alarm").items():
            where = ("Resources", lid, "Properties")
            periods = [t.literal_int(props.get("Period"))]
            metrics = [m for m in t.as_list(props.get("Metrics")) if isinstance(m, dict)]
            periods += [t.literal_int((m.get("MetricStat") or {}).get("Period")) for m in metrics]
            evaluations = t.literal_int(props.get("EvaluationPeriods"))
            for period in {p for p in periods if p is not None}:
                if period not in (10, 20, 30) and period % 60:
                    yield (
                        (*where, "Period"),
                        f"Period {period} is not 10, 20, 30 or a multiple of 60",
                    )
                if evaluations is not None:
                    limit = 86_400 if period < 3600 else 604_800
                    if period * evaluations > limit:
                        yield (
                            (*where, "EvaluationPeriods"),
                            (
                                f"{evaluations} x {period} s = {period * evaluations} s exceeds "
                                f"{limit} s"
                            ),
                        )
            datapoints = t.literal_int(props.get("DatapointsToAlarm"))
            if datapoints is not None and evaluations is not None and datapoints > evaluations:
                yield (
                    (*where, "DatapointsToAlarm"),
                    f"{datapoints} exceeds EvaluationPeriods {evaluations}",
                )
            if metrics:
                returned = [
                    m for m in metrics if t.literal_bool(m.get("ReturnData", True)) is not False
                ]
                if len(returned) != 1:
                    yield (
                        (*where, "Metrics"),
                        f"{len(returned)} entries return data; exactly one must",
                    )
                clash = sorted(
                    {
                        "MetricName",
                        "Namespace",
                        "Dimensions",
                        "Period",
                        "Unit",
                        "Statistic",
                        "ExtendedStatistic",
                    }
                    & set(props)
                )
                if clash:
                    yield (*where, "Metrics"), f"Metrics cannot be combined with {clash}"


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
