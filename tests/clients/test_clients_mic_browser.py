"""``voicectl mic`` in a real browser: Debian's Chromium, headless, driven by Playwright for Python with the system
browser (never a downloaded build). Chromium's fake microphone plays a speech WAV made at test time (espeak-ng, else
the committed recording) into the page, which streams it through the real bridge to the fake vLLM, all on loopback.

Skipped, with the reason, when Chromium, Playwright or Gradio is missing; ``.ci/run`` installs them. Set
``VOICECTL_MIC_SCREENSHOT=PATH`` to also save the page after a recording there (``make mic-screenshot`` retakes
``docs/mic-page.png``). The figures the run saw (time to the first transcript text) print with ``pytest -s``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.clients.conftest import RECORDING, Servers, client_parser
from voicectl.local.fake_vllm import free_port
from voicectl import mic

BROWSER_ENV = "VOICECTL_TEST_CHROMIUM"
"""Path of the Chromium binary to drive; by default the first of :data:`CHROMIUM_NAMES` on PATH."""

CHROMIUM_NAMES = ("chromium", "chromium-browser")

SCREENSHOT_ENV = "VOICECTL_MIC_SCREENSHOT"

SENTENCE = "Hello from SageMaker. Streaming speech to text."
"""What the fake microphone says; the fake vLLM answers each 128 ms append with its next word."""

CHROMIUM_FLAGS = (
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",  # no update checks, field trials or safe-browsing lists: loopback only
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
    "--use-fake-device-for-media-stream",
)

RECORD_S = 2.0
"""Seconds of microphone audio per recording (below the WAV's 3.66 s, so the fake microphone does not loop)."""

CLOSE_WITHIN_S = 1.0
"""The stream to vLLM must be closed this soon after the page goes away (issue 15)."""


def chromium_path() -> str | None:
    return os.environ.get(BROWSER_ENV) or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="Chromium is not installed (apt-get install chromium, as .ci/run does; or set VOICECTL_TEST_CHROMIUM)",
)


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> Path:
    """The fake microphone's WAV: :data:`SENTENCE` spoken by espeak-ng now, else the committed espeak-ng recording."""
    path = tmp_path_factory.mktemp("microphone") / "speech.wav"
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        shutil.copyfile(RECORDING, path)
    else:
        subprocess.run([espeak, "-v", "en-us", "-s", "160", "-w", str(path), SENTENCE], check=True, timeout=30)
    return path


@pytest.fixture(scope="module")
def browser(speech_wav) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (make test installs "
                                   "requirements-mic.lock)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True,
            args=[*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={speech_wav}"],
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Servers, str]]:
    """The fake vLLM, the bridge and the mic page in front of them; yields (servers, page URL)."""
    pytest.importorskip("gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)")
    words = tuple(f"{word} " for word in SENTENCE.split())
    with Servers(deltas=words, generate=True) as servers:
        args = client_parser().parse_args(["mic", "--url", servers.url, "--port", str(free_port())])
        with mic.serve(args) as url:
            yield servers, url


def report(request, capsys, figure: str) -> None:
    """Print a figure the run measured, with ``pytest -s`` only (figures are not assertions)."""
    if request.config.getoption("capture") == "no":
        with capsys.disabled():
            print(f"\nmic page in Chromium: {figure}")


def recorder_state(page) -> dict:
    """The recorder's dataset and the text of its parts."""
    return page.evaluate("""() => {
        const root = document.querySelector(".voicectl-recorder");
        const text = (name) => root.querySelector(`[data-part="${name}"]`).textContent;
        return {...root.dataset, status: text("status"), error: text("error"), transcript: text("transcript"),
                figures: text("figures"), recordDisabled: root.querySelector('[data-part="record"]').disabled,
                stopDisabled: root.querySelector('[data-part="stop"]').disabled};
    }""")


