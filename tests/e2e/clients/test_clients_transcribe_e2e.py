"""``voicectl transcribe --url`` end to end: the client, the real bridge (services/bridge) and the
fake vLLM, all on 127.0.0.1. The servers run on their own event loop in a thread; the command runs
as users run it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import soundfile

from tests.unit.voice_client.clients_testkit import Servers, popen_interruptible
from voice_client.audio import CHUNK_BYTES, load_pcm16
from voice_devtools.local.fake_vllm import SAMPLES_PER_TOKEN, TAIL_TOKENS
from voicectl.commands import transcribe

DELTAS = ("Hello ", "from ", "SageMaker. ", "Streaming ", "speech ", "to ", "text.")


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers(deltas=DELTAS, generate=True) as running:
        yield running


def test_transcribe_url_paced_end_to_end(servers, parse, recording, capsys):
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "1", "--json"])
    started = time.monotonic()
    assert transcribe.run(args) == 0
    command_s = time.monotonic() - started
    out, err = capsys.readouterr()
    result = json.loads(out)

    (session,) = servers.vllm.sessions
    # The fake received 16 kHz mono PCM16 of the recording's duration (within 1 %), exactly what the
    # client converted.
    duration_s = soundfile.info(recording).duration
    received_s = len(session.audio) / 2 / 16000
    assert received_s == pytest.approx(duration_s, rel=0.01)
    pcm = load_pcm16(recording).data
    assert bytes(session.audio) == pcm
    assert session.event_types()[:2] == ["session.update", "input_audio_buffer.commit"]
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    # Paced at --speed 1: paced_chunks (voice_client/realtime/driver.py) yields each 128 ms
    # chunk no earlier than the audio before it after the pacing began, so the last chunk (the
    # recording's remainder) left no earlier than the audio less that chunk after the command
    # started: a lower bound that holds at any machine speed (less 1 ms of margin for the timers'
    # rounding). No upper bound: a loaded machine only makes a run slower. Nor a lower bound on
    # elapsed_s: it counts from the first append, which waits for the stream to open while the
    # pacing clock already runs.
    before_last_chunk_s = (len(pcm) - (len(pcm) % CHUNK_BYTES or CHUNK_BYTES)) / 2 / 16000
    assert command_s >= before_last_chunk_s - 0.001
    # Not a time limit: elapsed_s (first append to the done, on time.monotonic) is a part of the
    # command's own run, measured around it on the same clock, so this holds at any speed and checks
    # the figure's unit and span (a figure in milliseconds, or counted from before the command,
    # would exceed it).
    assert 0 < result["elapsed_s"] <= command_s
    assert result["real_time_factor"] == pytest.approx(
        result["elapsed_s"] / result["audio_seconds_sent"], abs=0.002
    )
    assert result["audio_seconds_sent"] == pytest.approx(duration_s, rel=0.01)
    # The printed transcript is what the fake sent; the deltas were printed as they arrived.
    assert result["transcript"] == session.text
    assert session.sent[-1] == {
        "type": "transcription.done",
        "text": session.text,
        "usage": session.sent[-1]["usage"],
    }
    assert session.text.startswith("Hello from SageMaker. ")
    assert session.text in err
    assert (
        result["time_to_first_delta_s"] is not None
        and 0 <= result["time_to_first_delta_s"] <= result["elapsed_s"]
    )


def test_transcribe_url_unpaced_prints_the_transcript_and_figures(
    servers, parse, recording, capsys
):
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "0"])
    assert transcribe.run(args) == 0
    out, err = capsys.readouterr()
    (session,) = servers.vllm.sessions
    assert out == session.text + "\n"
    assert (
        "time to first delta:" in err
        and "real-time factor:" in err
        and "audio sent: 3.660 s" in err
    )
    assert len(session.audio) == len(load_pcm16(recording).data)


def test_a_wav_cut_short_is_transcribed_with_a_warning_naming_both_lengths(
    servers, parse, recording, tmp_path, capsys
):
    cut = tmp_path / "cut.wav"
    cut.write_bytes(recording.read_bytes()[:1000])
    assert (
        transcribe.run(parse(["transcribe", str(cut), "--url", servers.url, "--speed", "0"])) == 0
    )
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"warning: {cut}: the WAV header declares 3.66 s of audio but the file holds 0.01 s "
        "(cut short?); transcribing what is there"
    )
    (session,) = servers.vllm.sessions
    assert len(session.audio) == len(load_pcm16(cut).data)


def test_transcribe_url_reports_an_error_event(servers, parse, recording, capsys):
    import asyncio

    async def fail_after_first_append() -> None:
        session = await servers.vllm.wait_for_session(timeout=10)
        await session.wait_for_event("input_audio_buffer.append", timeout=10)
        await session.send_error("CUDA out of memory", "processing_error")

    injected = asyncio.run_coroutine_threadsafe(fail_after_first_append(), servers.loop)
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "1"])
    assert transcribe.run(args) == 1
    injected.result(5)
    err = capsys.readouterr().err
    assert "the endpoint reported an error (processing_error): CUDA out of memory" in err
    assert "CloudWatch logs" in err


def test_transcribe_url_refused_connection_is_a_clear_error(parse, recording, capsys):
    from voice_devtools.local.fake_vllm import free_port

    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            f"ws://127.0.0.1:{free_port()}/invocations-bidirectional-stream",
        ]
    )
    assert transcribe.run(args) == 1
    assert "cannot open a WebSocket" in capsys.readouterr().err


def test_transcribe_bad_input_is_a_usage_error(parse, tmp_path):
    from voicectl.cli import UsageError

    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....")
    with pytest.raises(UsageError, match="cannot read it as audio"):
        transcribe.run(parse(["transcribe", str(bad), "--url", "ws://127.0.0.1:1/x"]))
    with pytest.raises(UsageError, match="--speed must be 0"):
        transcribe.run(
            parse(["transcribe", str(bad), "--url", "ws://127.0.0.1:1/x", "--speed", "-1"])
        )
    with pytest.raises(UsageError, match="must start with ws://"):
        transcribe.run(parse(["transcribe", str(bad), "--url", "http://127.0.0.1:1/x"]))
    with pytest.raises(SystemExit):
        parse(["transcribe", str(bad)])  # neither --endpoint nor --url


LONG_RECORDING_S = 300.0
"""The recording of the Ctrl-C test: paced at real time, it is far longer than any run of the test
lasts (each wait in it gives up after at most 15 s), so the command is still streaming when the
signal comes, at any machine speed."""


def read_until(stream, wanted: bytes, timeout_s: float) -> bytes:
    """Read a child's pipe ``stream`` (unbuffered) until what was read holds ``wanted``; return all
    of it.

    Raises:
        AssertionError: the pipe closed, or ``wanted`` did not come within ``timeout_s`` (a liveness
            bound).
    """
    import os
    import select
    import time

    read = b""
    deadline = time.monotonic() + timeout_s
    while wanted not in read:
        left_s = deadline - time.monotonic()
        assert left_s > 0, f"{wanted!r} did not come; read so far: {read!r}"
        if select.select([stream], [], [], left_s)[0]:
            chunk = os.read(stream.fileno(), 65536)
            assert chunk, f"the pipe closed before {wanted!r}; read: {read!r}"
            read += chunk
    return read


def test_ctrl_c_closes_the_stream_cleanly(recording, tmp_path):
    """SIGINT mid-stream: exit code 130 from voicectl's main, and vLLM sees a normal close (1000),
    not a drop.

    The signal is sent once the command has printed three deltas (it is streaming and has text to
    keep), with minutes of audio still to send at real time: it cannot have finished first, however
    slow the machine."""
    import math
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import numpy as np

    speech = np.frombuffer(load_pcm16(recording).data, "<i2")
    audio = np.tile(speech, math.ceil(LONG_RECORDING_S * 16_000 / len(speech)))
    long_recording = tmp_path / "long.wav"
    soundfile.write(long_recording, audio, 16_000, subtype="PCM_16")
    # Only the transcribe module is registered: the test must not depend on the other subcommands'
    # modules.
    script = (
        "import sys\nfrom voicectl import cli\ncli.SUBCOMMAND_MODULES = "
        "('voicectl.commands.transcribe',)\nsys.exit(cli.main(sys.argv[1:]))\n"
    )
    with Servers(deltas=("word ",), generate=True) as servers:
        process = popen_interruptible(
            [sys.executable, "-c", script, "transcribe", str(long_recording), "--url", servers.url],
            cwd=Path(__file__).parents[3],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        try:
            session = servers.call(servers.vllm.wait_for_session(timeout=10), timeout=15)
            # The deltas are echoed on stderr as they arrive: three of them, and the command is
            # mid-stream.
            echoed = read_until(process.stderr, b"word word word", timeout_s=15)
            process.send_signal(signal.SIGINT)
            out, rest = process.communicate(timeout=15)
        finally:
            process.kill()
            process.wait()
        close_code = servers.call(session.wait_closed(timeout=10), timeout=15)
    out, err = out.decode(), (echoed + rest).decode()
    assert process.returncode == 130, err
    # The text received is not lost: stdout holds every delta echoed as it arrived, and they are
    # what vLLM sent up to the close (a delta still on its way when the stream closed is the only
    # text that may be missing).
    assert err == out + "voicectl transcribe: interrupted\n"
    assert out.startswith("word word word") and session.text.startswith(out.removesuffix("\n"))
    assert close_code == 1000
    assert 0 < len(session.audio) < audio.nbytes


def test_python_m_voicectl_transcribe(servers, recording):
    """The installed entry point (`python -m voicectl`) runs the subcommand; stdout holds only the
    transcript."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "voicectl",
            "transcribe",
            str(recording),
            "--url",
            servers.url,
            "--speed",
            "0",
        ],
        cwd=Path(__file__).parents[3],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (session,) = servers.vllm.sessions
    assert done.stdout == session.text + "\n"


