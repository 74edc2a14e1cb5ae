"""``voicectl mic`` without a browser: launch settings, the microphone transcriber, and the page's
recording WebSocket served by the real Gradio app, in front of the real bridge and the fake vLLM
(loopback only).

The page's recorder (JavaScript) in real Chromium:
``tests/e2e/clients/test_clients_mic_browser.py``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.unit.voice_client.clients_testkit import QuietBridge, Servers, popen_interruptible
from voice_client import mic
from voice_client.audio import CHUNK_BYTES
from voice_client.realtime import RealtimeError, WebSocketTransport
from voice_devtools.local.fake_vllm import free_port
from voicectl.cli import UsageError

CHUNK_SAMPLES = CHUNK_BYTES // 2

RATE_HZ = 48_000
#: How long a test waits before it calls a stream stuck, seconds: a liveness bound, not a latency
#: target.
LIVENESS_S = 10.0
"""Sample rate of the synthetic microphone (a browser's usual)."""


def tone(seconds: float, rate_hz: int = RATE_HZ, frequency_hz: float = 300.0) -> np.ndarray:
    """A float32 sine at half scale."""
    t = np.arange(round(rate_hz * seconds)) / rate_hz
    return (0.5 * np.sin(2 * np.pi * frequency_hz * t)).astype(np.float32)


def expected_16k_samples(samples: int, rate_hz: int = RATE_HZ) -> float:
    return samples * 16_000 / rate_hz


# ---- settings and the optional dependency ------------------------------------------------------


def test_launch_binds_loopback_and_shares_only_with_share(parse):
    default = mic.launch_kwargs(parse(["mic", "--endpoint", "voxtral"]))
    assert default == {
        "server_name": "127.0.0.1",
        "server_port": 7860,
        "share": False,
        "inbrowser": False,
        "prevent_thread_lock": True,
        "quiet": True,
        "ssr_mode": False,
        "footer_links": ["gradio", "settings"],
    }
    shared = mic.launch_kwargs(parse(["mic", "--endpoint", "voxtral", "--share", "--port", "9000"]))
    assert (shared["server_name"], shared["server_port"], shared["share"]) == (
        "127.0.0.1",
        9000,
        True,
    )


def test_missing_gradio_tells_how_to_install(parse, monkeypatch):
    monkeypatch.setitem(sys.modules, "gradio", None)  # makes `import gradio` raise ImportError
    with pytest.raises(
        UsageError, match=r"`make mic-deps` in the repository .* pip install '\.\[mic\]'"
    ):
        mic.run(parse(["mic", "--endpoint", "voxtral"]))


def test_the_readmes_and_the_mic_command_give_the_same_install_hint():
    """`make mic-deps` (pinned, in a checkout) everywhere; `pip install '.[mic]'` only for a
    pip-installed project."""

    root = ROOT
    assert "`make mic-deps`" in mic.INSTALL_HINT and "`make mic-deps`" in mic.__doc__
    for readme in (root / "docs" / "clients.md", root / "voicectl" / "README.md"):
        text = readme.read_text()
        assert "make mic-deps" in text, readme
        assert "once `pip install '.[mic]'` is done" not in text, readme


@pytest.mark.parametrize("port", ["0", "65536", "-1"])
def test_a_port_outside_1_to_65535_is_a_usage_error(parse, port):
    with pytest.raises(UsageError, match=f"--port must be a TCP port from 1 to 65535, got {port}"):
        mic.run(
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
            mic.run(args)


class ScriptedTranscriber:
    text = ""


class RecordingPage:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def send(self, event: dict) -> None:
        self.sent.append(event)


def test_the_page_is_sent_the_transcript_without_taking_back_words_a_replay_discarded():
    transcriber, page = ScriptedTranscriber(), RecordingPage()
    publisher = mic.TranscriptPublisher(page, transcriber)

    async def scenario() -> list[str]:
        running = asyncio.create_task(publisher.run())
        for text in [
            "one ",
            "one two ",
            "",
            "one ",
            "one two ",
            "one two three ",
            "one two three four ",
        ]:
            transcriber.text = text  # "" and "one ": the session replayed after a drop, re-growing
            publisher.update()
            await asyncio.sleep(0)
        transcriber.text = "one two three four "
        await asyncio.sleep(0)
        running.cancel()
        return [event["text"] for event in page.sent]

    sent = asyncio.run(scenario())
    assert sent == ["one ", "one two ", "one two three ", "one two three four "]
    transcriber.text = ""  # a replay discarded the text, then failed: the words received are kept
    assert publisher.text() == "one two three four "
    transcriber.text = "uno dos "  # a replay that transcribed differently is the new truth
    assert publisher.text() == "uno dos "


# ---- the microphone transcriber against the bridge and the fake vLLM ---------------------------


def websocket_opener(url: str):
    async def open_websocket():
        return await WebSocketTransport.connect(url)

    return open_websocket


def test_every_sample_reaches_vllm_as_16k_mono_including_the_last_partial_chunk():
    seconds = (
        2.0 + 1234 / RATE_HZ
    )  # not a whole number of 128 ms chunks, nor of the 0.25 s blocks fed below
    stereo = (np.stack([tone(seconds)] * 2, axis=1) * 32767).astype(np.int16)
    block = RATE_HZ // 4

    with Servers(deltas=("one ", "two "), generate=True) as servers:

        async def record():
            transcriber = mic.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            seen = []
            for start in range(0, len(stereo), block):
                transcriber.feed(RATE_HZ, stereo[start : start + block])
                await asyncio.sleep(0.02)
                seen.append(transcriber.text)
            return seen, await transcriber.stop()

        seen, result = asyncio.run(record())
        (session,) = servers.vllm.sessions

    received_samples = len(session.audio) // 2
    assert abs(received_samples - expected_16k_samples(len(stereo))) <= 1
    assert result.audio_seconds_sent == pytest.approx(received_samples / 16_000, abs=1e-9)
    received = np.frombuffer(bytes(session.audio), dtype="<i2").astype(np.float64)
    spectrum = np.abs(np.fft.rfft(received))
    assert np.argmax(spectrum) * 16_000 / len(received) == pytest.approx(300, abs=1)
    assert (
        session.event_types()[-1] == "input_audio_buffer.commit"
        and session.events[-1]["final"] is True
    )
    assert result.transcript == session.text
    assert seen[0] == "" or len(seen[-1]) > len(seen[0])
    assert seen[-1].startswith("one two one")  # the transcript grew while recording


def test_the_stream_opens_when_the_recording_starts_and_serves_the_whole_recording():
    with Servers() as servers:

        async def record():
            transcriber = mic.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            session = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    servers.vllm.wait_for_session(timeout=LIVENESS_S), servers.loop
                )
            )
            # The session may already carry session.update and a first commit; no audio has been fed
            # yet.
            opened_before_audio = "input_audio_buffer.append" not in session.event_types()
            transcriber.feed(RATE_HZ, tone(0.5))
            return opened_before_audio, await transcriber.stop()

        opened_before_audio, result = asyncio.run(record())
        assert opened_before_audio
        assert (
            len(servers.vllm.sessions) == 1
        )  # the stream opened at the start is the one used: no second connection
        assert result.sessions == 1
        assert servers.vllm.sessions[0].audio_bytes == round(expected_16k_samples(RATE_HZ // 2)) * 2


def test_a_refused_stream_fails_the_start_naming_the_real_address():
    port = free_port()

    async def start():
        await mic.MicTranscriber(
            websocket_opener(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream")
        ).start()

    with pytest.raises(RealtimeError) as raised:
        asyncio.run(start())
    assert f"`curl http://127.0.0.1:{port}/ping` must answer 200" in str(raised.value)
    assert "HOST:PORT" not in str(raised.value)


def test_cancel_closes_the_stream_to_vllm_at_once():
    with Servers(generate=True) as servers:

        async def abandon() -> None:
            transcriber = mic.MicTranscriber(websocket_opener(servers.url))
            await transcriber.start()
            transcriber.feed(RATE_HZ, tone(0.5))
            session = await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(servers.vllm.wait_for_session(), servers.loop)
            )
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    session.wait_for_event("input_audio_buffer.append"), servers.loop
                )
            )
            await transcriber.cancel()
            # Closed by the cancel itself, not by an idle timeout (the fake vLLM has none); the wait
            # is a liveness bound.
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(
                    session.wait_closed(timeout=LIVENESS_S), servers.loop
                )
            )

        asyncio.run(abandon())
        assert not any(
            event.get("final") for event in servers.vllm.sessions[0].events
        )  # abandoned, not finished


