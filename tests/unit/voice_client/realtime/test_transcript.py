"""voice_client.realtime.transcript: joining the generations' texts."""

from __future__ import annotations

from voice_client.realtime import join_transcripts


def test_join_transcripts_adds_a_space_only_at_a_bare_seam():
    assert join_transcripts(["Hello", "world"]) == "Hello world"
    assert join_transcripts(["Hello ", "world"]) == "Hello world"
    assert join_transcripts(["Hello", " world", "", "again"]) == "Hello world again"