# ---- argument checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ws://127.0.0.1:99999/x", "is not a valid WebSocket URL"),
        ("ws://[::1", "is not a valid WebSocket URL"),
        ("http://127.0.0.1:1/x", "must start with ws://"),
    ],
)
def test_bad_urls_are_usage_errors_before_the_file_is_read(parse, tmp_path, url, message):
    from voicectl.cli import UsageError

    with pytest.raises(UsageError, match=message):
        transcribe.run(parse(["transcribe", str(tmp_path / "absent.wav"), "--url", url]))


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--speed", "nan", "--speed must be 0 .* at least 0.1"),
        ("--speed", "inf", "--speed must be 0 .* at least 0.1"),
        ("--speed", "1e-9", "--speed must be 0 .* at least 0.1"),
        ("--speed", "-1", "--speed must be 0"),
        (
            "--session-limit",
            "nan",
            "--session-limit must be a finite number of seconds, at least 1",
        ),
        ("--session-limit", "inf", "--session-limit must be a finite"),
        ("--session-limit", "0.1", "--session-limit must be a finite"),
    ],
)
def test_numeric_options_must_be_finite_and_sensible(parse, recording, option, value, message):
    from voicectl.cli import UsageError

    with pytest.raises(UsageError, match=message):
        transcribe.run(
            parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x", option, value])
        )