# ---- the page's recording WebSocket, served by the real Gradio app -----------------------------


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[Servers, str]]:
    """The fake vLLM and the bridge, and the mic page in front of them; yields (servers, recording
    WebSocket URL)."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    from tests.unit.voice_client.clients_testkit import client_parser

    with Servers(deltas=("hello ", "world "), generate=True) as servers:
        args = client_parser().parse_args(["mic", "--url", servers.url, "--port", str(free_port())])
        with mic.serve(args) as url:
            yield servers, recording_url(url)


def recording_url(page_url: str) -> str:
    return page_url.replace("http://", "ws://") + mic.RECORDING_PATH


class PageClient:
    """Speaks the page's side of the recording protocol over a real WebSocket."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.messages: list[dict] = []

    @classmethod
    async def connect(cls, url: str, **kwargs) -> PageClient:
        from websockets.asyncio.client import connect

        return cls(await connect(url, **kwargs))

    async def start(self, rate_hz: int = RATE_HZ) -> None:
        await self.connection.send(json.dumps({"type": "start", "sample_rate_hz": rate_hz}))

    async def next(self, timeout: float = 5.0) -> dict:
        message = json.loads(await asyncio.wait_for(self.connection.recv(), timeout))
        self.messages.append(message)
        return message

    async def until(self, kind: str, timeout: float = 5.0) -> dict:
        while (message := await self.next(timeout))["type"] != kind:
            assert message["type"] in ("started", "transcript"), message
        return message

    async def closed_by_server(self, timeout: float = 5.0) -> bool:
        from websockets.exceptions import ConnectionClosedOK

        try:
            await asyncio.wait_for(self.connection.recv(), timeout)
        except ConnectionClosedOK:
            return True
        return False


