"""Every alarm of both endpoints, as synthesized, with the alarm topic the Operations stack exports
and the order the stacks deploy in (the rest of the cross-stack assertions: test_cross_stack.py)."""

from __future__ import annotations

import json

import pytest

from tests.app.kit import alarms_by_name, resources

# --- Alarms -------------------------------------------------------------------------------------
# Every alarm of both endpoints, as synthesized: namespace, metric, dimensions, statistic, period,
# comparison, threshold after unit conversion, periods, missing-data treatment, actions; plus the
# conversions themselves (the rules on their own:
# tests/unit/constructs_lib/monitoring/test_alarms.py).


SM, INSTANCE, BRIDGE = "AWS/SageMaker", "/aws/sagemaker/Endpoints", "RealtimeVoice/Bridge"


GT, GTE, LT = "GreaterThanThreshold", "GreaterThanOrEqualToThreshold", "LessThanThreshold"


# (namespace, metric, statistic, period s, comparison, threshold, evaluation periods, datapoints,
# missing data) Defaults of cdk.json. Voxtral on ml.g6.xlarge: 1 GPU, 4 vCPUs. Sonic on
# ml.g6e.2xlarge: 1 GPU, 8 vCPUs.
VOXTRAL = {
    "Invocation5XXErrors": (SM, "Invocation5XXErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    # The rollback alarm: Average = fraction of requests answered 5xx; 5 % as 0.05, 3 of 5
    # one-minute periods.
    "Invocation5XXErrorRate": (
        SM,
        "Invocation5XXErrors",
        "Average",
        60,
        GT,
        0.05,
        5,
        3,
        "notBreaching",
    ),
    "Invocation4XXErrors": (SM, "Invocation4XXErrors", "Sum", 300, GT, 10, 1, 1, "notBreaching"),
    "ModelLatencyP90": (
        SM,
        "ModelLatency",
        "p90",
        60,
        GT,
        500_000,
        5,
        3,
        "notBreaching",
    ),  # 500 ms in µs
    "OverheadLatencyP90": (
        SM,
        "OverheadLatency",
        "p90",
        60,
        GT,
        100_000,
        5,
        3,
        "notBreaching",
    ),  # 100 ms in µs
    "GPUUtilization": (
        INSTANCE,
        "GPUUtilization",
        "Average",
        300,
        GT,
        90,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 1 GPU
    "GPUMemoryUtilization": (
        INSTANCE,
        "GPUMemoryUtilization",
        "Maximum",
        300,
        GT,
        97,
        2,
        2,
        "notBreaching",
    ),
    "CPUUtilization": (
        INSTANCE,
        "CPUUtilization",
        "Average",
        300,
        GT,
        360,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 4
    "MemoryUtilization": (
        INSTANCE,
        "MemoryUtilization",
        "Maximum",
        300,
        GT,
        90,
        2,
        2,
        "notBreaching",
    ),
    "DiskUtilization": (INSTANCE, "DiskUtilization", "Maximum", 300, GT, 85, 1, 1, "notBreaching"),
    "EndpointHealth": (INSTANCE, "CPUUtilization", "SampleCount", 60, LT, 1, 10, 10, "breaching"),
    "UpstreamErrors": (BRIDGE, "UpstreamErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "StreamsRejected": (BRIDGE, "StreamsRejected", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "TimeToFirstDeltaP90": (
        BRIDGE,
        "TimeToFirstDelta",
        "p90",
        60,
        GT,
        2000,
        5,
        3,
        "notBreaching",
    ),  # ms, as is
    "ActiveStreamsNearCap": (
        BRIDGE,
        "ActiveStreams",
        "Average",
        60,
        GTE,
        3.6,
        5,
        5,
        "notBreaching",
    ),  # 0.9 x 4 (auto)
}


SONIC = {
    "Invocation5XXErrors": (SM, "Invocation5XXErrors", "Sum", 300, GT, 0, 1, 1, "notBreaching"),
    "Invocation4XXErrors": (SM, "Invocation4XXErrors", "Sum", 300, GT, 10, 1, 1, "notBreaching"),
    "ModelLatencyP90": (
        SM,
        "ModelLatency",
        "p90",
        60,
        GT,
        3_000_000,
        5,
        3,
        "notBreaching",
    ),  # 3000 ms in µs
    "OverheadLatencyP90": (SM, "OverheadLatency", "p90", 60, GT, 100_000, 5, 3, "notBreaching"),
    "GPUUtilization": (INSTANCE, "GPUUtilization", "Average", 300, GT, 90, 3, 3, "notBreaching"),
    "GPUMemoryUtilization": (
        INSTANCE,
        "GPUMemoryUtilization",
        "Maximum",
        300,
        GT,
        95,
        2,
        2,
        "notBreaching",
    ),
    "CPUUtilization": (
        INSTANCE,
        "CPUUtilization",
        "Average",
        300,
        GT,
        720,
        3,
        3,
        "notBreaching",
    ),  # 90 % x 8
    "MemoryUtilization": (
        INSTANCE,
        "MemoryUtilization",
        "Maximum",
        300,
        GT,
        90,
        2,
        2,
        "notBreaching",
    ),
    "DiskUtilization": (INSTANCE, "DiskUtilization", "Maximum", 300, GT, 85, 1, 1, "notBreaching"),
    "EndpointHealth": (INSTANCE, "CPUUtilization", "SampleCount", 60, LT, 1, 10, 10, "breaching"),
}


ENDPOINTS = {"Voxtral": ("voxtral-realtime", VOXTRAL), "Sonic": ("sonic-tts", SONIC)}


def topic_import(template: dict) -> dict:
    """The alarm topic as the endpoint stacks see it: an import from the Operations stack."""
    (action,) = next(iter(alarms_by_name(template).values()))["AlarmActions"]
    assert "RealtimeVoice-Operations:ExportsOutputRefAlarmTopic" in action["Fn::ImportValue"]
    return action


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_every_alarm_reads_the_right_metric_with_the_converted_threshold(synthesized, stack):
    endpoint_name, expected = ENDPOINTS[stack]
    template = synthesized.template(stack)
    alarms = alarms_by_name(template)
    assert sorted(alarms) == sorted(f"{endpoint_name}-{name}" for name in expected)
    topic = topic_import(template)
    for name, (
        namespace,
        metric,
        statistic,
        period,
        comparison,
        threshold,
        periods,
        datapoints,
        missing,
    ) in expected.items():
        alarm = alarms[f"{endpoint_name}-{name}"]
        assert alarm["Namespace"] == namespace, name
        assert alarm["MetricName"] == metric, name
        assert alarm["Dimensions"] == [
            {"Name": "EndpointName", "Value": endpoint_name},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ], name
        stat_key = "ExtendedStatistic" if statistic.startswith("p") else "Statistic"
        assert alarm[stat_key] == statistic, name
        assert alarm["Period"] == period, name
        assert alarm["ComparisonOperator"] == comparison, name
        assert alarm["Threshold"] == pytest.approx(threshold), name
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (periods, datapoints), (
            name
        )
        assert alarm["TreatMissingData"] == missing, name
        # No unit filter: a unit mismatch would leave the alarm in INSUFFICIENT_DATA.
        assert "Unit" not in alarm, name
        assert alarm["AlarmActions"] == [topic] and alarm["OKActions"] == [topic], name


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_each_alarm_states_its_missing_data_choice_and_reason(synthesized, stack):
    for name, alarm in alarms_by_name(synthesized.template(stack)).items():
        description = alarm["AlarmDescription"]
        assert f"Missing data: {alarm['TreatMissingData']}, because " in description, name
        assert len(description) <= 1024, name  # CloudWatch's limit
    health = alarms_by_name(synthesized.template(stack))[f"{ENDPOINTS[stack][0]}-EndpointHealth"]
    assert "no utilisation data means no running instance" in health["AlarmDescription"]


@pytest.mark.parametrize("stack", ["Voxtral", "Sonic"])
def test_the_health_alarm_is_created_after_the_endpoint_is_in_service(synthesized, stack):
    """Missing data is breaching: created before the endpoint, it would page through the whole first
    deployment."""
    template = synthesized.template(stack)
    (endpoint_id,) = resources(template, "AWS::SageMaker::Endpoint")
    by_name = {
        r["Properties"]["AlarmName"]: r
        for r in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    endpoint_name = ENDPOINTS[stack][0]
    assert endpoint_id in by_name[f"{endpoint_name}-EndpointHealth"]["DependsOn"]
    # The rollback alarm must exist before the endpoint that names it.
    for name, alarm in by_name.items():
        if name != f"{endpoint_name}-EndpointHealth":
            assert endpoint_id not in alarm.get("DependsOn", []), name


def test_endpoint_stacks_depend_on_the_operations_stack(synthesized):
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    for stack in ("RealtimeVoice-Voxtral", "RealtimeVoice-Sonic"):
        assert "RealtimeVoice-Operations" in manifest["artifacts"][stack]["dependencies"]
    assert resources(synthesized.template("Operations"), "AWS::SNS::Topic")
