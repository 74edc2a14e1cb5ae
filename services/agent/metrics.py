"""The agent's CloudWatch metrics as embedded metric format (EMF) lines on stdout: the container's
log driver (awslogs) sends them to CloudWatch Logs, which extracts the metrics.

EMF (CloudWatch User Guide, "Specification: Embedded metric format"): one JSON object per line,
``_aws.Timestamp`` in milliseconds, ``_aws.CloudWatchMetrics`` a list of directives each with
``Namespace``, ``Dimensions`` (lists of dimension names, at most 30) and ``Metrics`` (``Name``,
``Unit``); each dimension and metric is a top-level member of the object.

Names, units and the namespace come from :mod:`contracts.agent_metrics`, which the stack's
scaling and alarms read too; a name not there is refused.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from contracts.agent_metrics import (
    ACTIVE_SESSIONS,
    METRICS,
    NAMESPACE,
    STAGE_ERRORS,
    TASK_PROTECTION_ERRORS,
    TURN_LATENCY_METRICS,
)


class MetricsSink:
    """Writes EMF lines with the deployment's dimensions (``METRIC_DIMENSIONS``).

    Args:
        dimensions: the dimension names and values every metric carries.
        out: where lines go (stdout).
        clock: wall clock in seconds.
    """

    def __init__(
        self,
        dimensions: Mapping[str, str],
        *,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dimensions = dict(dimensions)
        self.out = out
        self.clock = clock
        #: Whether ECS task scale-in protection is on (set by the task protection loop).
        self.protected = False

    def line(
        self, metrics: Mapping[str, float], properties: Mapping[str, object] | None = None
    ) -> str:
        """One EMF line of ``metrics`` (contract name -> value, unit from the contract);
        ``properties`` are logged alongside (searchable in Logs Insights, not metrics)."""
        unknown = sorted(set(metrics) - set(METRICS))
        if unknown:
            raise ValueError(f"metrics {unknown} are not in contracts.agent_metrics.METRICS")
        document: dict[str, object] = {
            "_aws": {
                "Timestamp": round(self.clock() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": NAMESPACE,
                        "Dimensions": [sorted(self.dimensions)],
                        "Metrics": [{"Name": name, "Unit": METRICS[name]} for name in metrics],
                    }
                ],
            },
            **(properties or {}),
            **self.dimensions,
        }
        for name, value in metrics.items():
            document[name] = round(value, 1) if isinstance(value, float) else value
        return json.dumps(document, separators=(",", ":"))

    def emit(
        self, metrics: Mapping[str, float], properties: Mapping[str, object] | None = None
    ) -> None:
        if not metrics:
            return
        out = self.out or sys.stdout
        out.write(self.line(metrics, properties) + "\n")
        out.flush()

    def turn(self, latencies_ms: Mapping[str, float | None], session_id: str, turn: int) -> None:
        """One turn's latencies (keys of the ``latency`` event; those not measured left out)."""
        self.emit(
            {
                TURN_LATENCY_METRICS[key]: value
                for key, value in latencies_ms.items()
                if value is not None
            },
            {"SessionId": session_id, "Turn": turn},
        )

    def count(self, name: str, session_id: str, value: int = 1) -> None:
        """A count (a Count metric of the contract, such as ``SessionsFailed``)."""
        self.emit({name: value}, {"SessionId": session_id})

    def stage_error(self, stage: str, session_id: str, message: str) -> None:
        """One error of a pipeline stage (``stt``, ``llm`` or ``tts``)."""
        self.emit({STAGE_ERRORS[stage]: 1}, {"SessionId": session_id, "Error": message[:500]})

    # The bridge's TaskProtection records through these two (its ProtectionMetrics protocol).
    def protection_changed(self, enabled: bool) -> None:
        self.protected = enabled

    def protection_error(self) -> None:
        self.emit({TASK_PROTECTION_ERRORS: 1})


class ActiveSessionsReporter:
    """Writes ``ActiveSessions`` every ``interval_s``: the most sessions live at once since the
    last value (so a session shorter than the interval still counts), 0 included, so that target
    tracking sees every task every minute.

    Use: call :meth:`changed` whenever the number of live sessions changes; run :meth:`run`.
    """

    def __init__(self, sink: MetricsSink, interval_s: float) -> None:
        self.sink = sink
        self.interval_s = interval_s
        self.live = 0
        self.peak = 0

    def changed(self, live: int) -> None:
        self.live = live
        self.peak = max(self.peak, live)

    def report(self) -> int:
        """Write one value now and start a new interval; the value written."""
        value, self.peak = self.peak, self.live
        self.sink.emit({ACTIVE_SESSIONS: value})
        return value

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.report()
