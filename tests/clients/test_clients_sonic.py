"""Sonic: request building, the event-stream parser (property-based) and ``voicectl speak`` against a loopback
stand-in for SageMaker Runtime (real boto3/botocore parsing, no AWS call)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import soundfile
from hypothesis import given, settings
from hypothesis import strategies as st

from voicectl import speak
from voicectl.cli import UsageError
from voicectl.sonic import (
    SonicAudio,
    SonicEventParser,
    SonicRequest,
    SonicStreamError,
    TruncatedStreamError,
    assemble_audio,
    check_complete,
)


def event_line(event: dict) -> bytes:
    return json.dumps(event).encode() + b"\n"


def stream_of(chunks: list[bytes], extra_events: bool = True) -> bytes:
    """A valid Sonic response: chunk events (interleaved with timestamp events), then done."""
    lines = []
    for index, chunk in enumerate(chunks):
        lines.append(event_line({"type": "chunk", "data": base64.b64encode(chunk).decode(), "done": False,
                                 "status_code": 206, "context_id": "c", "step_time": 0.01}))
        if extra_events and index % 3 == 1:
            lines.append(event_line({"type": "timestamps", "done": False, "status_code": 206,
                                     "word_timestamps": {"words": ["é"], "start": [0.0], "end": [0.1]}}))
    lines.append(event_line({"type": "done", "done": True, "status_code": 200, "context_id": "c"}))
    return b"".join(lines)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:])]


audio_chunks = st.lists(st.binary(min_size=0, max_size=64).map(lambda b: b[: len(b) // 2 * 2]), min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_any_split_of_a_valid_stream_yields_the_same_audio(chunks, cuts):
    stream = stream_of(chunks)
    audio = assemble_audio(split_at(stream, cuts))
    assert bytes(audio.pcm16) == b"".join(chunks)
    assert audio.chunks == len(chunks)
    assert audio.done


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, data=st.data())
def test_a_truncated_stream_is_reported_with_the_audio_received(chunks, data):
    stream = stream_of(chunks)
    cut = data.draw(st.integers(min_value=0, max_value=len(stream) - 1), label="cut")
    parts = split_at(stream[:cut], data.draw(st.lists(st.integers(0, cut), max_size=10), label="cuts"))
    with pytest.raises(TruncatedStreamError) as raised:
        assemble_audio(parts)
    # What was decoded before the cut is kept, and it is a prefix of the full audio.
    assert b"".join(chunks).startswith(raised.value.audio)


def test_several_events_packed_in_one_part_and_one_event_across_parts():
    stream = stream_of([b"\x01\x00\x02\x00", b"\x03\x00"], extra_events=False)
    middle = stream.index(b"\n") + 5  # first event plus the start of the second in one part
    parser, audio = SonicEventParser(), SonicAudio()
    first = parser.feed(stream[:middle])
    assert [event["type"] for event in first] == ["chunk"]
    for event in first + parser.feed(stream[middle:]):
        audio.add(event)
    check_complete(parser, audio)
    assert bytes(audio.pcm16) == b"\x01\x00\x02\x00\x03\x00"


def test_sse_data_prefix_and_blank_lines_are_accepted():
    chunk = base64.b64encode(b"\x05\x00").decode()
    stream = f'data: {{"type":"chunk","data":"{chunk}"}}\n\ndata: {{"type":"done","done":true}}\n\n'.encode()
    assert bytes(assemble_audio([stream]).pcm16) == b"\x05\x00"


def test_error_event_and_malformed_events_are_reported():
    ok = event_line({"type": "chunk", "data": base64.b64encode(b"\x07\x00").decode()})
    with pytest.raises(SonicStreamError, match="status 500.*out of memory") as raised:
        assemble_audio([ok + event_line({"type": "error", "status_code": 500, "error": "out of memory"})])
    assert raised.value.audio == b"\x07\x00"
    with pytest.raises(SonicStreamError, match="not valid JSON"):
        assemble_audio([b"{oops\n"])
    with pytest.raises(SonicStreamError, match="not valid base64"):
        assemble_audio([event_line({"type": "chunk", "data": "***"})])
    with pytest.raises(SonicStreamError, match="after the done event"):
        assemble_audio([stream_of([b"\x00\x00"]) + ok])


def test_request_body_and_invoke_arguments():
    request = SonicRequest("Hello there.", "voice-123", language="fr", sample_rate_hz=24000, context_id="ctx-1")
    kwargs = request.invoke_kwargs("sonic-endpoint")
    assert kwargs["EndpointName"] == "sonic-endpoint"
    assert kwargs["ContentType"] == "application/json"
    assert kwargs["Accept"] == "text/event-stream"
    assert json.loads(kwargs["Body"]) == {
        "context_id": "ctx-1",
        "transcript": "Hello there.",
        "voice": {"mode": "id", "id": "voice-123"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        "language": "fr",
    }
    assert SonicRequest("a", "v").context_id != SonicRequest("a", "v").context_id


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"transcript": "  "}, "text to speak is empty"),
    ({"voice_id": ""}, "voice ID is empty"),
    ({"language": "xx"}, "language 'xx' is not supported"),
    ({"sample_rate_hz": 11025}, "11025 Hz is not supported; use one of 8000, 16000"),
])
def test_bad_request_values_are_named(kwargs, message):
    values = {"transcript": "Hi", "voice_id": "v"} | kwargs
    with pytest.raises(ValueError, match=message):
        SonicRequest(**values)


# ---- voicectl speak through botocore against a loopback server ---------------------------------------------------


def speak_args(parse, tmp_path, *extra: str):
    return parse(["speak", "Hello there.", "--endpoint", "sonic-ep", "--voice", "voice-123",
                  "--sample-rate", "22050", "--out", str(tmp_path / "out.wav"), *extra])


def test_speak_sends_the_request_and_writes_the_wav(parse, tmp_path, sagemaker_runtime, capsys):
    pcm = (np.sin(np.arange(2205) / 10) * 10000).astype("<i2").tobytes()
    stream = stream_of([pcm[:1000], pcm[1000:3000], pcm[3000:]])
    sagemaker_runtime.reply_stream([stream[:37], stream[37:200], stream[200:]])  # events cut across payload parts

    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 0

    request = sagemaker_runtime.requests[0]
    assert request.path == "/endpoints/sonic-ep/invocations-response-stream"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-amzn-sagemaker-accept"] == "text/event-stream"
    assert "/us-east-1/sagemaker/aws4_request" in request.headers["authorization"]
    body = json.loads(request.body)
    assert body["voice"] == {"mode": "id", "id": "voice-123"}
    assert body["output_format"]["sample_rate"] == 22050
    samples, rate = soundfile.read(tmp_path / "out.wav", dtype="int16")
    assert rate == 22050
    assert samples.tobytes() == pcm
    assert "0.10 s of audio at 22050 Hz" in capsys.readouterr().err


@pytest.mark.parametrize(("status", "expected"), [(422, "malformed"), (429, "no free generation slot")])
def test_speak_maps_model_errors(parse, tmp_path, sagemaker_runtime, capsys, status, expected):
    sagemaker_runtime.reply_raw(424, {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"}, json.dumps({
        "ErrorCode": "CLIENT_ERROR_FROM_MODEL", "Message": "Received client error from model",
        "OriginalStatusCode": status, "OriginalMessage": "details from Sonic",
    }).encode())
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    err = capsys.readouterr().err
    assert f"status {status}" in err and expected in err and "details from Sonic" in err
    assert not (tmp_path / "out.wav").exists()


def test_speak_reports_a_model_stream_error(parse, tmp_path, sagemaker_runtime, capsys):
    from tests.clients.conftest import event_stream_message, payload_part

    chunk = event_line({"type": "chunk", "data": base64.b64encode(b"\x01\x00").decode()})
    error = event_stream_message({":message-type": "exception", ":exception-type": "ModelStreamError",
                                  ":content-type": "application/json"},
                                 json.dumps({"Message": "container crashed", "ErrorCode": "ModelStreamError"}).encode())
    sagemaker_runtime.reply_raw(200, {"Content-Type": "application/vnd.amazon.eventstream"}, payload_part(chunk) + error)
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    assert "ModelStreamError from endpoint 'sonic-ep'" in capsys.readouterr().err


def test_speak_truncated_stream_keeps_the_audio_and_fails(parse, tmp_path, sagemaker_runtime, capsys):
    sagemaker_runtime.reply_stream([stream_of([b"\x01\x00" * 441])[:-30]])  # cut inside the done event
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    err = capsys.readouterr().err
    assert "truncated stream" in err and "wrote the 0.02 s received" in err
    samples, _ = soundfile.read(tmp_path / "out.wav", dtype="int16")
    assert samples.tobytes() == b"\x01\x00" * 441


def test_speak_rejects_bad_arguments_before_calling(parse, tmp_path):
    with pytest.raises(UsageError, match="language 'zz'"):
        speak.run(speak_args(parse, tmp_path, "--language", "zz"), client=object())
    args = parse(["speak", "Hi", "--endpoint", "e", "--voice", "v", "--out", str(tmp_path / "no" / "x.wav")])
    with pytest.raises(UsageError, match="does not exist"):
        speak.run(args, client=object())
