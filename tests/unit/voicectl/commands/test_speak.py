"""``voicectl speak`` against a loopback stand-in for SageMaker Runtime (real boto3/botocore
parsing, no AWS call)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import soundfile

from tests.unit.voice_client.test_sonic import event_line, stream_of
from voicectl.cli import UsageError
from voicectl.commands import speak

# ---- voicectl speak through botocore against a loopback server ----------------------------------


def speak_args(parse, tmp_path, *extra: str):
    return parse(
        [
            "speak",
            "Hello there.",
            "--endpoint",
            "sonic-ep",
            "--voice",
            "voice-123",
            "--sample-rate",
            "22050",
            "--out",
            str(tmp_path / "out.wav"),
            *extra,
        ]
    )


def test_speak_sends_the_request_and_writes_the_wav(parse, tmp_path, sagemaker_runtime, capsys):
    pcm = (np.sin(np.arange(2205) / 10) * 10000).astype("<i2").tobytes()
    stream = stream_of([pcm[:1000], pcm[1000:3000], pcm[3000:]])
    sagemaker_runtime.reply_stream(
        [stream[:37], stream[37:200], stream[200:]]
    )  # events cut across payload parts

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


@pytest.mark.parametrize(
    ("status", "expected"), [(422, "malformed"), (429, "no free generation slot")]
)
def test_speak_maps_model_errors(parse, tmp_path, sagemaker_runtime, capsys, status, expected):
    sagemaker_runtime.reply_raw(
        424,
        {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"},
        json.dumps(
            {
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
                "Message": "Received client error from model",
                "OriginalStatusCode": status,
                "OriginalMessage": "details from Sonic",
            }
        ).encode(),
    )
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    err = capsys.readouterr().err
    assert f"status {status}" in err and expected in err and "details from Sonic" in err
    assert not (tmp_path / "out.wav").exists()


def test_speak_reports_a_model_stream_error(parse, tmp_path, sagemaker_runtime, capsys):
    from tests.unit.voice_client.clients_testkit import event_stream_message, payload_part

    chunk = event_line({"type": "chunk", "data": base64.b64encode(b"\x01\x00").decode()})
    error = event_stream_message(
        {
            ":message-type": "exception",
            ":exception-type": "ModelStreamError",
            ":content-type": "application/json",
        },
        json.dumps({"Message": "container crashed", "ErrorCode": "ModelStreamError"}).encode(),
    )
    sagemaker_runtime.reply_raw(
        200, {"Content-Type": "application/vnd.amazon.eventstream"}, payload_part(chunk) + error
    )
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    assert "ModelStreamError from endpoint 'sonic-ep'" in capsys.readouterr().err


def test_speak_truncated_stream_keeps_the_audio_and_fails(
    parse, tmp_path, sagemaker_runtime, capsys
):
    sagemaker_runtime.reply_stream(
        [stream_of([b"\x01\x00" * 441])[:-30]]
    )  # cut inside the done event
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    err = capsys.readouterr().err
    assert "truncated stream" in err and "wrote the 0.02 s received" in err
    samples, _ = soundfile.read(tmp_path / "out.wav", dtype="int16")
    assert samples.tobytes() == b"\x01\x00" * 441


def test_speak_rejects_bad_arguments_before_calling(parse, tmp_path):
    with pytest.raises(UsageError, match="language 'zz'"):
        speak.run(speak_args(parse, tmp_path, "--language", "zz"), client=object())
    args = parse(
        ["speak", "Hi", "--endpoint", "e", "--voice", "v", "--out", str(tmp_path / "no" / "x.wav")]
    )
    with pytest.raises(UsageError, match="does not exist"):
        speak.run(args, client=object())


@pytest.mark.parametrize(
    ("stall_s", "read_timeout", "expected"),
    [
        (0.0, 60, "the response stream ended before the done event"),  # the server closes early
        (
            3.0,
            0.5,
            "the connection broke while reading the response",
        ),  # the server stalls: botocore ReadTimeoutError
    ],
)
def test_speak_network_failure_mid_body_writes_the_partial_audio(
    parse, tmp_path, sagemaker_runtime, capsys, stall_s, read_timeout, expected
):
    # More than urllib3's 64 KB read size, so that events reach the parser before the stall.
    chunks = [bytes([index, 0]) * 5000 for index in range(16)]
    stream = stream_of(chunks, extra_events=False)
    lines = stream.splitlines(keepends=True)[
        :-1
    ]  # every chunk event, one per payload part; no done event
    sagemaker_runtime.reply_stream(lines)
    sagemaker_runtime.missing_bytes, sagemaker_runtime.stall_s = 500, stall_s
    assert (
        speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client(read_timeout)) == 1
    )
    err = capsys.readouterr().err
    assert "truncated stream" in err and expected in err and "Traceback" not in err
    samples, _ = soundfile.read(tmp_path / "out.wav", dtype="int16")
    written = samples.tobytes()
    assert len(written) > 0 and b"".join(chunks).startswith(written)


def test_speak_checks_out_before_calling_the_endpoint(parse, tmp_path):
    class NoCall:
        def invoke_endpoint_with_response_stream(self, **kwargs):
            pytest.fail("the endpoint was called")

    directory = tmp_path / "adir"
    directory.mkdir()
    args = parse(["speak", "Hi", "--endpoint", "e", "--voice", "v", "--out", str(directory)])
    with pytest.raises(UsageError, match="is a directory"):
        speak.run(args, client=NoCall())
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        import os

        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        args = parse(
            ["speak", "Hi", "--endpoint", "e", "--voice", "v", "--out", str(locked / "x.wav")]
        )
        with pytest.raises(UsageError, match="cannot write"):
            speak.run(args, client=NoCall())
    finally:
        locked.chmod(0o700)


def test_speak_odd_length_audio_is_trimmed_with_a_warning_and_the_write_is_atomic(
    parse, tmp_path, sagemaker_runtime, capsys
):
    sagemaker_runtime.reply_stream(
        [stream_of([b"\x01\x00\x02", b"\x00\x03\x00\x04"], extra_events=False)]
    )
    out = tmp_path / "out.wav"
    out.write_bytes(b"previous file")
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 0
    samples, _ = soundfile.read(out, dtype="int16")
    # The odd byte of the first chunk joins the next chunk; only the final odd byte is dropped.
    assert samples.tobytes() == b"\x01\x00\x02\x00\x03\x00"
    assert "odd number of bytes" in capsys.readouterr().err
    assert [path.name for path in tmp_path.iterdir()] == [
        "out.wav"
    ]  # no temporary file left behind


def test_an_error_event_is_reported_on_one_bounded_line(parse, tmp_path, sagemaker_runtime, capsys):
    many_lines = "\n".join(f"line {index}" for index in range(5000))
    sagemaker_runtime.reply_stream(
        [event_line({"type": "error", "status_code": 500, "error": many_lines})]
    )
    assert speak.run(speak_args(parse, tmp_path), client=sagemaker_runtime.client()) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 600, err
    assert err.startswith(
        "voicectl speak: bad response: Sonic reported an error (status 500): line 0\\nline 1\\n"
    )