def on_servers(servers: Servers, coroutine):
    """Await ``coroutine`` on the servers' loop from the test's loop."""
    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, servers.loop))


def test_a_recording_streams_every_sample_and_ends_with_the_figures(page, capsys):
    servers, url = page
    audio = tone(2.0 + 777 / RATE_HZ)
    frame = 1000  # samples per message, unrelated to the 4096-byte chunks sent upstream

    async def record():
        client = await PageClient.connect(url)
        await client.start()
        assert (await client.next()) == {"type": "started", "target": servers.url}
        for index, start in enumerate(range(0, len(audio), frame)):
            await client.connection.send(audio[start : start + frame].astype("<f4").tobytes())
            if index % 10 == 9:
                await asyncio.sleep(0.01)
        while not any(
            m["type"] == "transcript" for m in client.messages
        ):  # the transcript grows while recording
            await client.next()
        await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
        done = await client.until("done")
        return client, done, await client.closed_by_server()

    client, done, closed = asyncio.run(record())
    session = servers.vllm.sessions[-1]
    received_samples = len(session.audio) // 2
    assert abs(received_samples - expected_16k_samples(len(audio))) <= 1
    assert done["result"]["audio_seconds_sent"] == round(received_samples / 16_000, 3)
    assert done["text"] == session.text and done["text"].startswith("hello world hello")
    assert re.fullmatch(
        r"time to first delta: \d+\.\d{3} s; real-time factor: \d+\.\d{3}; audio sent: "
        + re.escape(f"{received_samples / 16_000:.3f}")
        + " s",
        done["figures"],
    )
    transcripts = [m["text"] for m in client.messages if m["type"] == "transcript"]
    assert transcripts and all(done["text"].startswith(text) for text in transcripts)
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert closed
    err = capsys.readouterr().err
    assert re.search(
        r"voicectl mic: recording \d+: streaming 48000 Hz audio to ws://127\.0\.0\.1:\d+/", err
    )
    assert re.search(r"voicectl mic: recording \d+ done: time to first delta: ", err)


