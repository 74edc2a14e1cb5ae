"""The contract between the bridge (container/bridge/protocol.py) and the client
(voicectl/clients/realtime/protocol.py).

The two packages share no code (the bridge imports nothing of ours; the client cannot import the container), so
each lists the event names, error codes and fields it relies on, and these tests fail as soon as the lists drift
apart, or a field the client reads is not the one the bridge writes.
"""

from __future__ import annotations

import json

import pytest

from bridge import protocol
from voicectl.clients import realtime


def test_event_types_are_the_same_on_both_sides():
    assert realtime.CLIENT_EVENT_TYPES == protocol.CLIENT_EVENT_TYPES
    assert realtime.SERVER_EVENT_TYPES == protocol.SERVER_EVENT_TYPES
    names = ("SESSION_UPDATE", "APPEND", "COMMIT", "SESSION_CREATED", "TRANSCRIPTION_DELTA", "TRANSCRIPTION_DONE", "ERROR")
    assert {name: getattr(realtime, name) for name in names} == {name: getattr(protocol, name) for name in names}


def test_error_codes_are_the_same_on_both_sides_and_every_one_has_a_hint():
    assert realtime.VLLM_ERROR_CODES == protocol.VLLM_ERROR_CODES
    assert realtime.BRIDGE_ERROR_CODES == protocol.BRIDGE_ERROR_CODES
    assert set(realtime.ERROR_HINTS) == protocol.VLLM_ERROR_CODES | protocol.BRIDGE_ERROR_CODES
    assert realtime.SESSION_LIMIT_CODE == protocol.SESSION_LIMIT
    assert realtime.SERVER_BUSY_CODE == protocol.SERVER_BUSY
    assert realtime.IDLE_TIMEOUT_CODE == protocol.IDLE_TIMEOUT
    assert {"upstream_closed", "server_shutdown"} <= realtime.REOPEN_CODES
    assert realtime.REOPEN_CODES - {"InternalStreamFailure", "ModelStreamError"} <= protocol.BRIDGE_ERROR_CODES


def test_every_field_the_client_reads_is_one_the_bridge_writes():
    for code, fields in realtime.ERROR_FIELDS_READ.items():
        assert set(fields) <= set(protocol.ERROR_FIELDS[code]), code
    assert set(protocol.ERROR_FIELDS) <= protocol.VLLM_ERROR_CODES | protocol.BRIDGE_ERROR_CODES


@pytest.mark.parametrize("limit_s", [120.0, 2359.296])
def test_the_client_reads_the_bridges_own_session_limit_event(limit_s):
    event = protocol.error_event("any words", protocol.SESSION_LIMIT, limit_s=limit_s, audio_s=limit_s - 0.1)
    machine = realtime.TranscriptionMachine(model="m")
    machine.start(0.0)
    machine.opened(1, 0.0)
    machine.audio(bytes(4096), 0.1)
    actions = machine.received(1, event.decode(), 0.2)
    assert machine.session_limit_s == pytest.approx(limit_s * realtime.SESSION_LIMIT_MARGIN)
    assert any(isinstance(action, realtime.Replaying) for action in actions)


def test_the_client_sends_events_the_bridge_accepts():
    for text in (realtime.session_update_event("m"), realtime.commit_event(), realtime.commit_event(final=True),
                 realtime.append_event(bytes(4096))):
        result = protocol.check_client_frame(text.encode(), "served")
        assert result.forward is not None and result.event_type in protocol.CLIENT_EVENT_TYPES, text
    assert protocol.check_client_frame(realtime.append_event(bytes(4096)).encode(), None).audio_bytes == 4096
    assert json.loads(realtime.commit_event(final=True)) == {"type": protocol.COMMIT, "final": True}
