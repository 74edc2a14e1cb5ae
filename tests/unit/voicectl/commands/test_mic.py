"""``voicectl mic``: its usage errors (Gradio missing, the port), no credentials at start, and
Ctrl-C, which closes the open recordings (the command run as users run it, in front of the real
bridge and the fake vLLM on loopback). The page itself: tests/unit/voice_client/test_mic.py."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT
from tests.unit.voice_client.clients_testkit import Servers, popen_interruptible
from tests.unit.voice_client.mic_testkit import LIVENESS_S, PageClient, tone
from voice_client import mic
from voice_client.transcribe import TranscriptionTarget
from voice_devtools.local.fake_vllm import free_port
from voicectl.cli import UsageError
from voicectl.commands import mic as mic_command


def test_missing_gradio_tells_how_to_install(parse, monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # makes `import gradio` raise ImportError
    with pytest.raises(
        UsageError, match=r"`make mic-deps` in the repository .* pip install '\.\[mic\]'"
    ):
        mic_command.run(parse(["mic", "--endpoint", "voxtral"]))


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_port_outside_1_to_65535_is_a_usage_error(parse, port):
    with pytest.raises(UsageError, match=f"--port must be a TCP port from 1 to 65535, got {port}"):
        mic_command.run(
            parse(
                [
                    "mic",
                    "--url",
                    "ws://127.0.0.1:8080/invocations-bidirectional-stream",
                    "--port",
                    port,
                ]
            )
        )


def test_a_port_in_use_is_a_usage_error_naming_it(parse):
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = parse(
            [
                "mic",
                "--url",
                "ws://127.0.0.1:8080/invocations-bidirectional-stream",
                "--port",
                str(port),
            ]
        )
        with pytest.raises(
            UsageError, match=f"cannot serve the page on 127.0.0.1:{port} .*pass --port with a free"
        ):
            mic_command.run(args)


def test_no_credentials_fail_at_start_and_free_the_port(parse, monkeypatch, tmp_path, capsys):
    """An empty credential chain: exit 1 with the credentials message before the page's address is
    printed."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    import socket

    for name in [name for name in list(__import__("os").environ) if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    port = free_port()
    assert (
        mic_command.run(
            parse(["mic", "--endpoint", "voxtral", "--region", "us-east-1", "--port", str(port)])
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "voicectl mic: no usable AWS credentials" in err and "aws sso login" in err
    assert "open http://" not in err
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


#: How long the Ctrl-C test waits for ``voicectl mic`` to close the page's recording, then to exit,
#: after SIGINT, seconds: a liveness bound. The exit includes the interpreter's teardown of Gradio's
#: imports, seconds on a loaded machine.
STOP_LIVENESS_S = 60.0


async def record_until_closed(client: PageClient) -> None:
    """Send tone in 0.1 s frames at real time, never Stop, until the server closes the page's
    WebSocket."""
    from websockets.exceptions import ConnectionClosed

    frame = tone(0.1).tobytes()
    with contextlib.suppress(ConnectionClosed):
        while True:
            await client.connection.send(frame)
            await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    """The fake vLLM and the bridge the command streams to."""
    with Servers(deltas=("hello ", "world "), generate=True) as running:
        yield running


def test_ctrl_c_stops_the_command_and_closes_open_recordings(servers):
    """``python -m voicectl mic``: prints the address, serves a recording, and on SIGINT closes it
    and exits 0.

    The page records without end (tone at real time, no Stop) and the signal is sent once the
    transcript has come back to it: the recording is streaming both ways when the signal arrives, at
    any machine speed."""
    import signal
    import subprocess

    from websockets.exceptions import ConnectionClosedError

    sessions_before = len(servers.vllm.sessions)
    port = free_port()
    command = popen_interruptible(
        [sys.executable, "-m", "voicectl", "mic", "--url", servers.url, "--port", str(port)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert (
            command.stderr.readline()
            == f"voicectl mic: open http://127.0.0.1:{port} (Ctrl-C to stop)\n"
        )

        async def record_then_interrupt() -> int:
            client = await PageClient.connect(f"ws://127.0.0.1:{port}{mic.RECORDING_PATH}")
            await client.start()
            await client.until("started")
            recording = asyncio.create_task(record_until_closed(client))
            await client.until(
                "transcript", timeout=LIVENESS_S
            )  # vLLM's text came back through voicectl mic
            command.send_signal(signal.SIGINT)
            async with asyncio.timeout(
                STOP_LIVENESS_S
            ):  # the transcript keeps coming until the page is closed
                with pytest.raises(ConnectionClosedError):
                    while True:
                        await client.next(timeout=LIVENESS_S)
            await recording
            return client.connection.close_code

        assert (
            asyncio.run(record_then_interrupt()) == 1012
        )  # service restart: the page says voicectl mic went away
        assert command.wait(STOP_LIVENESS_S) == 0
    finally:
        command.kill()
        command.wait()
    session = servers.vllm.sessions[sessions_before]
    assert servers.call(session.wait_closed(timeout=LIVENESS_S), timeout=2 * LIVENESS_S) == 1000
    assert not any(event.get("final") for event in session.events)  # abandoned, not finished
    err = command.stderr.read()
    assert (
        "voicectl mic: stopping\n" in err
        and "abandoned: the page's WebSocket closed (WebSocket code 1012)" in err
    )
    assert "Traceback" not in err


def test_the_options_become_the_pages_settings(parse):
    settings = mic_command.page_settings(
        parse(
            [
                "mic",
                "--endpoint",
                "voxtral",
                "--region",
                "eu-west-1",
                "--profile",
                "dev",
                "--endpoint-url",
                "https://localhost:8443",
                "--target-variant",
                "blue",
                "--port",
                "9000",
                "--share",
                "--session-limit",
                "60",
                "--sonic-endpoint",
                "sonic",
                "--voice",
                "v-1",
            ]
        )
    )
    assert settings == mic.MicSettings(
        target=TranscriptionTarget(
            endpoint="voxtral",
            region="eu-west-1",
            profile="dev",
            endpoint_url="https://localhost:8443",
            target_variant="blue",
        ),
        port=9000,
        share=True,
        model="mistralai/Voxtral-Mini-4B-Realtime-2602",
        session_limit_s=60.0,
        sonic_endpoint="sonic",
        voice="v-1",
    )
