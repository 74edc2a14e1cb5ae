"""Alarm thresholds of an endpoint, in the units people set them in (milliseconds, percent of
capacity), with their checks. :mod:`constructs_lib.monitoring.alarms` converts them to each metric's
unit.

Plain values; CDK-free, so the app's settings layer can run the checks before any construct is
built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from constructs_lib.validation import Problems

#: Percent thresholds -> what the percent is of (GPU and CPU ones are scaled by the instance's GPUs
#: or vCPUs in the alarm, so each is a percent of one GPU's or vCPU's capacity).
PERCENT_THRESHOLDS = {
    "gpu_utilization_percent": "each GPU's capacity",
    "gpu_memory_percent": "each GPU's memory",
    "cpu_utilization_percent": "each vCPU's capacity",
    "memory_percent": "the instance's memory",
    "disk_percent": "the instance's disk",
}
#: A custom CloudWatch namespace: 1-255 of these characters, not starting with "AWS/" (reserved for
#: AWS services; CloudWatch API reference, PutMetricData Namespace).
NAMESPACE_RE = re.compile(r"[A-Za-z0-9./_#:-]{1,255}")


def _positive_ms(p: Problems, prop: str, value: float) -> None:
    if not value > 0:
        p.add(prop, value, "must be a positive number of milliseconds")


@dataclass(frozen=True)
class EndpointAlarmThresholds:
    """Thresholds of an endpoint's SageMaker alarms. Every alarm fires *above* its threshold.

    Attributes:
        errors_5xx / errors_4xx: errors in 5 minutes (pages; no rollback). Defaults 0 and 10.
        model_latency_p90_ms / overhead_latency_p90_ms: p90 in milliseconds (converted to the µs
            SageMaker reports). Defaults 500 and 100.
        gpu_utilization_percent / gpu_memory_percent / cpu_utilization_percent: percent of each
            GPU's or vCPU's capacity (scaled by the instance's GPUs or vCPUs). Defaults 90, 95, 90.
        memory_percent / disk_percent: percent of the instance's memory and disk. Defaults 90 and
            85.
        rollback_5xx_error_percent: percent of requests answered 5xx in a minute above which (in 3
            of 5 minutes) a rolling update rolls back. Default None: no such alarm.
    """

    errors_5xx: int = 0
    errors_4xx: int = 10
    model_latency_p90_ms: float = 500.0
    overhead_latency_p90_ms: float = 100.0
    gpu_utilization_percent: float = 90.0
    gpu_memory_percent: float = 95.0
    cpu_utilization_percent: float = 90.0
    memory_percent: float = 90.0
    disk_percent: float = 85.0
    rollback_5xx_error_percent: float | None = None

    def problems(self, p: Problems) -> None:
        for prop in ("errors_5xx", "errors_4xx"):
            if getattr(self, prop) < 0:
                p.add(
                    prop,
                    getattr(self, prop),
                    "must be 0 or more (errors in 5 minutes above which the alarm fires)",
                )
        for prop in ("model_latency_p90_ms", "overhead_latency_p90_ms"):
            _positive_ms(p, prop, getattr(self, prop))
        # The alarms fire when the metric is above the threshold, and no utilisation exceeds 100 %
        # of capacity (per GPU or vCPU for the scaled ones): a threshold of 100 could never fire.
        for prop, capacity in PERCENT_THRESHOLDS.items():
            if not 0 < getattr(self, prop) < 100:
                p.add(
                    prop,
                    getattr(self, prop),
                    f"must be a percent of {capacity}, more than 0 and less than 100 (the "
                    "alarm fires above it, and use never exceeds 100 %)",
                )
        rate = self.rollback_5xx_error_percent
        if rate is not None and not 0 < rate < 100:
            p.add(
                "rollback_5xx_error_percent",
                rate,
                "must be a percent of requests, more than 0 and less than 100 "
                "(the rollback alarm fires above it)",
            )


@dataclass(frozen=True)
class BridgeAlarmThresholds:
    """Thresholds of the alarms on the bridge's own metrics (the realtime bridge container of
    ``services/bridge/``).

    Attributes:
        namespace: the CloudWatch namespace the bridge writes to (its METRICS_NAMESPACE) (required).
        stream_cap: streams one instance admits (MAX_STREAMS = vLLM max_num_seqs) (required).
        time_to_first_delta_p90_ms: p90 from a stream's start to its first transcript delta. Default
            2000.
        active_streams_fraction: live streams per instance at or above this fraction of
            ``stream_cap`` alarm. Default 0.9.
        caps_differ: instances run with different stream caps (instance pools of different GPUs,
            each with its own Model): the near-cap alarm then watches StreamCapUsed (percent of each
            instance's own cap) at ``active_streams_fraction`` x 100, and ``stream_cap`` is the
            smallest cap (for the dashboard). Default False.
    """

    namespace: str
    stream_cap: int
    time_to_first_delta_p90_ms: float = 2000.0
    active_streams_fraction: float = 0.9
    caps_differ: bool = False

    @property
    def active_streams_threshold(self) -> float:
        """Live streams per instance that count as "near the cap"."""
        return self.active_streams_fraction * self.stream_cap

    def problems(self, p: Problems) -> None:
        if not NAMESPACE_RE.fullmatch(self.namespace) or self.namespace.startswith("AWS/"):
            p.add(
                "namespace",
                self.namespace,
                "must be 1-255 characters of letters, digits and . / _ # : - and must "
                "not start with 'AWS/'",
            )
        if self.stream_cap < 1:
            p.add("stream_cap", self.stream_cap, "must be a positive whole number")
        _positive_ms(p, "time_to_first_delta_p90_ms", self.time_to_first_delta_p90_ms)
        if not 0 < self.active_streams_fraction <= 1:
            p.add(
                "active_streams_fraction",
                self.active_streams_fraction,
                "must be more than 0 and at most 1 (live streams per instance as a fraction of "
                "the stream cap)",
            )
