"""voice_client.speak: :func:`synthesize`, the Sonic call for your own code, through botocore
against a loopback stand-in for SageMaker Runtime (real parsing, no AWS call). The command that
writes a WAV: tests/unit/voicectl/commands/test_speak.py."""

from __future__ import annotations

import json

import pytest

from tests.unit.voice_client.test_sonic import event_line, stream_of
from voice_client import speak
from voice_client.sonic import SonicRequest, TruncatedStreamError

REQUEST = SonicRequest(transcript="Hello there.", voice_id="voice-123", sample_rate_hz=16_000)


def test_synthesize_assembles_the_audio_and_times_the_first_chunk(sagemaker_runtime):
    sagemaker_runtime.reply_stream([stream_of([b"\x01\x00" * 800, b"\x02\x00" * 800])])
    ticks = iter([10.0, 10.25])  # the call, then the first audio
    heard: list[bytes] = []

    result = speak.synthesize(
        sagemaker_runtime.client(),
        "sonic-ep",
        REQUEST,
        clock=lambda: next(ticks),
        on_audio=heard.append,
    )

    assert bytes(result.audio.pcm16) == b"\x01\x00" * 800 + b"\x02\x00" * 800
    assert heard == [b"\x01\x00" * 800, b"\x02\x00" * 800]
    assert (result.sample_rate_hz, result.duration_s) == (16_000, 0.1)
    assert result.time_to_first_audio_s == 0.25
    (request,) = sagemaker_runtime.requests
    assert request.path == "/endpoints/sonic-ep/invocations-response-stream"
    assert json.loads(request.body)["transcript"] == "Hello there."


def test_a_model_error_is_a_speak_error_with_the_hint(sagemaker_runtime):
    sagemaker_runtime.reply_raw(
        424,
        {"Content-Type": "application/json", "x-amzn-ErrorType": "ModelError"},
        json.dumps(
            {
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
                "Message": "Received client error from model",
                "OriginalStatusCode": 429,
                "OriginalMessage": "all slots busy",
            }
        ).encode(),
    )
    with pytest.raises(speak.SpeakError) as raised:
        speak.synthesize(sagemaker_runtime.client(), "sonic-ep", REQUEST)
    assert str(raised.value).startswith(
        "ModelError from endpoint 'sonic-ep' (status 429): all slots busy. Sonic has no free "
        "generation slot (HTTP 429)"
    )


def test_a_stream_cut_before_done_keeps_the_audio_received(sagemaker_runtime):
    sagemaker_runtime.reply_stream([event_line({"type": "chunk", "data": "AQACAA=="})])
    with pytest.raises(TruncatedStreamError) as raised:
        speak.synthesize(sagemaker_runtime.client(), "sonic-ep", REQUEST)
    assert raised.value.audio == b"\x01\x00\x02\x00"
    assert "the response stream ended before the done event" in str(raised.value)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            "InternalStreamFailure",
            "InternalStreamFailure from endpoint 'sonic-ep': lost. SageMaker lost the stream; "
            "retry, and check the endpoint's health if it persists",
        ),
        (
            "ModelStreamError",
            "ModelStreamError from endpoint 'sonic-ep' (E1): lost. The container ended the "
            "stream; see the endpoint's CloudWatch logs",
        ),
    ],
)
def test_stream_errors_say_who_ended_the_stream(code, expected):
    details = {"Message": "lost.", "ErrorCode": "E1"}
    assert speak.describe_stream_error(code, details, "sonic-ep") == expected
