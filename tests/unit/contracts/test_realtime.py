"""contracts/realtime.py: the stream's vocabulary is consistent, and the clients' pacing stays
inside the limits."""

from __future__ import annotations

from contracts import realtime


def test_every_code_with_fields_is_a_known_code_and_every_bridge_code_has_its_fields():
    codes = realtime.VLLM_ERROR_CODES | realtime.BRIDGE_ERROR_CODES
    assert set(realtime.ERROR_FIELDS) <= codes
    assert set(realtime.ERROR_FIELDS) >= realtime.BRIDGE_ERROR_CODES
    assert realtime.ERROR_FIELDS[realtime.SESSION_LIMIT] == ("limit_s", "audio_s")
    assert not realtime.VLLM_ERROR_CODES & realtime.BRIDGE_ERROR_CODES


def test_the_event_types_and_the_audio_format():
    assert {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
    } == realtime.CLIENT_EVENT_TYPES
    assert {
        "session.created",
        "transcription.delta",
        "transcription.done",
        "error",
    } == realtime.SERVER_EVENT_TYPES
    assert realtime.PCM_BYTES_PER_SECOND == 32_000  # 16 kHz mono PCM16


def test_the_clients_pace_at_half_the_streams_rate_and_burst():
    assert (realtime.CLIENT_SEND_SPEED_X, realtime.CLIENT_BURST_S) == (16.0, 60.0)
    assert realtime.CLIENT_SEND_SPEED_X < realtime.AUDIO_RATE_LIMIT_X
    assert realtime.CLIENT_BURST_S < realtime.AUDIO_BURST_S
    # The burst holds the audio of one append of the largest frame (base64: 4 characters per 3
    # bytes of PCM16).
    largest_append_s = realtime.MAX_FRAME_BYTES * 3 / 4 / realtime.PCM_BYTES_PER_SECOND
    assert largest_append_s <= realtime.AUDIO_BURST_S