def test_a_directory_as_file_is_named(parse, tmp_path):
    from voicectl.cli import UsageError

    with pytest.raises(UsageError, match="is a directory"):
        transcribe.run(parse(["transcribe", str(tmp_path), "--url", "ws://127.0.0.1:1/x"]))


# ---- failures keep the text received -----------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True])
def test_an_error_still_prints_the_partial_transcript(servers, parse, recording, capsys, as_json):
    import asyncio

    async def fail_after_eight_appends() -> (
        None
    ):  # 1 s of audio: vLLM's first deltas come after ~0.6 s
        session = await servers.vllm.wait_for_session(timeout=10)
        await session.wait_for_event("input_audio_buffer.append", count=8, timeout=10)
        await asyncio.sleep(0.1)
        await session.send_error("CUDA out of memory", "processing_error")

    injected = asyncio.run_coroutine_threadsafe(fail_after_eight_appends(), servers.loop)
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            servers.url,
            "--speed",
            "2",
            *(["--json"] if as_json else []),
        ]
    )
    assert transcribe.run(args) == 1
    injected.result(5)
    out, err = capsys.readouterr()
    (session,) = servers.vllm.sessions
    assert session.text.startswith("Hello from SageMaker. ")
    if as_json:
        printed = json.loads(out)
        assert printed["transcript"] == session.text
        assert (printed["complete"], printed["code"]) == (False, "processing_error")
        assert "CUDA out of memory" in printed["error"]
    else:
        assert out == session.text + "\n"
        assert "The transcript printed is incomplete" in err
    assert repr(session.text) not in err


