"""voice_client.transcribe: the target, its checks, and the bearer token of the ECS target (read
from Secrets Manager, moto in process, or from an environment variable) sent on the upgrade to the
real bridge with BRIDGE_TOKEN set, on 127.0.0.1. The command: tests/unit/voicectl/commands/
test_transcribe.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
import soundfile

from tests.unit.voice_client.clients_testkit import Servers
from tests.unit.voice_client.token_testkit import DELTAS, REGION, TOKEN
from voice_client import transcribe
from voice_client.errors import UsageError
from voice_client.transcribe import TranscriptionTarget


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers(bridge_token=TOKEN, deltas=DELTAS, generate=True) as running:
        yield running


def test_an_unreadable_secret_names_it(secrets):
    secrets("other", TOKEN)
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:missing-AbCdEf"
    target = TranscriptionTarget(
        url="ws://127.0.0.1:1/invocations-bidirectional-stream", token_secret=missing
    )
    with pytest.raises(transcribe.RealtimeError) as info:
        transcribe.read_token(target)
    assert info.value.code == "token_secret"
    assert str(info.value).startswith(
        f"cannot read the bearer token from Secrets Manager secret {missing}: AWS refused "
        "a request: "
    )
    assert "ResourceNotFoundException" in str(info.value)


@pytest.mark.parametrize(
    "value", ["", "with space in it 0123456789", "trailing-newline-0123456789\n"]
)
def test_a_token_a_header_cannot_carry_is_refused_without_showing_it(monkeypatch, value):
    monkeypatch.setenv("VOICE_BRIDGE_TOKEN", value)
    target = TranscriptionTarget(url="ws://127.0.0.1:1/x", token_env="VOICE_BRIDGE_TOKEN")
    with pytest.raises(UsageError) as info:
        transcribe.read_token(target)
    assert str(info.value).startswith(
        "the bearer token from environment variable VOICE_BRIDGE_TOKEN is empty or holds"
    )
    assert value.strip() == "" or value.strip() not in str(info.value)


def test_an_unset_token_env_is_named(monkeypatch):
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    target = TranscriptionTarget(url="ws://127.0.0.1:1/x", token_env="NO_SUCH_TOKEN_VAR")
    with pytest.raises(
        UsageError,
        match=r"^--token-env NO_SUCH_TOKEN_VAR: the environment variable NO_SUCH_TOKEN_VAR is "
        r"not set$",
    ):
        transcribe.read_token(target)


def test_mic_opens_its_streams_with_the_token_through_the_same_target(servers, secrets):
    """The mic page (:class:`voice_client.mic.MicServer`) opens its target with
    :func:`voice_client.transcribe.open_target`: with a token secret its streams carry the token (a
    stream opens and gets session.created through the bridge that checks it)."""
    arn = secrets("voxtral-token", TOKEN)
    target = TranscriptionTarget(url=servers.url, token_secret=arn)
    transcribe.validate_target(target)

    async def scenario() -> str:
        async with transcribe.open_target(target) as opener:
            transport = await opener()
            try:
                return json.loads(await transport.receive_text())["type"]
            finally:
                await transport.close()

    assert asyncio.run(scenario()) == "session.created"
    assert servers.bridge.metrics.unauthorized_count == 0


@pytest.mark.parametrize(
    "target",
    [TranscriptionTarget(), TranscriptionTarget(endpoint="voxtral", url="ws://127.0.0.1:1/x")],
)
def test_a_target_is_one_endpoint_or_one_url(target):
    with pytest.raises(UsageError) as refused:
        transcribe.validate_target(target)
    assert str(refused.value) == (
        "give one target: a SageMaker endpoint (--endpoint) or a bridge (--url)"
    )


def test_a_target_is_described_by_its_url_or_its_endpoint():
    assert TranscriptionTarget(url="ws://127.0.0.1:1/x").description == "ws://127.0.0.1:1/x"
    assert TranscriptionTarget(endpoint="voxtral").description == "SageMaker endpoint voxtral"


def test_a_recording_cut_short_is_sent_with_a_warning_and_a_missing_one_is_refused(
    recording, tmp_path
):
    assert transcribe.check_recording(recording) is None
    cut = tmp_path / "cut.wav"
    data = recording.read_bytes()
    cut.write_bytes(data[: len(data) // 2])  # the header still declares the whole recording
    frames = soundfile.info(cut).frames
    assert transcribe.check_recording(cut) == (
        f"{cut}: the WAV header declares {soundfile.info(recording).duration:.2f} s of audio but "
        f"the file holds {frames / 22_050:.2f} s (cut short?); transcribing what is there"
    )
    with pytest.raises(UsageError, match=r"absent\.wav: no such file$"):
        transcribe.check_recording(tmp_path / "absent.wav")


def test_transcribe_file_streams_the_recording_and_reports_its_warning(
    memory_server, recording, tmp_path
):
    import contextlib

    cut = tmp_path / "cut.wav"
    cut.write_bytes(recording.read_bytes()[:40_000])
    warnings: list[str] = []
    deltas: list[str] = []

    @contextlib.asynccontextmanager
    async def memory_target(target):
        yield memory_server.open

    result = asyncio.run(
        transcribe.transcribe_file(
            cut,
            TranscriptionTarget(url="ws://memory/x"),
            speed=0,
            on_delta=deltas.append,
            on_warning=warnings.append,
            opener_factory=memory_target,
        )
    )
    (session,) = memory_server.sessions
    assert result.transcript == "".join(deltas) and deltas[0] == "w1.0 "
    assert result.audio_seconds_sent == len(session.audio) / 32_000
    assert [warning.split(": ")[0] for warning in warnings] == [str(cut)]
