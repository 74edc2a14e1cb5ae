"""voice_client/realtime/protocol.py: the events the client sends, as vLLM's realtime server
reads them, the hints for every error code, and binary frames that are not text. (Its lists against
the bridge's: tests/bridge/test_protocol.py.)"""

from __future__ import annotations

import base64
import json

import pytest

from voice_client.realtime import protocol
from voice_client.realtime.protocol import RealtimeError


def test_the_client_events_are_vllms_json():
    assert json.loads(protocol.session_update_event("mistralai/Voxtral")) == {
        "type": "session.update",
        "model": "mistralai/Voxtral",
    }
    assert json.loads(protocol.commit_event()) == {"type": "input_audio_buffer.commit"}
    assert json.loads(protocol.commit_event(final=True)) == {
        "type": "input_audio_buffer.commit",
        "final": True,
    }
    appended = json.loads(protocol.append_event(b"\x01\x00\xff\x7f"))
    assert appended["type"] == "input_audio_buffer.append"
    assert base64.b64decode(appended["audio"]) == b"\x01\x00\xff\x7f"
    assert {
        json.loads(event)["type"]
        for event in (
            protocol.session_update_event("m"),
            protocol.commit_event(),
            protocol.append_event(b""),
        )
    } == protocol.CLIENT_EVENT_TYPES


def test_every_error_code_has_a_hint_and_reopening_codes_are_stream_failures_not_refusals():
    assert set(protocol.ERROR_HINTS) == protocol.VLLM_ERROR_CODES | protocol.BRIDGE_ERROR_CODES
    assert {"upstream_closed", "server_shutdown"} <= protocol.REOPEN_CODES
    assert not protocol.REOPEN_CODES & {
        "server_busy",
        "session_limit",
        "model_not_found",
        "rate_limited",
    }
    assert protocol.ERROR_FIELDS_READ == {"session_limit": ("limit_s", "audio_s")}


def test_a_binary_frame_is_read_as_utf8_text_or_refused_with_its_size():
    assert protocol.decode_frame('{"type": "é"}'.encode(), "the bridge") == '{"type": "é"}'
    with pytest.raises(RealtimeError) as caught:
        protocol.decode_frame(b"\xff\xfe\x00", "the bridge")
    assert caught.value.code == "bad_message"
    assert str(caught.value).startswith(
        "the bridge sent a 3-byte binary frame that is not UTF-8 text ("
    )


def test_the_bounds_on_what_the_client_accepts():
    assert protocol.MAX_EVENT_BYTES == 1_048_576
    assert protocol.MAX_EVENT_DEPTH >= 3  # the protocol's events nest 3 levels
    assert (
        RealtimeError("x").code is None
        and RealtimeError("x", code="server_busy").code == "server_busy"
    )
