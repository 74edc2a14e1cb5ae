"""``voicectl mic``'s Speak panel, through the local front door to the Sonic stand-in: closing the
page (in a real browser, tests/e2e/browser_testkit.py) or its WebSocket while Sonic speaks
cancels the request at once, so pages closed mid-speech do not hold the container's generation
slots until their audio would have ended.

Every wait is on a condition, with a generous timeout; nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.browser_testkit import chromium, requires_chromium, wait_until
from tests.e2e.local.conftest import RECORDED_SPEECH, SONIC
from tests.unit.voice_client.clients_testkit import client_parser, serve_mic_page
from voice_client import mic, mic_speak
from voice_devtools.local.fake_sonic import MAX_GENERATIONS
from voice_devtools.local.fake_vllm import free_port

LONG_TEXT = "This sentence is spoken again and again, longer than anyone listens. " * 8
"""Enough text for the stand-in's longest audio (``fake_sonic.MAX_AUDIO_S``, 30 s)."""

WAIT_S = 60.0
"""Generous bound of each wait (a condition, not a target); above ``MAX_AUDIO_S``: a request left
running to its end is told apart by its audio, not by the wait."""

SPEAK_STATE = """() => {
  const root = document.querySelector(".voicectl-recorder");
  const text = (name) => root.querySelector(`[data-part="${name}"]`).textContent;
  return {state: root.dataset.speakState || "", samples: Number(root.dataset.speakSamples || 0),
          status: text("speak-status"), error: text("speak-error-summary")};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(RECORDED_SPEECH) as browser:  # Speak needs no microphone; Chromium fakes one
        yield browser


@pytest.fixture
def mic_page(client_env, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The mic page, its Speak panel calling the Sonic stand-in through the front door."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", client_env.url)
    bridge = f"ws://127.0.0.1:{client_env.bridge.port}/invocations-bidirectional-stream"
    args = client_parser().parse_args(
        [
            "mic",
            "--url",
            bridge,
            "--port",
            str(free_port()),
            "--sonic-endpoint",
            SONIC,
            "--voice",
            "local-voice",
        ]
    )
    with serve_mic_page(args) as url:
        yield url


def speak(browser: Any, url: str, text: str) -> Any:
    """A new tab on the mic page, ``text`` typed into Speak, Speak pressed."""
    page = browser.new_page()
    page.goto(url)
    page.get_by_role("textbox", name="Text to speak").fill(text)
    page.get_by_role("button", name="Speak").click()
    return page


def test_closing_the_speak_socket_mid_speech_cancels_sonic(client_env, mic_page, capsys):
    import websockets

    async def speak_then_leave() -> tuple[Any, Any]:
        url = mic_page.replace("http://", "ws://") + mic.SPEAK_PATH
        async with websockets.connect(url, origin=mic_page) as socket:
            await socket.send(json.dumps({"type": "speak", "text": LONG_TEXT}))
            return json.loads(await socket.recv()), await socket.recv()

    sonic = client_env.sonic
    sonic.pace = 1.0  # real time: the request would stream for 30 s
    first, audio = asyncio.run(speak_then_leave())
    wait_until(lambda: sonic.generations == 0, WAIT_S)
    (call,) = sonic.calls
    assert first == {"type": "audio", "sample_rate_hz": mic_speak.SPEAK_SAMPLE_RATE_HZ}
    assert isinstance(audio, bytes) and audio == bytes(call.audio[: len(audio)])
    assert call.cancelled and len(call.audio) < call.full_audio_bytes / 2, len(call.audio)
    assert "voicectl mic: speak abandoned: the page's WebSocket closed" in capsys.readouterr().err


@requires_chromium
def test_closing_pages_mid_speech_cancels_sonic_and_frees_every_slot(
    client_env, mic_page, browser, capsys
):
    sonic = client_env.sonic
    sonic.pace = 1.0  # real time: each request would stream for 30 s
    pages = [speak(browser, mic_page, LONG_TEXT) for _ in range(MAX_GENERATIONS)]
    try:
        wait_until(lambda: all(page.evaluate(SPEAK_STATE)["samples"] > 0 for page in pages), WAIT_S)
        busy = sonic.generations
        calls = list(sonic.calls)
    finally:
        for page in pages:
            page.close()
    wait_until(lambda: sonic.generations == 0, WAIT_S)
    after = speak(browser, mic_page, "Hello again.")
    try:
        spoken = wait_until(
            lambda: (now := after.evaluate(SPEAK_STATE))["state"] in ("done", "error") and now,
            WAIT_S,
        )
    finally:
        after.close()

    assert busy == MAX_GENERATIONS  # the four pages held every slot while they spoke
    assert len(calls) == MAX_GENERATIONS
    assert [call.request["transcript"] for call in calls] == [LONG_TEXT.strip()] * len(calls)
    for call in calls:  # each ended by its page's close, long before its audio's end
        assert call.cancelled, (call.client_closed, len(call.audio), call.full_audio_bytes)
        assert len(call.audio) < call.full_audio_bytes / 2
    assert spoken["state"] == "done" and spoken["error"] == "", spoken  # a slot was free again
    last = sonic.calls[-1]
    assert last.request["transcript"] == "Hello again." and not last.client_closed
    assert len(last.audio) == last.full_audio_bytes == spoken["samples"] * 2
    err = capsys.readouterr().err
    assert err.count("voicectl mic: speak abandoned: the page's WebSocket closed") == len(calls)
