"""The whole path without AWS: the clients' real SageMaker code (aws-sdk-sagemaker-runtime-http2
over awscrt, and botocore) -> the local front door (HTTPS, HTTP/2, SigV4, event streams) -> the
bridge -> the fake vLLM, and -> the Sonic stand-in. The commands run as users run them; only
--endpoint-url or the standard AWS variables point them at the front door."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from tests.e2e.local.conftest import REGION, SONIC, VOXTRAL
from tests.unit.voice_client.clients_testkit import client_parser
from voice_client.audio import load_pcm16
from voicectl.commands import speak, transcribe

RECORDING = "tests/clients/data/speech_22k_stereo.wav"


def run_transcribe(*arguments: str) -> int:
    return transcribe.run(client_parser().parse_args(["transcribe", RECORDING, *arguments]))


def run_speak(*arguments: str) -> int:
    return speak.run(client_parser().parse_args(["speak", *arguments]))


def test_transcribe_through_the_front_door_bridge_and_fake_vllm(client_env, capsys):
    stack = client_env
    assert (
        run_transcribe("--endpoint", VOXTRAL, "--endpoint-url", stack.url, "--speed", "0", "--json")
        == 0
    )
    out, err = capsys.readouterr()
    result = json.loads(out)

    (session,) = stack.vllm.sessions
    # The transcript printed is the fake's, every delta of it; the time to first delta is reported.
    assert result["transcript"] == session.text
    assert session.text.startswith("Hello from the local runtime. ")
    assert result["complete"] is True and result["sessions"] == 1 and result["reopens"] == 0
    assert result["time_to_first_delta_s"] is not None and result["time_to_first_delta_s"] > 0
    # The fake received the recording at 16 kHz mono PCM16, byte for byte as the client converts it.
    expected = load_pcm16(RECORDING)
    assert expected.sample_rate_hz == 16000
    assert bytes(session.audio) == expected.data
    assert len(session.audio) / 2 / 16000 == pytest.approx(
        soundfile.info(RECORDING).duration, rel=0.01
    )
    assert session.event_types()[:2] == ["session.update", "input_audio_buffer.commit"]
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert "Traceback" not in err and "Task exception" not in err


def test_transcribe_finds_the_front_door_through_the_standard_variable(
    client_env, monkeypatch, capsys
):
    stack = client_env
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", stack.url)
    assert run_transcribe("--endpoint", VOXTRAL, "--speed", "0") == 0
    out, err = capsys.readouterr()
    (session,) = stack.vllm.sessions
    assert out == session.text + "\n"
    assert "time to first delta: " in err


def test_speak_through_the_front_door_writes_the_stand_ins_audio_sample_for_sample(
    client_env, tmp_path, capsys
):
    stack = client_env
    out = tmp_path / "hello.wav"
    assert (
        run_speak(
            "Hello from SageMaker.",
            "--endpoint",
            SONIC,
            "--voice",
            "local-voice",
            "--sample-rate",
            "24000",
            "--endpoint-url",
            stack.url,
            "--out",
            str(out),
        )
        == 0
    )
    (call,) = stack.sonic.calls
    samples, rate = soundfile.read(out, dtype="int16")
    assert rate == 24000
    sent = np.frombuffer(bytes(call.audio), dtype="<i2")
    assert len(sent) == round(len("Hello from SageMaker.") * 0.06 * 24000)
    assert np.array_equal(samples, sent)
    # The request reached the container as the client built it; chunks were at most 20 ms.
    assert call.request["transcript"] == "Hello from SageMaker."
    assert call.request["voice"] == {"mode": "id", "id": "local-voice"}
    chunks = [event for event in call.events if event["type"] == "chunk"]
    assert max(len(event["data"]) * 3 // 4 for event in chunks) <= 24000 * 20 // 1000 * 2
    assert call.events[-1]["type"] == "done"
    assert "time to first audio" in capsys.readouterr().err


def test_speak_finds_the_front_door_through_the_standard_variable(
    client_env, monkeypatch, tmp_path
):
    stack = client_env
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", stack.url)
    out = tmp_path / "hi.wav"
    assert run_speak("Hi.", "--endpoint", SONIC, "--voice", "v", "--out", str(out)) == 0
    (call,) = stack.sonic.calls
    assert soundfile.read(out, dtype="int16")[0].tobytes() == bytes(call.audio)


def test_unknown_endpoint_is_refused_as_sagemaker_does(client_env, tmp_path, capsys):
    stack = client_env
    assert run_transcribe("--endpoint", "no-such-endpoint", "--endpoint-url", stack.url) == 1
    err = capsys.readouterr().err
    assert "Endpoint no-such-endpoint of account 123456789012 not found" in err
    assert "Traceback" not in err and "Task exception" not in err
    assert (
        run_speak(
            "hi",
            "--endpoint",
            "no-such-endpoint",
            "--voice",
            "v",
            "--endpoint-url",
            stack.url,
            "--out",
            str(tmp_path / "x.wav"),
        )
        == 1
    )
    assert "Endpoint no-such-endpoint of account 123456789012 not found" in capsys.readouterr().err
    assert stack.vllm.sessions == [] and stack.sonic.calls == []


def test_unknown_target_variant_is_refused(client_env, capsys):
    stack = client_env
    assert (
        run_transcribe(
            "--endpoint", VOXTRAL, "--target-variant", "Blue", "--endpoint-url", stack.url
        )
        == 1
    )
    err = capsys.readouterr().err
    assert (
        "Target variant Blue not found on endpoint voxtral-realtime" in err and "AllTraffic" in err
    )
    assert stack.vllm.sessions == []


def test_a_wrong_secret_key_is_refused(client_env, monkeypatch, tmp_path, capsys):
    stack = client_env
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    assert run_transcribe("--endpoint", VOXTRAL, "--endpoint-url", stack.url) == 1
    err = capsys.readouterr().err
    assert (
        "AWS refused the signature of the call to 'voxtral-realtime' (InvalidSignatureException)"
        in err
    )
    assert (
        run_speak(
            "hi",
            "--endpoint",
            SONIC,
            "--voice",
            "v",
            "--endpoint-url",
            stack.url,
            "--out",
            str(tmp_path / "x.wav"),
        )
        == 1
    )
    assert (
        "(InvalidSignatureException): The request signature we calculated does not match"
        in capsys.readouterr().err
    )
    assert stack.vllm.sessions == [] and stack.sonic.calls == []


def test_an_unknown_access_key_is_refused(client_env, monkeypatch, tmp_path, capsys):
    stack = client_env
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASOMEONEELSE00000")
    assert (
        run_speak(
            "hi",
            "--endpoint",
            SONIC,
            "--voice",
            "v",
            "--endpoint-url",
            stack.url,
            "--out",
            str(tmp_path / "x.wav"),
        )
        == 1
    )
    assert (
        "(UnrecognizedClientException): The security token included in the request is invalid"
        in capsys.readouterr().err
    )


def test_unsigned_requests_are_refused_on_both_operations(client_env):
    import boto3
    import botocore
    import botocore.exceptions
    from botocore.config import Config

    stack = client_env
    unsigned = boto3.client(
        "sagemaker-runtime",
        region_name=REGION,
        endpoint_url=stack.url,
        config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}),
    )
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        unsigned.invoke_endpoint_with_response_stream(
            EndpointName=SONIC, Body=b"{}", ContentType="application/json"
        )
    unsigned.close()
    assert raised.value.response["Error"] == {
        "Code": "MissingAuthenticationTokenException",
        "Message": "Missing Authentication Token",
    }
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403

    status, headers, body = raw_post(
        stack, f"/endpoints/{VOXTRAL}/invocations-bidirectional-stream", b""
    )
    assert status == 403
    assert headers["x-amzn-errortype"] == "MissingAuthenticationTokenException"
    assert json.loads(body) == {"message": "Missing Authentication Token"}
    assert stack.vllm.sessions == [] and stack.sonic.calls == []


def raw_post(
    stack, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One POST over HTTPS (HTTP/1.1) with no signature, trusting the front door's CA."""
    import http.client
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(stack.url)
    context = ssl.create_default_context(cafile=str(stack.ca_file))
    connection = http.client.HTTPSConnection(
        parts.hostname, parts.port, context=context, timeout=10
    )
    try:
        connection.request("POST", path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_the_certificate_is_only_trusted_through_the_ca_bundle(
    client_env, monkeypatch, tmp_path, capsys
):
    """Without AWS_CA_BUNDLE the TLS handshake fails: the front door's certificate is not a public
    one. (botocore here: awscrt takes over 10 s to report a refused handshake; the transport's
    handling of that failure is tested in test_local_transport.py.)"""
    stack = client_env
    monkeypatch.delenv("AWS_CA_BUNDLE")
    assert (
        run_speak(
            "hi",
            "--endpoint",
            SONIC,
            "--voice",
            "v",
            "--endpoint-url",
            stack.url,
            "--out",
            str(tmp_path / "x.wav"),
        )
        == 1
    )
    assert "CERTIFICATE_VERIFY_FAILED" in capsys.readouterr().err
    assert stack.sonic.calls == []