def wait_until(predicate, timeout_s: float, step_s: float = 0.01):
    """Poll ``predicate`` until it returns a true value (returned) or ``timeout_s`` passes (AssertionError)."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"not true within {timeout_s} s"
        time.sleep(step_s)
    return value


def pcm16_at_16k(frames: list[bytes], rate_hz: int) -> bytes:
    """What the page's float32 frames become on the way to vLLM: soxr's streaming resampler (the same settings as
    ``voicectl.mic``) flushed at the end, then PCM16."""
    import soxr

    from voicectl.audio import RESAMPLER_QUALITY, float_to_pcm16

    resampler = soxr.ResampleStream(rate_hz, 16_000, 1, dtype="float32", quality=RESAMPLER_QUALITY)
    parts = [resampler.resample_chunk(np.frombuffer(frame, dtype="<f4")) for frame in frames]
    parts.append(resampler.resample_chunk(np.zeros(0, np.float32), last=True))
    return float_to_pcm16(np.concatenate(parts))


def assert_is_the_speech(pcm16: bytes, wav: Path, window_s: float = 0.25) -> None:
    """Most stretches of ``pcm16`` (16 kHz) that are not silence are found in ``wav`` (looped): it is the fake
    microphone's speech, not silence or noise. Each window is aligned on its own, because a loaded machine can make
    Chromium's fake capture skip or repeat a few milliseconds (the page's and the server's own integrity is checked
    sample for sample against the frames the page sent)."""
    import soundfile
    import soxr

    received = np.frombuffer(pcm16, dtype="<i2").astype(np.float64) / 32768.0
    source, rate_hz = soundfile.read(wav, dtype="float64", always_2d=True)
    reference = soxr.resample(source.mean(axis=1), rate_hz, 16_000)
    looped = np.tile(reference, int(np.ceil(len(received) / len(reference))) + 2)
    window = int(window_s * 16_000)
    size = 1 << int(np.ceil(np.log2(len(looped) + window)))
    spectrum = np.fft.rfft(looped, size)
    energy = np.concatenate([[0.0], np.cumsum(looped**2)])
    matched = speech = 0
    for start in range(0, len(received) - window + 1, window):
        got = received[start:start + window]
        if np.sqrt(np.mean(got**2)) < 0.01:
            continue  # silence between words matches anywhere
        speech += 1
        correlation = np.fft.irfft(spectrum * np.conj(np.fft.rfft(got, size)), size)[:len(looped) - window]
        reference_norms = np.sqrt(np.maximum(energy[window:len(looped)] - energy[:len(looped) - window], 0.0))
        audible = reference_norms > 0.01 * np.sqrt(window)  # rms over 0.01: silent stretches would divide by ~0
        similarity = correlation[audible] / (reference_norms[audible] * np.linalg.norm(got))
        matched += float(np.max(similarity)) > 0.9
    assert speech >= 4 and matched >= 0.75 * speech, f"{matched} of {speech} windows of speech found in the WAV"


def test_the_page_shows_the_transcript_while_recording_and_sends_every_sample(stack, browser, speech_wav, capsys,
                                                                               tmp_path, request):
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page(viewport={"width": 960, "height": 430})
    sent: list[str | bytes] = []  # every WebSocket frame the page sends (Chromium's DevTools protocol reports them)
    page.on("websocket", lambda websocket: websocket.on("framesent", lambda payload: sent.append(payload)))
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").wait_for()
        assert recorder_state(page)["state"] == "idle"
        clicked = time.monotonic()
        page.get_by_role("button", name="Record").click()
        while_recording = wait_until(lambda: (state := recorder_state(page))["transcript"] and state, 10)
        first_text_s = time.monotonic() - clicked
        assert while_recording["state"] == "recording"
        assert while_recording["status"].startswith("Recording: streaming to ws://127.0.0.1:")
        assert while_recording["transcript"].startswith("Hello ")
        wait_until(lambda: int((state := recorder_state(page))["samples"]) >= RECORD_S * int(state["sampleRate"]), 10)
        page.get_by_role("button", name="Stop").click()
        done = wait_until(lambda: (state := recorder_state(page))["state"] == "done" and state, 10)
        page.screenshot(path=tmp_path / "mic-page.png")
        if screenshot := os.environ.get(SCREENSHOT_ENV):
            page.screenshot(path=screenshot)
    finally:
        page.close()
    report(request, capsys, f"first transcript text {first_text_s:.2f} s after Record")

    (session,) = servers.vllm.sessions[sessions_before:]
    samples, rate_hz = int(done["samples"]), int(done["sampleRate"])
    frames = [frame for frame in sent if isinstance(frame, bytes)]
    assert [json.loads(text) for text in sent if isinstance(text, str)] == [
        {"type": "start", "sample_rate_hz": rate_hz}, {"type": "stop", "samples": samples}]
    assert sum(len(frame) for frame in frames) == samples * 4  # the page sent every sample it captured
    assert bytes(session.audio) == pcm16_at_16k(frames, rate_hz)  # and vLLM got all of them, the last ones included
    assert abs(len(session.audio) // 2 - samples * 16_000 / rate_hz) <= 1
    assert_is_the_speech(bytes(session.audio), speech_wav)
    received_samples = len(session.audio) // 2
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert done["transcript"] == session.text and done["error"] == ""
    assert re.fullmatch(r"time to first delta: \d+\.\d{3} s; real-time factor: \d+\.\d{3}; audio sent: "
                        + re.escape(f"{received_samples / 16_000:.3f}") + " s", done["figures"])
    assert (done["recordDisabled"], done["stopDisabled"]) == (False, True)
    assert re.search(r"voicectl mic: recording \d+ done: time to first delta", capsys.readouterr().err)


@pytest.mark.parametrize("leave", ["close", "reload"])
def test_leaving_the_page_closes_the_stream_to_vllm_within_a_second(stack, browser, capsys, leave, request):
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page()
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").click()
        wait_until(lambda: recorder_state(page)["state"] == "recording", 10)
        session = wait_until(lambda: len(servers.vllm.sessions) > sessions_before and servers.vllm.sessions[-1], 5)
        wait_until(lambda: session.audio_bytes > 0, 5)
        left = time.monotonic()
        page.close() if leave == "close" else page.reload()
        wait_until(session.closed.is_set, 5, step_s=0.005)
        closed_after_s = time.monotonic() - left
        report(request, capsys, f"stream to vLLM closed {closed_after_s:.3f} s after the page's {leave}")
        if leave == "reload":  # a fresh page, ready for a new recording
            page.get_by_role("button", name="Record").wait_for()
            wait_until(lambda: recorder_state(page)["state"] == "idle", 10)
    finally:
        page.close()
    assert closed_after_s < CLOSE_WITHIN_S
    assert not any(event.get("final") for event in session.events)  # abandoned, not finished
    assert "abandoned: the page's WebSocket closed" in capsys.readouterr().err


def test_a_down_container_shows_one_steady_error_and_stops_recording(browser, capsys):
    pytest.importorskip("gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)")
    port = free_port()
    args = client_parser().parse_args(["mic", "--url", f"ws://127.0.0.1:{port}/invocations-bidirectional-stream",
                                       "--port", str(free_port())])
    with mic.serve(args) as url:
        page = browser.new_page()
        try:
            page.goto(url)
            page.get_by_role("button", name="Record").click()
            wait_until(lambda: recorder_state(page)["state"] == "error", 10)
            seen = []
            for _ in range(8):  # the next 0.6 s (the old page flickered every 0.25 s): one error, no audio
                seen.append(recorder_state(page))
                time.sleep(0.075)
        finally:
            page.close()
    assert all(state == seen[0] for state in seen), seen
    error = seen[0]["error"]
    assert error.startswith(f"cannot open a WebSocket to ws://127.0.0.1:{port}/invocations-bidirectional-stream (")
    assert f"`curl http://127.0.0.1:{port}/ping` must answer 200" in error
    assert "HOST:PORT" not in error and error == error.strip()
    assert (seen[0]["recordDisabled"], seen[0]["stopDisabled"]) == (False, True)
    assert seen[0]["status"].startswith("Stopped by the error below")
    err = capsys.readouterr().err
    assert err.count("failed:") == 1 and f"voicectl mic: recording 1 failed: {error}\n" in err