def test_no_credentials_fails_fast_instead_of_hanging(recording, tmp_path):
    """An empty credential chain: exit 1 with the credentials message (smithy-core would wait
    forever)."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts TCP but never speaks TLS: nothing must reach it anyway
    port = listener.getsockname()[1]
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(
        HOME=str(tmp_path),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    script = (
        "import sys\nfrom voicectl import cli\nfrom voice_client import sagemaker_client\n"
        f"sagemaker_client.bidi_endpoint_uri = lambda region: 'https://127.0.0.1:{port}'\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                "transcribe",
                str(recording),
                "--endpoint",
                "voxtral",
                "--region",
                "us-east-1",
            ],
            cwd=Path(__file__).parents[3],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        listener.close()
    assert done.returncode == 1, done.stderr
    assert "no usable AWS credentials" in done.stderr and "aws sso login" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_binary_frame_that_is_not_utf8_is_a_clear_error():
    import asyncio

    from websockets.asyncio.server import serve

    from voice_client.realtime import RealtimeError, WebSocketTransport, transcribe_stream

    async def scenario():
        async def handler(connection):
            await connection.send(b"\xff\xfe\x00binary")
            await connection.wait_closed()

        async with serve(handler, "127.0.0.1", 0) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"

            async def chunks():
                yield bytes(4096)

            await transcribe_stream(
                chunks(), lambda: WebSocketTransport.connect(url), done_timeout_s=5
            )

    with pytest.raises(RealtimeError, match="binary frame that is not UTF-8") as raised:
        asyncio.run(scenario())
    assert raised.value.code == "bad_message"


class ThrottlingProxy:
    """TCP proxy on 127.0.0.1 in front of the bridge. The first connection forwards client bytes
    slowly (4 KB per ``delay_s``) and is reset (both sides aborted, no close frame) after
    ``reset_after_s``; later ones pass through."""

    def __init__(self, target_port: int, reset_after_s: float, delay_s: float = 0.02) -> None:
        self.target_port, self.reset_after_s, self.delay_s = target_port, reset_after_s, delay_s
        self.connections = 0
        self.port = 0
        self._server = None
        self._tasks: set = set()

    async def start(self) -> ThrottlingProxy:
        import asyncio

        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        import asyncio

        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, client_reader, client_writer) -> None:
        import asyncio

        self.connections += 1
        first = self.connections == 1
        upstream_reader, upstream_writer = await asyncio.open_connection(
            "127.0.0.1", self.target_port
        )

        async def pump(reader, writer, throttle: bool) -> None:
            try:
                while data := await reader.read(4096):
                    if throttle:
                        await asyncio.sleep(self.delay_s)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        pumps = [
            asyncio.create_task(pump(client_reader, upstream_writer, first)),
            asyncio.create_task(pump(upstream_reader, client_writer, False)),
        ]
        self._tasks.update(pumps)
        if first:
            await asyncio.sleep(self.reset_after_s)
            client_writer.transport.abort()
            upstream_writer.transport.abort()
        await asyncio.gather(*pumps, return_exceptions=True)


@pytest.mark.parametrize(("speed", "reset_after_s"), [("0", 0.5), ("2", 1.0)])
def test_a_reset_connection_loses_no_audio(parse, recording, capsys, speed, reset_after_s):
    """A slow link that resets mid-stream (unpaced: while waiting for transcription.done; paced:
    while sending): the session is replayed on a new connection, the transcript is complete and the
    command succeeds."""
    with Servers(deltas=DELTAS, generate=True) as servers:
        proxy = servers.call(ThrottlingProxy(servers.bridge.port, reset_after_s).start())
        try:
            url = f"ws://127.0.0.1:{proxy.port}/invocations-bidirectional-stream"
            args = parse(["transcribe", str(recording), "--url", url, "--speed", speed, "--json"])
            assert transcribe.run(args) == 0
        finally:
            servers.call(proxy.stop())
        out, err = capsys.readouterr()
        first, second = servers.vllm.sessions
    result = json.loads(out)
    pcm = load_pcm16(recording).data
    assert len(first.audio) < len(pcm)  # the reset cut the first connection short
    assert bytes(second.audio) == pcm  # the replay carried the whole session
    assert result["transcript"] == second.text and result["complete"] is True
    # One delta per 80 ms of the replayed audio and TAIL_TOKENS more, the scripted words
    # round-robin.
    deltas = -(-len(pcm) // 2 // SAMPLES_PER_TOKEN) + TAIL_TOKENS
    assert second.text.count("Hello ") == -(-deltas // len(DELTAS))
    assert (result["reopens"], proxy.connections) == (1, 2)
    assert "resending this session's" in err


def test_deltas_share_one_line_ended_only_when_open(capsys):
    """The deltas' line is finished once before what follows; with no delta written, nothing is (no
    blank line)."""
    echo = transcribe.DeltaEcho()
    echo.end_line()
    echo.replay("the stream dropped; resending 1.0 s of audio")
    echo.delta("Hello ")
    echo.delta("")
    echo.delta("there.")
    echo.replay("the stream dropped again")
    echo.delta("Hi.")
    echo.end_line()
    echo.end_line()
    assert capsys.readouterr().err == (
        "voicectl transcribe: the stream dropped; resending 1.0 s of audio\n"
        "Hello there.\nvoicectl transcribe: the stream dropped again\nHi.\n"
    )


def run_against_hostile_server(parse, recording, capsys, send_events) -> tuple[int, str]:
    """``voicectl transcribe --url`` against a loopback WebSocket server that answers the first
    append with ``send_events(connection)``; returns the exit code and stderr."""
    import asyncio
    import threading

    from websockets.asyncio.server import serve

    ready = threading.Event()
    holder: dict = {"connections": []}

    async def handler(connection):
        holder["connections"].append(connection)
        await connection.send(json.dumps({"type": "session.created"}))
        async for message in connection:
            if json.loads(message)["type"] == "input_audio_buffer.append":
                await send_events(connection)
                await connection.wait_closed()
                return

    def serve_in_thread():
        async def main():
            async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
                holder["port"] = server.sockets[0].getsockname()[1]
                holder["stop"] = asyncio.get_running_loop().create_future()
                ready.set()
                await holder["stop"]
                # The client has finished. A handler that stopped reading has let its connection's
                # buffer fill, so the connection, its reading paused, never sees the client leave,
                # and closing the server would wait for it (websockets' close_timeout, 10 s): end it
                # here.
                for connection in holder["connections"]:
                    connection.transport.abort()

        holder["loop"] = asyncio.new_event_loop()
        holder["loop"].run_until_complete(main())

    thread = threading.Thread(target=serve_in_thread, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        url = f"ws://127.0.0.1:{holder['port']}/invocations-bidirectional-stream"
        code = transcribe.run(parse(["transcribe", str(recording), "--url", url, "--speed", "0"]))
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set_result, None)
        thread.join(10)
    return code, capsys.readouterr().err


def test_deeply_nested_json_from_the_server_exits_1_with_one_line(parse, recording, capsys):
    async def nested(connection):
        await connection.send("[" * 2000 + "]" * 2000)

    code, err = run_against_hostile_server(parse, recording, capsys, nested)
    assert code == 1
    assert (
        err.splitlines() == [err.rstrip("\n")]
        and "Traceback" not in err
        and "RecursionError" not in err
    )
    assert "nests deeper than 32 levels" in err


def test_huge_done_events_exit_1_instead_of_filling_memory(parse, recording, capsys):
    async def huge(connection):
        for _ in range(20):
            await connection.send(
                json.dumps({"type": "transcription.done", "text": "x" * 15_000_000})
            )

    code, err = run_against_hostile_server(parse, recording, capsys, huge)
    assert code == 1
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "larger than the 1,048,576 bytes the client accepts" in err


def test_an_error_event_with_many_lines_exits_1_with_one_line(parse, recording, capsys):
    async def error(connection):
        await connection.send(
            json.dumps(
                {
                    "type": "error",
                    "code": "processing_error",
                    "error": "Traceback (most recent call last):\n" + "  frame\n" * 1000,
                }
            )
        )

    code, err = run_against_hostile_server(parse, recording, capsys, error)
    assert code == 1
    assert len(err.splitlines()) == 1 and len(err) < 600, err
    assert (
        "the endpoint reported an error (processing_error): Traceback (most recent call last):\\n"
        in err
    )
