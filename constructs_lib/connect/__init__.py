"""Live call transcription for Amazon Connect: :class:`ConnectTranscription` (the start function,
the calls queue, the consumer service, the transcripts' bus and table, alarms and dashboard rows;
:mod:`.transcription`, with the consumers' grants in :mod:`.grants` and the metrics, alarm rules
and dashboard rows in :mod:`.monitoring`) and its props (:mod:`.props`, CDK-free); README.md in
this folder.

Each name is imported on first use (PEP 562), so that ``from constructs_lib.connect.props import
...`` loads the props without ``aws_cdk``, as the settings layer needs; ``from
constructs_lib.connect import ConnectTranscription`` keeps working.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from constructs_lib.connect.props import ConnectTranscriptionProps
    from constructs_lib.connect.transcription import ConnectTranscription, dashboard_rows

_EXPORTS = {
    "ConnectTranscription": "transcription",
    "dashboard_rows": "transcription",
    "ConnectTranscriptionProps": "props",
}

__all__ = ["ConnectTranscription", "ConnectTranscriptionProps", "dashboard_rows"]


def __getattr__(name: str) -> Any:
    """Import the module of ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
