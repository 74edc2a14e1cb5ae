"""voice_client.mic without a browser: launch settings, the optional dependency, and the page's
recording WebSocket served by the real Gradio app, in front of the real bridge and the fake vLLM
(loopback only).

The page's recorder (JavaScript) in real Chromium:
``tests/e2e/clients/test_clients_mic_browser.py``; the command (``voicectl mic``):
``tests/unit/voicectl/commands/test_mic.py``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.unit.voice_client.clients_testkit import Servers, serve_mic_page
from tests.unit.voice_client.mic_testkit import (
    LIVENESS_S,
    RATE_HZ,
    PageClient,
    expected_16k_samples,
    on_servers,
    record_held,
    recording_url,
    tone,
)
from voice_client import mic, mic_recording
from voice_client.transcribe import TranscriptionTarget
from voice_devtools.local.fake_vllm import free_port
from voicectl.cli import UsageError

# ---- settings and the optional dependency ------------------------------------------------------


def test_launch_binds_loopback_and_shares_only_with_share():
    default = mic.launch_kwargs(mic.MicSettings(TranscriptionTarget(endpoint="voxtral")))
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
    shared = mic.launch_kwargs(
        mic.MicSettings(TranscriptionTarget(endpoint="voxtral"), share=True, port=9000)
    )
    assert (shared["server_name"], shared["server_port"], shared["share"]) == (
        "127.0.0.1",
        9000,
        True,
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"port": 0},
            "--port must be a TCP port from 1 to 65535, got 0",
        ),
        (
            {"session_limit_s": float("nan")},
            "--session-limit must be a finite number of seconds, at least 1 ",
        ),
        (
            {"target": TranscriptionTarget(url="http://127.0.0.1:8080/x")},
            "--url must start with ws:// or wss://, got 'http://127.0.0.1:8080/x'",
        ),
        (
            {"target": TranscriptionTarget()},
            "give one target: a SageMaker endpoint (--endpoint) or a bridge (--url)",
        ),
    ],
)
def test_settings_the_page_cannot_serve_are_refused_before_gradio_is_imported(
    settings, message, monkeypatch
):
    monkeypatch.setattr(mic, "import_gradio", lambda: pytest.fail("gradio was imported"))
    arguments = {"target": TranscriptionTarget(url="ws://127.0.0.1:8080/x"), **settings}
    with pytest.raises(UsageError) as refused, mic.serve(mic.MicSettings(**arguments)):
        pass
    assert str(refused.value).startswith(message)


def test_the_readmes_and_the_mic_command_give_the_same_install_hint():
    """`make mic-deps` (pinned, in a checkout) everywhere; `pip install '.[mic]'` only for a
    pip-installed project."""

    root = ROOT
    assert "`make mic-deps`" in mic.INSTALL_HINT and "`make mic-deps`" in mic.__doc__
    for readme in (root / "docs" / "clients.md", root / "voicectl" / "README.md"):
        text = readme.read_text()
        assert "make mic-deps" in text, readme
        assert "once `pip install '.[mic]'` is done" not in text, readme


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
        with serve_mic_page(args) as url:
            yield servers, recording_url(url)


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
    from voice_client import transcribe

    servers, _ = page
    entered, exited = [], []

    @contextlib.asynccontextmanager
    async def counted_open_target(target):
        entered.append(time.monotonic())
        async with transcribe.open_target(target) as opener:
            yield opener
        exited.append(time.monotonic())

    monkeypatch.setattr(mic, "open_target", counted_open_target)
    settings = mic.MicSettings(TranscriptionTarget(url=servers.url), port=free_port())

    async def record(url: str) -> dict:
        client = await PageClient.connect(url)
        await client.start()
        await client.connection.send(tone(0.3).tobytes())
        await client.connection.send(json.dumps({"type": "stop", "samples": len(tone(0.3))}))
        return await client.until("done")

    with mic.serve(settings, log=lambda line: None) as page_url:
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

    with serve_mic_page(args) as page_url:
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
            for _ in range(int(mic_recording.MAX_AHEAD_S) + 30):
                await client.connection.send(second)
        return await client.until("error"), await client.closed_by_server()

    error, closed = asyncio.run(flood())
    assert re.fullmatch(
        r"the page sent \d+\.\d s of audio in \d+\.\d s, faster than a microphone records "
        r"\(at most 3 s ahead of real time\)",
        error["message"],
    ), error
    assert closed


# ---- "Recording" only once the endpoint accepted the stream --------------------------------------


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