def test_the_target_is_opened_once_at_start_for_every_recording(page, monkeypatch):
    """Credentials and the SDK client (``open_target``) once per command, not per recording or
    chunk."""
    import contextlib

    from tests.unit.voice_client.clients_testkit import client_parser
    from voice_client import transcribe

    servers, _ = page
    entered, exited = [], []

    @contextlib.asynccontextmanager
    async def counted_open_target(args):
        entered.append(time.monotonic())
        async with transcribe.open_target(args) as opener:
            yield opener
        exited.append(time.monotonic())

    monkeypatch.setattr(mic, "open_target", counted_open_target)
    args = client_parser().parse_args(["mic", "--url", servers.url, "--port", str(free_port())])

    async def record(url: str) -> dict:
        client = await PageClient.connect(url)
        await client.start()
        await client.connection.send(tone(0.3).tobytes())
        await client.connection.send(json.dumps({"type": "stop", "samples": len(tone(0.3))}))
        return await client.until("done")

    with mic.serve(args) as page_url:
        assert len(entered) == 1  # before the address is given out
        done = [asyncio.run(record(recording_url(page_url))) for _ in range(3)]
        assert (len(entered), len(exited)) == (1, 0)
    assert len(exited) == 1  # closed with the server
    assert [d["result"]["sessions"] for d in done] == [1, 1, 1]


def test_closing_the_page_closes_the_stream_to_vllm(page, capsys):
    servers, url = page
    sessions_before = len(servers.vllm.sessions)

    async def abandon() -> None:
        client = await PageClient.connect(url)
        await client.start()
        await client.until("started")
        await client.connection.send(tone(0.5).tobytes())
        session = await on_servers(servers, servers.vllm.wait_for_session(sessions_before))
        await on_servers(servers, session.wait_for_event("input_audio_buffer.append"))
        await client.connection.close()
        await on_servers(
            servers, session.wait_closed(timeout=LIVENESS_S)
        )  # a liveness bound, not a speed target

    asyncio.run(abandon())
    assert "abandoned: the page's WebSocket closed (WebSocket code 1000)" in capsys.readouterr().err


def test_a_down_container_fails_the_recording_once_naming_its_address(capsys):
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    from tests.unit.voice_client.clients_testkit import client_parser

    port = free_port()
    args = client_parser().parse_args(
        [
            "mic",
            "--url",
            f"ws://127.0.0.1:{port}/invocations-bidirectional-stream",
            "--port",
            str(free_port()),
        ]
    )

    async def record(url: str):
        client = await PageClient.connect(url)
        await client.start()
        await client.connection.send(tone(0.3).tobytes())  # audio sent before the failure is known
        return await client.next(), await client.closed_by_server()

    with mic.serve(args) as page_url:
        error, closed = asyncio.run(record(recording_url(page_url)))
    message = error["message"]
    assert error["type"] == "error" and error["text"] == ""
    assert message.startswith(
        f"cannot open a WebSocket to ws://127.0.0.1:{port}/invocations-bidirectional-stream ("
    )
    assert (
        f"`curl http://127.0.0.1:{port}/ping` must answer 200" in message
        and "HOST:PORT" not in message
    )
    assert closed
    err = capsys.readouterr().err
    assert err.count("failed:") == 1 and f"voicectl mic: recording 1 failed: {message}\n" in err


def test_vllm_dying_mid_recording_ends_it_with_one_error_and_the_partial_text(page, capsys):
    servers, url = page
    sessions_before = len(servers.vllm.sessions)

    async def record():
        client = await PageClient.connect(url)
        await client.start()
        await client.until("started")
        await client.connection.send(
            tone(1.0).tobytes()
        )  # vLLM's first delta needs ~0.6 s of audio buffered
        await client.until("transcript")
        session = await on_servers(servers, servers.vllm.wait_for_session(sessions_before))
        await on_servers(servers, servers.vllm.die())
        try:
            for _ in range(20):  # the page goes on sending until it learns of the failure
                await client.connection.send(tone(0.05).tobytes())
                await asyncio.sleep(0.05)
        except Exception:  # the server may already have closed the socket
            pass
        return session, await client.until("error"), await client.closed_by_server()

    try:
        session, error, closed = asyncio.run(record())
    finally:
        servers.call(servers.vllm.start())  # back up on the same port for the other tests
    # The partial text is what reached the page: a beginning of vLLM's text (deltas in flight when
    # vLLM died are lost).
    assert session.text.startswith(error["text"]) and error["text"].startswith("hello")
    assert "upstream" in error["message"] and error["message"] == error["message"].strip()
    assert closed
    assert capsys.readouterr().err.count("failed:") == 1


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([json.dumps({"type": "stop", "samples": 0})], "the first message must be"),
        (
            [json.dumps({"type": "start", "sample_rate_hz": 1000})],
            "sample rate 1000 Hz is outside 8000-384000 Hz",
        ),
        ([json.dumps({"type": "start", "sample_rate_hz": "48000"})], "the first message must be"),
        (
            [json.dumps({"type": "start", "sample_rate_hz": RATE_HZ}), b"\x00" * 6],
            "6 bytes is not whole float32 samples",
        ),
        (
            [
                json.dumps({"type": "start", "sample_rate_hz": RATE_HZ}),
                np.array([0.1, np.nan], "<f4").tobytes(),
            ],
            "not finite",
        ),
        (
            [
                json.dumps({"type": "start", "sample_rate_hz": RATE_HZ}),
                np.zeros(480, "<f4").tobytes(),
                json.dumps({"type": "stop", "samples": 960}),
            ],
            "the page recorded 960 samples but 480 arrived",
        ),
    ],
)
def test_a_bad_page_message_ends_the_recording_with_a_clear_error(page, messages, expected):
    _, url = page

    async def record():
        client = await PageClient.connect(url)
        for message in messages:
            await client.connection.send(message)
        return await client.until("error"), await client.closed_by_server()

    error, closed = asyncio.run(record())
    assert (
        error["message"].startswith("the page sent a bad message: ")
        and expected in error["message"]
    )
    assert closed


