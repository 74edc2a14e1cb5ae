"""The agent's CloudWatch metrics as embedded metric format (EMF) lines on stdout: the container's
log driver (awslogs) sends them to CloudWatch Logs, which extracts the metrics.

EMF (CloudWatch User Guide, "Specification: Embedded metric format"): one JSON object per line,
``_aws.Timestamp`` in milliseconds, ``_aws.CloudWatchMetrics`` a list of directives each with
``Namespace``, ``Dimensions`` (lists of dimension names, at most 30) and ``Metrics`` (``Name``,
``Unit``); each dimension and metric is a top-level member of the object.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

NAMESPACE = "VoiceAgent"
"""The metrics' CloudWatch namespace."""

MILLISECONDS = "Milliseconds"
COUNT = "Count"

TURN_METRICS = {
    "TimeToFinalTranscript": "end of the user's speech to the final transcript",
    "LlmFirstToken": "the LLM request to its first text",
    "SonicFirstAudio": "the first sentence's Sonic request to its first audio",
    "VoiceToVoice": "end of the user's speech to the agent's first audio sent to the page",
}
"""Per-turn latencies, in milliseconds."""


class MetricsSink:
    """Writes EMF lines with the deployment's dimensions (``METRIC_DIMENSIONS``).

    Args:
        dimensions: the dimension names and values every metric carries.
        out: where lines go (stdout).
        clock: wall clock in seconds.
    """

    def __init__(self, dimensions: Mapping[str, str], *, out: TextIO | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.dimensions = dict(dimensions)
        self.out = out
        self.clock = clock

    def line(self, metrics: Mapping[str, tuple[float, str]],
             properties: Mapping[str, object] | None = None) -> str:
        """One EMF line of ``metrics`` (name -> (value, unit)); ``properties`` are logged alongside
        (searchable in Logs Insights, not metrics)."""
        document: dict[str, object] = {
            "_aws": {"Timestamp": round(self.clock() * 1000), "CloudWatchMetrics": [{
                "Namespace": NAMESPACE, "Dimensions": [sorted(self.dimensions)],
                "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in metrics.items()],
            }]},
            **(properties or {}), **self.dimensions,
        }
        for name, (value, _) in metrics.items():
            document[name] = round(value, 1) if isinstance(value, float) else value
        return json.dumps(document, separators=(",", ":"))

    def emit(self, metrics: Mapping[str, tuple[float, str]],
             properties: Mapping[str, object] | None = None) -> None:
        if not metrics:
            return
        out = self.out or sys.stdout
        out.write(self.line(metrics, properties) + "\n")
        out.flush()

    def turn(self, latencies_ms: Mapping[str, float | None], session_id: str, turn: int) -> None:
        """One turn's latencies (those measured; None left out)."""
        self.emit({name: (value, MILLISECONDS) for name, value in latencies_ms.items()
                   if value is not None}, {"SessionId": session_id, "Turn": turn})

    def count(self, name: str, session_id: str, value: int = 1) -> None:
        """A count: ``Interruptions``, ``Sessions``, ``FailedSessions``, ``RefusedSessions``."""
        self.emit({name: (value, COUNT)}, {"SessionId": session_id})
