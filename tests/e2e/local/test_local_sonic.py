"""The Sonic path's failures through the front door, as botocore and ``voicectl speak`` see them:
the stand-in's 422 becomes a ModelError with the container's status and message, an ``error`` event
mid-stream keeps the audio received before it, and a connection cut mid-response becomes a
ModelStreamError."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from tests.e2e.local.conftest import REGION, SONIC
from tests.unit.voice_client.clients_testkit import client_parser
from voice_client import speak as speak_library
from voice_devtools.local.fake_sonic import CHUNK_MS
from voicectl.commands import speak


def run_speak(stack, out, text="A sentence long enough for several chunks of audio."):
    args = client_parser().parse_args(
        [
            "speak",
            text,
            "--endpoint",
            SONIC,
            "--voice",
            "v",
            "--sample-rate",
            "16000",
            "--endpoint-url",
            stack.url,
            "--out",
            str(out),
        ]
    )
    return speak.run(args)


def test_a_request_the_container_refuses_is_a_model_error_with_its_status(client_env):
    import boto3
    import botocore.exceptions

    stack = client_env
    client = boto3.client("sagemaker-runtime", region_name=REGION, endpoint_url=stack.url)
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        client.invoke_endpoint_with_response_stream(
            EndpointName=SONIC,
            Body=json.dumps({"transcript": ""}),
            ContentType="application/json",
            Accept="text/event-stream",
        )
    client.close()
    response = raised.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["OriginalStatusCode"] == 422
    assert "transcript is required" in response["OriginalMessage"]
    assert (
        response["LogStreamArn"]
        == f"arn:aws:logs:{REGION}:123456789012:log-group:/aws/sagemaker/Endpoints/{SONIC}"
    )
    assert "Received client error (422) from AllTraffic" in response["Error"]["Message"]
    # the 422 hint for users
    assert "HTTP 422" in speak_library.describe_client_error(raised.value, SONIC)


def test_an_error_event_mid_stream_keeps_the_audio_before_it(client_env, tmp_path, capsys):
    stack = client_env
    stack.sonic.fail_after_chunks = 3
    out = tmp_path / "partial.wav"
    assert run_speak(stack, out) == 1
    err = capsys.readouterr().err
    assert (
        "Sonic reported an error (status 500)" in err
        and "wrote the 0.06 s received before the failure" in err
    )
    (call,) = stack.sonic.calls
    samples, _ = soundfile.read(out, dtype="int16")
    assert len(samples) == 3 * 16000 * CHUNK_MS // 1000
    assert np.array_equal(samples, np.frombuffer(bytes(call.audio), dtype="<i2"))


def test_a_connection_cut_mid_response_is_a_model_stream_error(client_env, tmp_path, capsys):
    stack = client_env
    stack.sonic.drop_after_chunks = 2
    assert run_speak(stack, tmp_path / "cut.wav") == 1
    err = capsys.readouterr().err
    assert (
        "ModelStreamError from endpoint 'sonic-tts': The connection to the model container broke "
        "while it was streaming its response"
    ) in err
