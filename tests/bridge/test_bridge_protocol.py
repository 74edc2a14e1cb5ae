"""Client-frame checks (`bridge.protocol.check_client_frame`) and settings parsing."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.protocol import check_client_frame, parse_served_model
from bridge.settings import Settings, SettingsError

MODEL = "/opt/ml/model"


@given(pcm=st.binary(min_size=1, max_size=600).map(lambda b: b if len(b) % 2 == 0 else b[:-1]).filter(bool),
       compact=st.booleans())
def test_append_fast_path_accepts_exactly_what_json_accepts(pcm, compact):
    separators = (",", ":") if compact else (", ", ": ")
    frame = json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()},
                       separators=separators).encode()
    result = check_client_frame(frame, MODEL)
    assert result.forward == frame  # forwarded byte for byte
    assert result.audio_bytes == len(pcm)
    assert result.error is None


def test_append_with_escaped_slash_is_valid_json_and_accepted():
    audio = base64.b64encode(b"\xff\xff\xff\xfe\xff\xff").decode()  # contains "/"
    assert "/" in audio
    frame = ('{"type":"input_audio_buffer.append","audio":"' + audio.replace("/", "\\/") + '"}').encode()
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
        (b'{"type":"input_audio_buffer.append"}', "processing_error"),
        (b"[1, 2]", "processing_error"),
        (b'{"audio": "AAAA"}', "unknown_event"),
        (b"\xff\xfe{}", "invalid_json"),
        (b"", "invalid_json"),
        (b"[" * 100_000, "processing_error"),  # RecursionError in json.loads, as in vLLM
        (b'{"type": "x", "n": ' + b"9" * 5000 + b"}", "processing_error"),  # ValueError: int digits limit
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
    assert check_client_frame(unknown, MODEL).forward == unknown  # vLLM answers unknown_event itself
    assert check_client_frame(b'{"type": "session.update"}', None).forward == b'{"type": "session.update"}'


def test_parse_served_model():
    assert parse_served_model(b'{"object":"list","data":[{"id":"/opt/ml/model"}]}') == "/opt/ml/model"
    assert parse_served_model(b'{"data": []}') is None
    assert parse_served_model(b"<html>") is None


def test_settings_defaults_and_sm_vllm_fallbacks():
    settings = Settings.from_env({
        "SM_VLLM_MAX_NUM_SEQS": "32", "SM_VLLM_MAX_MODEL_LEN": "4000", "SM_VLLM_SERVED_MODEL_NAME": '["voxtral", "v"]',
    })
    assert (settings.port, settings.vllm_port, settings.max_streams) == (8080, 8081, 32)
    assert settings.served_model == "voxtral"
    # 4000 tokens x 0.9 / 12.5 tokens per s = 288 s of audio = 288 x 16000 x 2 bytes.
    assert settings.session_audio_limit_bytes == 288 * 16000 * 2
    assert Settings.from_env({"MAX_STREAMS": "7", "SM_VLLM_MAX_NUM_SEQS": "32"}).max_streams == 7
    assert Settings.from_env({"SM_VLLM_MODEL": "/opt/ml/model"}).served_model == "/opt/ml/model"
    assert Settings.from_env({}).max_streams == 256
    assert Settings.from_env({}).session_audio_limit_bytes is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_STREAMS": "many"}, "MAX_STREAMS='many' is not an integer"),
        ({"MAX_STREAMS": "0"}, "MAX_STREAMS='0' must be at least 1"),
        ({"IDLE_TIMEOUT_S": "soon"}, "IDLE_TIMEOUT_S='soon' is not a number"),
        ({"MAX_FRAME_BYTES": "1024"}, "MAX_FRAME_BYTES='1024' must be at least 4194304"),
        ({"SESSION_LIMIT_FRACTION": "1.5"}, "SESSION_LIMIT_FRACTION=1.5 must be at most 1"),
    ],
)
def test_bad_settings_name_the_variable_and_the_rule(env, message):
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    assert str(info.value) == message
