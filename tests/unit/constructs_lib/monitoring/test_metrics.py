"""constructs_lib/monitoring/metrics.py: how each metric is read (namespace, name, dimensions,
statistic, period), its unit, and the bridge's metrics against the names and units the bridge writes
(services/bridge/metrics.py)."""

from __future__ import annotations

import inspect
import re

from aws_cdk import Duration

from constructs_lib.monitoring.metrics import (
    UNITS,
    BridgeMetrics,
    EndpointMetrics,
    default_label,
    milliseconds_to_microseconds,
)
from tests.conftest import ROOT

DIMENSIONS = {"EndpointName": "voxtral-realtime", "VariantName": "AllTraffic"}


def read(metric) -> tuple:
    return (
        metric.namespace,
        metric.metric_name,
        dict(metric.dimensions),
        metric.statistic,
        metric.period.to_seconds(),
    )


def test_sagemaker_metrics_come_from_their_two_namespaces_with_the_variants_dimensions():
    metrics = EndpointMetrics("voxtral-realtime")
    assert read(metrics.metric_invocations()) == (
        "AWS/SageMaker",
        "Invocations",
        DIMENSIONS,
        "Sum",
        60,
    )
    assert read(metrics.metric_model_latency()) == (
        "AWS/SageMaker",
        "ModelLatency",
        DIMENSIONS,
        "p90",
        60,
    )
    assert read(metrics.metric_gpu_utilization(period=Duration.minutes(5))) == (
        "/aws/sagemaker/Endpoints",
        "GPUUtilization",
        DIMENSIONS,
        "Average",
        300,
    )
    assert read(metrics.metric("ConcurrentRequestsPerModel", statistic="Maximum")) == (
        "AWS/SageMaker",
        "ConcurrentRequestsPerModel",
        DIMENSIONS,
        "Maximum",
        60,
    )


def test_bridge_metrics_read_what_the_bridge_writes_under_the_names_and_units_it_gives():
    written = dict(
        re.findall(
            r'put_metric\("(\w+)", [^,]+(?:,[^,]+)*?, "(\w+)"\)',
            (ROOT / "services" / "bridge" / "metrics.py").read_text(),
        )
    )
    metrics = BridgeMetrics("VoiceRealtime/Bridge", "voxtral-realtime")
    read_names = {
        getattr(metrics, name)().metric_name
        for name, _ in inspect.getmembers(metrics, inspect.ismethod)
        if name.startswith("metric_")
    }
    assert read_names <= set(written), read_names - set(written)
    assert {name: UNITS[name] for name in read_names} == {
        name: written[name] for name in read_names
    }
    assert read(metrics.metric_active_streams_busiest_instance()) == (
        "VoiceRealtime/Bridge",
        "ActiveStreams",
        DIMENSIONS,
        "Maximum",
        60,
    )


def test_labels_name_the_statistic_and_unit_and_thresholds_convert_to_microseconds():
    metrics = EndpointMetrics("e")
    assert default_label(metrics.metric_model_latency()) == "ModelLatency (p90, Microseconds)"
    assert (
        default_label(metrics.metric_cpu_utilization(statistic="SampleCount"))
        == "CPUUtilization (SampleCount, Count)"
    )
    assert milliseconds_to_microseconds(500) == 500_000
