"""services/bridge/protocol.py: client-frame checks (`bridge.protocol.check_client_frame`), the
pure accounting (`GenerationAudio`, `AudioRate`), and the contract with the client
(contracts/realtime.py, which both speak)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, strategies as st

import bridge.protocol as bridge_protocol
import bridge.server
from bridge import protocol
from bridge.protocol import check_client_frame, parse_served_model
from contracts import realtime as contract
from contracts.bridge_env import BridgeEnvError, BridgeEnvironment
from voice_client import realtime

MODEL = "/opt/ml/model"


@given(
    pcm=st.binary(min_size=1, max_size=600)
    .map(lambda b: b if len(b) % 2 == 0 else b[:-1])
    .filter(bool),
    compact=st.booleans(),
)
def test_append_fast_path_accepts_exactly_what_json_accepts(pcm, compact):
    separators = (",", ":") if compact else (", ", ": ")
    frame = json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()},
        separators=separators,
    ).encode()
    result = check_client_frame(frame, MODEL)
    assert result.forward == frame  # forwarded byte for byte
    assert result.audio_bytes == len(pcm)
    assert result.error is None


def test_append_with_escaped_slash_is_valid_json_and_accepted():
    audio = base64.b64encode(b"\xff\xff\xff\xfe\xff\xff").decode()  # contains "/"
    assert "/" in audio
    frame = (
        '{"type":"input_audio_buffer.append","audio":"' + audio.replace("/", "\\/") + '"}'
    ).encode()
    result = check_client_frame(frame, MODEL)
    assert result.forward == frame
    assert result.audio_bytes == 6


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b'{"type":"input_audio_buffer.append","audio":"AAAA"', "invalid_json"),  # truncated
        (b'{"type":"input_audio_buffer.append","audio":"AA"AA"}', "invalid_json"),  # quote inside
        (b'{"type":"input_audio_buffer.append","audio":"AA=="}', "invalid_audio"),  # 1 byte: odd
        (b'{"type":"input_audio_buffer.append","audio":"A A="}', "invalid_audio"),
        (
            b'{"type":"input_audio_buffer.append","audio":"AAAA===="}',
            "invalid_audio",
        ),  # padding past the end
        (b'{"type":"input_audio_buffer.append","audio":"AA=A"}', "invalid_audio"),  # padding inside
        (b'{"type":"input_audio_buffer.append","audio":"AAA"}', "invalid_audio"),  # padding missing
        (b'{"type":"input_audio_buffer.append"}', "processing_error"),
        (b"[1, 2]", "processing_error"),
        (b'{"audio": "AAAA"}', "unknown_event"),
        (b"\xff\xfe{}", "invalid_json"),
        (b"", "invalid_json"),
        (b"[" * 100_000, "processing_error"),  # RecursionError in json.loads, as in vLLM
        (
            b'{"type": "x", "n": ' + b"9" * 5000 + b"}",
            "processing_error",
        ),  # ValueError: int digits limit
    ],
)
def test_malformed_frames_are_rejected_with_a_code(frame, code):
    result = check_client_frame(frame, MODEL)
    assert result.forward is None
    error = json.loads(result.error)
    assert error["type"] == "error"
    assert error["code"] == code
    assert error["error"]


def test_session_update_is_rewritten_and_other_events_pass_unchanged():
    rewritten = check_client_frame(b'{"type": "session.update", "model": "x", "extra": 1}', MODEL)
    assert json.loads(rewritten.forward) == {"type": "session.update", "model": MODEL, "extra": 1}
    same = b'{"type": "session.update", "model": "/opt/ml/model"}'
    assert check_client_frame(same, MODEL).forward == same
    unknown = b'{"type": "response.create"}'
    assert (
        check_client_frame(unknown, MODEL).forward == unknown
    )  # vLLM answers unknown_event itself
    assert (
        check_client_frame(b'{"type": "session.update"}', None).forward
        == b'{"type": "session.update"}'
    )


def test_parse_served_model():
    assert (
        parse_served_model(b'{"object":"list","data":[{"id":"/opt/ml/model"}]}') == "/opt/ml/model"
    )
    assert parse_served_model(b'{"data": []}') is None
    assert parse_served_model(b"<html>") is None


# ---- large appends, checked a slice at a time --------------------------------------------------


def run_steps(steps):
    """Run a generator to its end; return (its value, how many times it yielded)."""
    yields = 0
    try:
        while True:
            next(steps)
            yields += 1
    except StopIteration as finished:
        return finished.value, yields


@given(
    pcm=st.binary(min_size=2, max_size=200_000).map(lambda b: b[: len(b) // 2 * 2]).filter(bool),
    layout=st.sampled_from(["plain", "mime", "escaped-slash", "spaced"]),
)
def test_a_large_append_checked_in_slices_gives_what_the_one_shot_check_gives(pcm, layout):
    audio = base64.encodebytes(pcm).decode() if layout == "mime" else base64.b64encode(pcm).decode()
    separators = (", ", ": ") if layout == "spaced" else (",", ":")
    text = json.dumps({"type": "input_audio_buffer.append", "audio": audio}, separators=separators)
    if layout == "escaped-slash":
        text = text.replace("/", "\\/")
    frame = text.encode()
    sliced, yields = run_steps(bridge_protocol.check_large_append(frame))
    one_shot = check_client_frame(frame, MODEL)
    assert sliced.audio_bytes == one_shot.audio_bytes == len(pcm)
    assert sliced.forward == one_shot.forward == frame
    assert yields == max(0, -(-len(frame) // bridge_protocol.SLICE_BYTES) - 1) or layout == "mime"


@pytest.mark.parametrize(
    ("corruption", "message"),
    [
        (lambda b64: b64[:1000] + "==" + b64[1002:], "not valid base64"),  # padding in the middle
        (lambda b64: b64[:-1], "not valid base64"),  # not whole 4-character quanta
        (
            lambda b64: b64[:70_000] + "!" + b64[70_001:],
            "not valid base64",
        ),  # a character outside the alphabet
        (lambda b64: b64[:70_000] + "\\\\" + b64[70_002:], "escaped backslash"),
        (
            lambda b64: b64[:70_000] + "\\t" + b64[70_002:],
            "not valid base64",
        ),  # an escape that is not a line break
        (lambda b64: b64[:-4] + "AAA=", "not a whole number of PCM16 samples"),  # 1 byte more: odd
    ],
    ids=[
        "padding-inside",
        "truncated",
        "bad-character",
        "escaped-backslash",
        "tab-escape",
        "odd-bytes",
    ],
)
def test_a_corrupt_large_append_is_refused_with_invalid_audio(corruption, message):
    audio = corruption(
        base64.b64encode(bytes(range(256)) * 1024).decode()
    )  # 256 KiB of PCM16: 5 slices
    frame = ('{"type":"input_audio_buffer.append","audio":"' + audio + '"}').encode()
    result, _ = run_steps(bridge_protocol.check_large_append(frame))
    assert result.forward is None
    error = json.loads(result.error)
    assert error["code"] == "invalid_audio" and message in error["error"]
    assert (
        json.loads(check_client_frame(frame, MODEL).error)["code"] == "invalid_audio"
    )  # the same verdict at once


def test_a_large_frame_that_is_not_a_canonical_append_is_refused_unparsed_at_once():
    frame = json.dumps({"audio": "AAAA" * 100_000, "type": "input_audio_buffer.append"}).encode()
    result, yields = run_steps(bridge_protocol.check_large_append(frame))
    assert yields == 0
    assert json.loads(result.error) == {
        "type": "error",
        "code": "event_too_large",
        "max_bytes": bridge_protocol.MAX_OTHER_EVENT_BYTES,
        "bytes": len(frame),
        "error": json.loads(result.error)["error"],
    }


# ---- the stream's audio accounting: pure code --------------------------------------------------


def test_generation_audio_counts_per_generation_and_refuses_past_the_limit():
    audio = bridge_protocol.GenerationAudio(limit_bytes=10 * 32000)  # 10 s
    assert audio.append(8 * 32000) and audio.audio_s == 8
    assert not audio.append(3 * 32000)  # would pass 10 s: refused, and not counted
    assert audio.audio_s == 8 and audio.limit_s == 10
    audio.final_commit()
    assert audio.append(1 * 32000)  # between the final commit and the done: counted in both
    audio.done()  # vLLM starts the next generation with what came after the final commit
    assert audio.audio_s == 1
    assert audio.append(9 * 32000) and not audio.append(2)
    unlimited = bridge_protocol.GenerationAudio(limit_bytes=None)
    assert unlimited.append(10**12) and unlimited.limit_s is None


def test_audio_rate_allows_the_burst_then_the_rate_and_charges_every_event_at_least_its_minimum():
    rate = bridge_protocol.AudioRate(limit_x=4, burst_s=2, min_event_s=0.01)
    assert rate.charge(2.0, now=100.0)  # the whole burst at once
    assert not rate.charge(0.128, now=100.0)  # nothing left
    assert rate.charge(0.128, now=100.04)  # 40 ms later: 0.16 s of audio earned
    assert not rate.charge(0.128, now=100.04)
    assert rate.charge(2.0, now=110.0) and rate.credit_s == 0  # credit is capped at the burst
    tiny = bridge_protocol.AudioRate(limit_x=4, burst_s=1, min_event_s=0.125)
    assert (
        sum(tiny.charge(0.0000625, now=0.0) for _ in range(100)) == 8
    )  # 2-byte appends cost the minimum each


def test_error_events_carry_exactly_their_fields():
    event = json.loads(bridge_protocol.error_event("m", "session_limit", limit_s=1.5, audio_s=1.4))
    assert event == {
        "type": "error",
        "error": "m",
        "code": "session_limit",
        "limit_s": 1.5,
        "audio_s": 1.4,
    }
    with pytest.raises(ValueError, match="session_limit"):
        bridge_protocol.error_event("m", "session_limit", limit_s=1.5)
    with pytest.raises(ValueError, match="invalid_json"):
        bridge_protocol.error_event("m", "invalid_json", limit_s=1)


def test_audio_burst_must_hold_one_largest_append():
    with pytest.raises(BridgeEnvError, match=r"AUDIO_BURST_S=60 must be at least 98"):
        BridgeEnvironment.from_env({"AUDIO_BURST_S": "60"})
    with pytest.raises(BridgeEnvError, match=r"at least 196.608"):
        BridgeEnvironment.from_env({"MAX_FRAME_BYTES": str(8 * 1024 * 1024)})
    settings = BridgeEnvironment.from_env({"AUDIO_RATE_LIMIT": "16", "AUDIO_BURST_S": "200"})
    assert (settings.audio_rate_limit, settings.audio_burst_s) == (16, 200)


# ---- the contract between the bridge and the client
# ---------------------------------------------------------------- Both take the event names, error
# codes and fields from contracts/realtime.py; these tests fail as soon as either side spells one of
# its own, or a field the client reads is not one the bridge writes.


def test_event_types_are_the_contracts_on_both_sides():
    names = (
        "SESSION_UPDATE",
        "APPEND",
        "COMMIT",
        "SESSION_CREATED",
        "TRANSCRIPTION_DELTA",
        "TRANSCRIPTION_DONE",
        "ERROR",
        "CLIENT_EVENT_TYPES",
        "SERVER_EVENT_TYPES",
    )
    assert all(getattr(realtime, name) is getattr(contract, name) for name in names)
    assert all(
        getattr(protocol, name) is getattr(contract, name)
        for name in ("APPEND", "COMMIT", "ERROR", "SESSION_UPDATE")
    )
    assert (bridge.server.STREAM_PATH, bridge.server.PING_PATH) == (
        contract.STREAM_PATH,
        contract.PING_PATH,
    )


def test_error_codes_are_the_contracts_on_both_sides_and_every_one_has_a_hint():
    assert realtime.VLLM_ERROR_CODES is contract.VLLM_ERROR_CODES
    assert realtime.BRIDGE_ERROR_CODES is contract.BRIDGE_ERROR_CODES
    assert protocol.ERROR_FIELDS is contract.ERROR_FIELDS
    assert set(realtime.ERROR_HINTS) == contract.VLLM_ERROR_CODES | contract.BRIDGE_ERROR_CODES
    assert realtime.SESSION_LIMIT_CODE == contract.SESSION_LIMIT
    assert realtime.SERVER_BUSY_CODE == contract.SERVER_BUSY
    assert realtime.IDLE_TIMEOUT_CODE == contract.IDLE_TIMEOUT
    assert {"upstream_closed", "server_shutdown"} <= realtime.REOPEN_CODES
    sagemaker_codes = {"InternalStreamFailure", "ModelStreamError"}
    assert realtime.REOPEN_CODES - sagemaker_codes <= contract.BRIDGE_ERROR_CODES


def test_every_field_the_client_reads_is_one_the_bridge_writes():
    for code, fields in realtime.ERROR_FIELDS_READ.items():
        assert set(fields) <= set(protocol.ERROR_FIELDS[code]), code
    assert set(protocol.ERROR_FIELDS) <= contract.VLLM_ERROR_CODES | contract.BRIDGE_ERROR_CODES


def test_the_client_paces_within_the_bridges_default_limits():
    settings = BridgeEnvironment.from_env({})
    assert settings.audio_rate_limit / 2 == realtime.MAX_SEND_SPEED
    assert settings.audio_burst_s / 2 == realtime.SEND_BURST_S
    # A stream opened in advance waits idle meanwhile.
    assert settings.idle_timeout_s > realtime.STREAM_WINDOW_S


@pytest.mark.parametrize("limit_s", [120.0, 2359.296])
def test_the_client_reads_the_bridges_own_session_limit_event(limit_s):
    event = protocol.error_event(
        "any words", contract.SESSION_LIMIT, limit_s=limit_s, audio_s=limit_s - 0.1
    )
    machine = realtime.TranscriptionMachine(model="m")
    machine.start(0.0)
    machine.opened(1, 0.0)
    machine.audio(bytes(4096), 0.1)
    actions = machine.received(1, event.decode(), 0.2)
    assert machine.session_limit_s == pytest.approx(limit_s * realtime.SESSION_LIMIT_MARGIN)
    assert any(isinstance(action, realtime.Replaying) for action in actions)


def test_the_client_sends_events_the_bridge_accepts():
    for text in (
        realtime.session_update_event("m"),
        realtime.commit_event(),
        realtime.commit_event(final=True),
        realtime.append_event(bytes(4096)),
    ):
        result = protocol.check_client_frame(text.encode(), "served")
        assert result.forward is not None and result.event_type in contract.CLIENT_EVENT_TYPES, text
    assert (
        protocol.check_client_frame(realtime.append_event(bytes(4096)).encode(), None).audio_bytes
        == 4096
    )
    assert json.loads(realtime.commit_event(final=True)) == {"type": contract.COMMIT, "final": True}
