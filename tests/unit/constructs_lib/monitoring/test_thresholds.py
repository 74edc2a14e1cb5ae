"""constructs_lib/monitoring/thresholds.py: alarm thresholds in the units people set them in, and
the checks that refuse one no alarm could fire on."""

from __future__ import annotations

import pytest

from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.validation import Problems


def problems(thresholds) -> list[str]:
    p = Problems()
    thresholds.problems(p)
    return list(p)


def test_the_defaults_are_accepted():
    assert problems(EndpointAlarmThresholds()) == []
    assert problems(BridgeAlarmThresholds(namespace="VoiceRealtime/Bridge", stream_cap=8)) == []


@pytest.mark.parametrize(
    "field, value, rule",
    [
        ("errors_5xx", -1, "must be 0 or more (errors in 5 minutes above which the alarm fires)"),
        ("model_latency_p90_ms", 0, "must be a positive number of milliseconds"),
        (
            "gpu_utilization_percent",
            100,
            "must be a percent of each GPU's capacity, more than 0 and less than 100 (the "
            "alarm fires above it, and use never exceeds 100 %)",
        ),
        (
            "disk_percent",
            0,
            "must be a percent of the instance's disk, more than 0 and less than 100 (the alarm "
            "fires above it, and use never exceeds 100 %)",
        ),
        (
            "rollback_5xx_error_percent",
            100.0,
            "must be a percent of requests, more than 0 and less than 100 (the "
            "rollback alarm fires above it)",
        ),
    ],
)
def test_an_endpoint_threshold_no_alarm_could_fire_on_is_refused(field, value, rule):
    assert problems(EndpointAlarmThresholds(**{field: value})) == [f"{field}={value}: {rule}"]


def test_bridge_thresholds_check_the_namespace_and_the_cap():
    assert problems(
        BridgeAlarmThresholds(namespace="AWS/SageMaker", stream_cap=0, active_streams_fraction=1.5)
    ) == [
        "namespace='AWS/SageMaker': must be 1-255 characters of letters, digits and . / _ # : - "
        "and must not start with 'AWS/'",
        "stream_cap=0: must be a positive whole number",
        "active_streams_fraction=1.5: must be more than 0 and at most 1 (live streams per "
        "instance as a fraction of the stream cap)",
    ]
    assert problems(BridgeAlarmThresholds(namespace="has space", stream_cap=1))[0].startswith(
        "namespace='has space'"
    )


def test_near_cap_is_the_fraction_of_the_stream_cap():
    assert BridgeAlarmThresholds(
        namespace="N", stream_cap=8
    ).active_streams_threshold == pytest.approx(7.2)
    assert (
        BridgeAlarmThresholds(
            namespace="N", stream_cap=4, active_streams_fraction=0.5
        ).active_streams_threshold
        == 2.0
    )