def uploaded_files() -> set[str]:
    """Every file in Gradio's upload folder (its temporary directory), where ``/gradio_api/upload``
    stores files."""
    from pathlib import Path

    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder())
    return {str(path) for path in folder.rglob("*") if path.is_file()} if folder.exists() else set()


def test_a_cross_site_upload_is_refused_and_nothing_is_written(page, capsys):
    """``curl -H "Origin: https://evil.example" -F files=@big.bin .../gradio_api/upload`` once
    answered 200 and stored the file, which any web site can make a browser send (a multipart POST
    needs no CORS preflight)."""
    import httpx

    _, url = page
    base = url.replace("ws://", "http://").removesuffix(mic.RECORDING_PATH)
    before = uploaded_files()
    big = os.urandom(65536) + b"\x00" * (
        4 << 20
    )  # unique: Gradio stores a file under its content's hash
    cross_site = httpx.post(
        f"{base}/gradio_api/upload",
        headers={"Origin": "https://evil.example"},
        files={"files": ("big.bin", big)},
        timeout=10,
    )
    same_origin = httpx.post(
        f"{base}/gradio_api/upload",
        headers={"Origin": base},
        files={"files": ("big.bin", big)},
        timeout=10,
    )
    preflight = httpx.options(
        f"{base}/gradio_api/upload",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert (cross_site.status_code, same_origin.status_code, preflight.status_code) == (
        403,
        404,
        403,
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert uploaded_files() == before
    err = capsys.readouterr().err
    assert "refused a request: Origin 'https://evil.example' is not this page" in err
    assert "refused a request: POST '/gradio_api/upload' is not a route of this page" in err


@pytest.mark.parametrize(
    ("name", "origin", "refusal"),
    [
        (
            "evil.example",
            "http://evil.example:{port}",
            "Host 'evil.example:{port}' is not",
        ),  # DNS rebinding
        ("127.0.0.1", "http://evil.example", "Origin 'http://evil.example' is not this page"),
    ],
)
def test_a_rebinding_or_cross_site_page_cannot_open_a_recording(
    page, capsys, name, origin, refusal
):
    """Comparing the Origin with the Host is not enough: a DNS-rebinding page controls both."""
    from websockets.exceptions import InvalidStatus

    servers, url = page
    port = int(url.split(":")[2].split("/")[0])
    sessions_before = len(servers.vllm.sessions)
    with pytest.raises(
        InvalidStatus, match="403"
    ):  # the URL names the host; the TCP connection goes to 127.0.0.1
        asyncio.run(
            PageClient.connect(
                url.replace("127.0.0.1", name),
                origin=origin.format(port=port),
                host="127.0.0.1",
                port=port,
            )
        )
    assert len(servers.vllm.sessions) == sessions_before
    assert refusal.format(port=port) in capsys.readouterr().err


def test_audio_faster_than_real_time_ends_the_recording_with_a_clear_error(page):
    """Audio ahead of real time is refused, not queued (queued, 190 MB sent in 30 s grew the server
    by 194 MB)."""
    _servers, url = page

    async def flood():
        client = await PageClient.connect(url)
        await client.start()
        await client.until("started")
        second = np.zeros(RATE_HZ, "<f4").tobytes()
        with contextlib.suppress(
            Exception
        ):  # the server closes the socket once it refused the audio
            for _ in range(int(mic.MAX_AHEAD_S) + 30):
                await client.connection.send(second)
        return await client.until("error"), await client.closed_by_server()

    error, closed = asyncio.run(flood())
    assert re.fullmatch(
        r"the page sent \d+\.\d s of audio in \d+\.\d s, faster than a microphone records "
        r"\(at most 3 s ahead of real time\)",
        error["message"],
    ), error
    assert closed


def test_a_stream_that_stops_taking_audio_ends_the_recording_before_holding_more_than_the_bound(
    monkeypatch,
):
    transcriber = mic.MicTranscriber(opener=None)
    monkeypatch.setattr(mic, "MAX_QUEUED_AUDIO_S", 1.0)
    transcriber.feed(16_000, np.zeros(16_000, np.float32))  # 1 s: at the bound
    with pytest.raises(
        mic.AudioOverrun,
        match=r"the endpoint stopped taking audio: 1 s of it is waiting to be sent "
        r"\(at most 1 s is kept\)",
    ):
        transcriber.feed(16_000, np.zeros(CHUNK_SAMPLES, np.float32))


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
        mic.run(
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


def test_ctrl_c_stops_the_command_and_closes_open_recordings(page):
    """``python -m voicectl mic``: prints the address, serves a recording, and on SIGINT closes it
    and exits 0.

    The page records without end (tone at real time, no Stop) and the signal is sent once the
    transcript has come back to it: the recording is streaming both ways when the signal arrives, at
    any machine speed."""
    import signal
    import subprocess

    from websockets.exceptions import ConnectionClosedError

    servers, _ = page
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


# ---- the watchdog --------------------------------------------------------------------------------


@pytest.fixture
def quiet_page(monkeypatch) -> Iterator[tuple[QuietBridge, str]]:
    """The mic page in front of a :class:`QuietBridge`, with the watchdog's timeouts shortened."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    from tests.unit.voice_client.clients_testkit import client_parser

    for name, value in {
        "FIRST_ANSWER_TIMEOUT_S": 1.0,
        "STALL_NOTICE_S": 0.5,
        "STALL_TIMEOUT_S": 1.5,
        "STOP_TIMEOUT_S": 1.0,
        "WATCHDOG_TICK_S": 0.05,
    }.items():
        monkeypatch.setattr(mic, name, value)
    bridge = QuietBridge()
    with bridge.serving() as container:
        args = client_parser().parse_args(["mic", "--url", container, "--port", str(free_port())])
        with mic.serve(args) as url:
            yield bridge, recording_url(url)


async def record_until_end(url: str, seconds: float, stop: bool = True) -> list[dict]:
    """Record ``seconds`` of tone in 0.1 s frames at real time, Stop (if ``stop``), and return every
    message up to the end (done or error)."""
    client = await PageClient.connect(url)
    await client.start()
    await client.until("started")
    from websockets.exceptions import ConnectionClosed

    audio = tone(seconds)
    step = RATE_HZ // 10
    with contextlib.suppress(
        ConnectionClosed
    ):  # the server ends the recording (and the socket) on an error
        for start in range(0, len(audio), step):
            await client.connection.send(audio[start : start + step].tobytes())
            await asyncio.sleep(0.1)
        if stop:
            await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
    with contextlib.suppress(ConnectionClosed):
        while (await client.next(10))["type"] not in ("done", "error"):
            pass
    return client.messages


@pytest.mark.parametrize(
    ("answers", "answer_done", "seconds", "expected"),
    [
        (
            0,
            True,
            2.0,
            r"ws://127\.0\.0\.1:\d+/invocations-bidirectional-stream accepted the stream but "
            r"sent nothing back in 1 s\. Check that the endpoint is in service and its logs, "
            r"then press Record again\.",
        ),
        (
            2,
            True,
            3.0,
            r"ws://\S+ stopped answering: nothing for 2 s while audio was sent\. Check .*",
        ),
        (
            None,
            False,
            0.5,
            r"The transcript did not finish within 1 s of Stop: ws://\S+ stopped answering\. "
            r"Check .*",
        ),
    ],
)
def test_the_watchdog_ends_a_stream_that_stops_answering_and_the_next_recording_works(
    quiet_page, answers, answer_done, seconds, expected
):
    bridge, url = quiet_page
    bridge.answers, bridge.answer_done = answers, answer_done
    messages = asyncio.run(record_until_end(url, seconds))
    error = messages[-1]
    assert error["type"] == "error" and re.fullmatch(expected, error["message"]), error
    if answers == 2:  # the stall showed first, while audio was still sent
        assert {"type": "stall", "silent_s": 0} not in messages
        stalls = [message["silent_s"] for message in messages if message["type"] == "stall"]
        assert stalls and stalls == sorted(set(stalls)) and stalls[0] >= 1, (
            stalls
        )  # each second once, rising
    streams = bridge.streams
    bridge.answers, bridge.answer_done = None, True
    messages = asyncio.run(record_until_end(url, 0.5))
    assert messages[-1]["type"] == "done" and messages[-1]["text"].startswith("word ")
    assert bridge.streams == streams + 1


@pytest.mark.parametrize(
    ("message", "summary"),
    [
        (
            "calling endpoint 'voxtral' failed (SmithyHTTPError: HTTP/2 could not be negotiated: "
            "Http1_1)",
            "The endpoint URL answered without HTTP/2, which streaming needs: HTTP/2 needs "
            "https://, so check that --endpoint-url starts with https://.",
        ),
        (
            "ModelError from endpoint 'voxtral' (container status None): Could not open a "
            "WebSocket to the model container "
            "at ws://127.0.0.1:9080/invocations-bidirectional-stream: [Errno 111] Connect call "
            "failed ('127.0.0.1', 9080).. "
            "Is the container healthy? See arn:aws:logs:us-east-1:123456789012:log-group:x",
            "SageMaker endpoint voxtral could not reach its model container. Check that the "
            "endpoint is in service and its CloudWatch logs, then press Record again.",
        ),
        (
            "the page sent a bad message: an audio frame of 6 bytes is not whole float32 samples",
            "The recording was stopped: the page sent a bad message: an audio frame of 6 bytes is "
            "not whole float32 samples.",
        ),
        (
            "the endpoint reported an error (invalid_audio): bad base64; see the endpoint's "
            "CloudWatch logs",
            "The endpoint reported an error (invalid_audio): bad base64.",
        ),
        (
            # SonicError's
            "Sonic endpoint 'sonic-tts' refused the request: ModelError (status 422): voice not "
            "found. Sonic rejected the request as malformed (HTTP 422): check the voice ID",
            "SageMaker endpoint voxtral refused the request (422: voice not found). Check the "
            "voice ID "
            "and the text.",
        ),
    ],
)
def test_errors_read_as_one_line_in_the_users_words(message, summary):
    summarized = mic.summarize_error(message, "SageMaker endpoint voxtral")
    assert summarized == summary
    assert "\n" not in summarized and "arn:aws" not in summarized and summarized.count("retry") <= 1


# ---- "Recording" only once the endpoint accepted the stream --------------------------------------


async def record_held(url: str, bridge, seconds: float, release: bool) -> tuple[list[dict], int]:
    """Send ``seconds`` of tone and Stop while ``bridge`` holds its first event (``bridge.gate``),
    then let it go if ``release``, and return every message up to the end (done or error) and the
    number of samples sent."""
    client = await PageClient.connect(url)
    await client.start()
    audio = tone(seconds)
    step = RATE_HZ // 10
    for start in range(0, len(audio), step):  # 1 s, under MAX_AHEAD_S: sent at once
        await client.connection.send(audio[start : start + step].tobytes())
    await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
    deadline = time.monotonic() + LIVENESS_S
    while (
        not bridge.held and time.monotonic() < deadline
    ):  # the stream is open, its first event held back
        await asyncio.sleep(0.01)
    assert bridge.held == 1
    if release:
        bridge.gate.set()
    from websockets.exceptions import ConnectionClosed

    with contextlib.suppress(ConnectionClosed):
        while (await client.next(LIVENESS_S))["type"] not in ("done", "error"):
            pass
    return client.messages, len(audio)


def test_started_comes_at_the_endpoints_first_event_and_the_audio_sent_before_it_is_all_transcribed(
    quiet_page,
):
    bridge, url = quiet_page
    bridge.gate = threading.Event()
    messages, samples = asyncio.run(record_held(url, bridge, 1.0, release=True))
    assert messages[0]["type"] == "started" and re.fullmatch(
        r"ws://127\.0\.0\.1:\d+/invocations-bidirectional-stream", messages[0]["target"]
    ), messages[0]
    assert [message["type"] for message in messages[1:-1]] == ["transcript"] * (len(messages) - 2)
    assert messages[-1]["type"] == "done" and messages[-1]["text"].startswith("word ")
    assert (
        abs(bridge.audio_bytes // 2 - expected_16k_samples(samples)) <= 1
    )  # nothing lost while it waited


class WatchedStream:
    """What the watchdog reads of a recording (MicTranscriber's fields), set by hand."""

    def __init__(self, first_sent_at: float | None, audio_ended_at: float | None) -> None:
        self.accepted = asyncio.Event()
        self.first_sent_at, self.audio_ended_at, self.last_answer_at = (
            first_sent_at,
            audio_ended_at,
            None,
        )


@pytest.mark.parametrize(
    ("first_sent_at", "audio_ended_at", "limit_s"),
    [
        (0.0, None, "10"),  # recording: the first answer's deadline
        (
            None,
            0.0,
            "15",
        ),  # Stop pressed before the stream took any audio: Stop's deadline, the same diagnosis
        (6.0, 0.0, "15"),  # Stop's deadline (15 s) passes before the first answer's (16 s)
        (0.0, 1.0, "10"),  # the first answer's deadline (10 s) passes before Stop's (16 s)
    ],
)
def test_a_stream_never_accepted_is_reported_as_not_accepted_whichever_deadline_passes(
    first_sent_at, audio_ended_at, limit_s, monkeypatch
):
    """With production's deadlines (first answer 10 s after the first audio, final 15 s after Stop)
    and a clock the test moves: a stream that never accepted is reported as such, never as one that
    "stopped answering" (the page test below got that message once in CI, under load: the stream
    opened after Stop, so Stop's deadline came first)."""
    monkeypatch.setattr(mic, "WATCHDOG_TICK_S", 0)
    now = [0.0]

    def clock() -> float:
        now[0] += 0.5
        return now[0]

    with pytest.raises(mic.StreamStalled) as stalled:
        asyncio.run(
            mic.watch(
                WatchedStream(first_sent_at, audio_ended_at),
                RecordingPage(),
                "ws://endpoint",
                clock,
            )
        )
    assert str(stalled.value) == (
        f"ws://endpoint did not accept the stream: nothing came back in {limit_s} s. Check "
        "that the endpoint is in service and its logs, then press Record again."
    )


def test_a_stream_that_never_accepts_ends_in_one_error_and_never_says_started(quiet_page):
    bridge, url = quiet_page
    bridge.gate = threading.Event()  # never set: the stream is open but the endpoint never answers
    try:
        messages, _ = asyncio.run(record_held(url, bridge, 1.0, release=False))
    finally:
        bridge.gate.set()
    assert [message["type"] for message in messages] == ["error"], messages
    assert re.fullmatch(
        r"ws://127\.0\.0\.1:\d+/invocations-bidirectional-stream did not accept the stream: "
        r"nothing came back in 1 s\. Check that the endpoint is in service and its logs, then "
        r"press Record again\.",
        messages[0]["summary"],
    ), messages[0]


def test_a_refused_stream_ends_in_one_error_and_never_says_started(quiet_page):
    """The bridge accepts every WebSocket at once and refuses with an error event when vLLM is not
    reachable."""
    bridge, url = quiet_page
    bridge.gate = threading.Event()
    bridge.refusal = bridge.REFUSAL
    messages, _ = asyncio.run(record_held(url, bridge, 1.0, release=True))
    assert [message["type"] for message in messages] == ["error"], messages
    assert messages[0]["message"] == (
        "the endpoint reported an error (upstream_unavailable): the model server is not "
        "reachable (Connect call failed); retry later; the model server is not "
        "reachable (still loading, or crashed); retry in a minute"
    )
    assert messages[0]["summary"] == (
        "The endpoint reported an error (upstream_unavailable): the model server is not "
        "reachable (Connect call failed)."
    )
