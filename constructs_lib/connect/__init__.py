"""Live call transcription for Amazon Connect: :class:`ConnectTranscription` (the start function, the calls queue, the
consumer service, the transcripts' bus and table, alarms and dashboard rows) and its props; README.md in this folder."""

from __future__ import annotations

from constructs_lib.connect.transcription import ConnectTranscription, ConnectTranscriptionProps, dashboard_rows

__all__ = ["ConnectTranscription", "ConnectTranscriptionProps", "dashboard_rows"]
