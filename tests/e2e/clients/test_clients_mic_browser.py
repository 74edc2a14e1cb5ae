"""``voicectl mic`` in a real browser: Debian's Chromium, headless, driven by Playwright for Python
with the system browser (never a downloaded build). Chromium's fake microphone plays a speech WAV
made at test time (espeak-ng, else the committed recording) into the page, which streams it through
the real bridge to the fake vLLM, all on loopback.

Skipped, with the reason, when Chromium, Playwright or Gradio is missing; ``.ci/run`` installs them.
Set ``VOICECTL_MIC_SCREENSHOT=PATH`` to also save the page after a recording there (``make
mic-screenshot`` retakes ``docs/mic-page.png``). The figures the run saw (time to the first
transcript text) print with ``pytest -s``. Hostile pages against the mic page:
test_clients_mic_browser_attacks.py; the shared fixtures: mic_browser_testkit.py.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.browser_testkit import requires_chromium, wait_until
from tests.e2e.clients.mic_browser_testkit import (  # noqa: F401 (fixtures)
    RECORD_S,
    fixture_browser,
    fixture_sonic_runtime,
    fixture_speech_wav,
    fixture_stack,
    recorder_state,
    report,
)
from tests.unit.voice_client.clients_testkit import QuietBridge, client_parser, serve_mic_page
from voice_client import mic_recording
from voice_devtools.local.fake_vllm import free_port

SCREENSHOT_ENV = "VOICECTL_MIC_SCREENSHOT"

pytestmark = requires_chromium


def pcm16_at_16k(frames: list[bytes], rate_hz: int) -> bytes:
    """What the page's float32 frames become on the way to vLLM: soxr's streaming resampler (the
    same settings as ``voice_client.mic``) flushed at the end, then PCM16."""
    import soxr

    from voice_client.audio import RESAMPLER_QUALITY, float_to_pcm16

    resampler = soxr.ResampleStream(rate_hz, 16_000, 1, dtype="float32", quality=RESAMPLER_QUALITY)
    parts = [resampler.resample_chunk(np.frombuffer(frame, dtype="<f4")) for frame in frames]
    parts.append(resampler.resample_chunk(np.zeros(0, np.float32), last=True))
    return float_to_pcm16(np.concatenate(parts))


def assert_is_the_speech(pcm16: bytes, wav: Path, window_s: float = 0.25) -> None:
    """Most stretches of ``pcm16`` (16 kHz) that are not silence are found in ``wav`` (looped): it
    is the fake microphone's speech, not silence or noise. Each window is aligned on its own,
    because a loaded machine can make Chromium's fake capture skip or repeat a few milliseconds (the
    page's and the server's own integrity is checked sample for sample against the frames the page
    sent)."""
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
        got = received[start : start + window]
        if np.sqrt(np.mean(got**2)) < 0.01:
            continue  # silence between words matches anywhere
        speech += 1
        correlation = np.fft.irfft(spectrum * np.conj(np.fft.rfft(got, size)), size)[
            : len(looped) - window
        ]
        reference_norms = np.sqrt(
            np.maximum(energy[window : len(looped)] - energy[: len(looped) - window], 0.0)
        )
        audible = reference_norms > 0.01 * np.sqrt(
            window
        )  # rms over 0.01: silent stretches would divide by ~0
        similarity = correlation[audible] / (reference_norms[audible] * np.linalg.norm(got))
        matched += float(np.max(similarity)) > 0.9
    assert speech >= 4 and matched >= 0.75 * speech, (
        f"{matched} of {speech} windows of speech found in the WAV"
    )


def test_the_page_shows_the_transcript_while_recording_and_sends_every_sample(
    stack, browser, speech_wav, capsys, tmp_path, request
):
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page(viewport={"width": 960, "height": 860})
    sent: list[
        str | bytes
    ] = []  # every WebSocket frame the page sends (Chromium's DevTools protocol reports them)
    page.on(
        "websocket",
        lambda websocket: websocket.on("framesent", lambda payload: sent.append(payload)),
    )
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").wait_for()
        assert recorder_state(page)["state"] == "idle"
        clicked = time.monotonic()
        page.get_by_role("button", name="Record").click()
        while_recording = wait_until(
            lambda: (state := recorder_state(page))["transcript"] and state, 10
        )
        first_text_s = time.monotonic() - clicked
        assert while_recording["state"] == "recording"
        assert while_recording["status"].startswith("Recording: streaming to ws://127.0.0.1:")
        assert while_recording["transcript"].startswith("Hello ")
        wait_until(
            lambda: (
                int((state := recorder_state(page))["samples"])
                >= RECORD_S * int(state["sampleRate"])
            ),
            10,
        )
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
        {"type": "start", "sample_rate_hz": rate_hz},
        {"type": "stop", "samples": samples},
    ]
    assert (
        sum(len(frame) for frame in frames) == samples * 4
    )  # the page sent every sample it captured
    assert bytes(session.audio) == pcm16_at_16k(
        frames, rate_hz
    )  # and vLLM got all of them, the last ones included
    assert abs(len(session.audio) // 2 - samples * 16_000 / rate_hz) <= 1
    assert_is_the_speech(bytes(session.audio), speech_wav)
    received_samples = len(session.audio) // 2
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert done["transcript"] == session.text and done["error"] == ""
    assert re.fullmatch(
        r"time to first delta: \d+\.\d{3} s; real-time factor: \d+\.\d{3}; audio sent: "
        + re.escape(f"{received_samples / 16_000:.3f}")
        + " s",
        done["figures"],
    )
    assert (done["recordDisabled"], done["stopDisabled"]) == (False, True)
    assert re.search(
        r"voicectl mic: recording \d+ done: time to first delta", capsys.readouterr().err
    )


@pytest.mark.parametrize("leave", ["close", "reload"])
def test_leaving_the_page_closes_the_stream_to_vllm_within_a_second(
    stack, browser, capsys, leave, request
):
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page()
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").click()
        wait_until(lambda: recorder_state(page)["state"] == "recording", 10)
        session = wait_until(
            lambda: len(servers.vllm.sessions) > sessions_before and servers.vllm.sessions[-1], 5
        )
        wait_until(lambda: session.audio_bytes > 0, 5)
        left = time.monotonic()
        page.close() if leave == "close" else page.reload()
        wait_until(
            session.closed.is_set, 10, step_s=0.005
        )  # closed by the page's leaving; a liveness bound
        closed_after_s = time.monotonic() - left
        report(
            request,
            capsys,
            f"stream to vLLM closed {closed_after_s:.3f} s after the page's {leave}",
        )
        if leave == "reload":  # a fresh page, ready for a new recording
            page.get_by_role("button", name="Record").wait_for()
            wait_until(lambda: recorder_state(page)["state"] == "idle", 10)
    finally:
        page.close()
    assert not any(event.get("final") for event in session.events)  # abandoned, not finished
    assert "abandoned: the page's WebSocket closed" in capsys.readouterr().err


def test_a_down_container_shows_one_steady_error_and_stops_recording(browser, capsys):
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
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
    with serve_mic_page(args) as url:
        page = browser.new_page()
        try:
            page.goto(url)
            page.get_by_role("button", name="Record").click()
            wait_until(lambda: recorder_state(page)["state"] == "error", 10)
            seen = []
            for _ in range(
                8
            ):  # the next 0.6 s (the old page flickered every 0.25 s): one error, no audio
                seen.append(recorder_state(page))
                time.sleep(0.075)
        finally:
            page.close()
    assert all(state == seen[0] for state in seen), seen
    assert seen[0]["error"] == (
        f"ws://127.0.0.1:{port}/invocations-bidirectional-stream is not reachable. Check that "
        "the container is running, then press Record again."
    )
    error = seen[0]["errorDetail"]  # behind the details toggle
    assert error.startswith(
        f"cannot open a WebSocket to ws://127.0.0.1:{port}/invocations-bidirectional-stream ("
    )
    assert f"`curl http://127.0.0.1:{port}/ping` must answer 200" in error
    assert "HOST:PORT" not in error and error == error.strip()
    assert (seen[0]["recordDisabled"], seen[0]["stopDisabled"]) == (False, True)
    assert seen[0]["status"].startswith("Stopped by the error below")
    err = capsys.readouterr().err
    assert err.count("failed:") == 1 and f"voicectl mic: recording 1 failed: {error}\n" in err


LONG_RECORD_S = 120.0
"""A recording long enough for several generations (the client ends one at the first quiet chunk
after 30 s)."""


# two minutes of audio at the fake microphone's real-time pace (tests/e2e/conftest.py)
@pytest.mark.starts_first
def test_a_two_minute_recording_has_each_word_once(stack, browser):
    """After the first generation rollover the page once showed 2,364 words for ~949 spoken, because
    the fake's ``transcription.done`` carried the whole session and the client joins generation
    texts. Like the real vLLM, each generation's done text starts from zero: the transcript has
    exactly one word per word the fake vLLM said."""
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page()
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").click()
        wait_until(lambda: recorder_state(page)["state"] == "recording", 10)
        wait_until(
            lambda: (
                int((state := recorder_state(page))["samples"])
                >= LONG_RECORD_S * int(state["sampleRate"])
            ),
            LONG_RECORD_S + 60,
            step_s=0.5,
        )
        page.get_by_role("button", name="Stop").click()
        done = wait_until(lambda: (state := recorder_state(page))["state"] == "done" and state, 30)
    finally:
        page.close()
    sessions = servers.vllm.sessions[sessions_before:]
    said = [
        event["delta"]
        for session in sessions
        for event in session.sent
        if event["type"] == "transcription.delta"
    ]
    generations = [
        event
        for session in sessions
        for event in session.sent
        if event["type"] == "transcription.done"
    ]
    assert len(generations) >= 3  # two rollovers at least, then the final one
    assert done["transcript"].split() == "".join(said).split()
    assert len(done["transcript"].split()) == len(said)


# ---- what a user sees and hears ------------------------------------------------------------------

CONTRAST_SCRIPT = """
() => {
  const rgb = (color) => color.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const luminance = (color) => {
    const [r, g, b] = rgb(color).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05); };
  const background = (element) => {  // the first opaque background up the tree
    for (let node = element; node; node = node.parentElement) {
      const color = getComputedStyle(node).backgroundColor;
      if (!color.startsWith("rgba(0, 0, 0, 0)") && color !== "transparent") return color;
    }
    return "rgb(255, 255, 255)";
  };
  const root = document.querySelector(".voicectl-recorder");
  const result = {};
  for (const name of ["status", "timer", "transcript", "figures", "record", "stop", "copy"]) {
    const element = root.querySelector(`[data-part="${name}"]`);
    result[name] = ratio(getComputedStyle(element).color, background(element));
  }
  result.label = ratio(getComputedStyle(root.querySelector(".label")).color,
                       background(root.querySelector(".label")));
  const record = root.querySelector('[data-part="record"]');
  result.recordAgainstPage = ratio(background(record), background(record.parentElement));
  return result;
}
"""


def test_the_page_reads_for_everyone_and_keeps_what_was_said(stack, browser, tmp_path):
    """WCAG 2.1 AA contrast (4.5:1 text, 3:1 the button against the page) from computed styles; the
    transcript is a labelled log, not live itself, with only the new words in a polite live region;
    focus stays on a usable control through Record and Stop (pressed from the keyboard); the timer,
    the level meter and the microphone's name show while recording; the transcript can be copied and
    downloaded as text and as JSON with timings."""
    _servers, url = stack
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").wait_for()
        contrast = page.evaluate(CONTRAST_SCRIPT)
        transcript = page.get_by_role("log", name="Transcript")
        assert transcript.get_attribute("aria-live") == "off"
        live = page.locator('[data-part="announce"]')
        assert live.get_attribute("aria-live") == "polite"
        page.get_by_role("button", name="Record").focus()
        page.keyboard.press("Enter")
        wait_until(lambda: recorder_state(page)["state"] == "recording", 10)
        focused_while_recording = page.evaluate("document.activeElement.dataset.part")
        announced = set()
        while int((state := recorder_state(page))["samples"]) < RECORD_S * int(state["sampleRate"]):
            if state["announced"]:
                announced.add((state["announced"], state["transcript"]))
            time.sleep(0.05)
        page.keyboard.press("Enter")  # on Stop, which has the focus
        done = wait_until(lambda: (state := recorder_state(page))["state"] == "done" and state, 10)
        focused_when_done = page.evaluate("document.activeElement.dataset.part")
        page.get_by_role("button", name="Copy text").click()
        copied = page.evaluate("navigator.clipboard.readText()")
        with page.expect_download() as text_download:
            page.get_by_role("button", name="Download text").click()
        with page.expect_download() as json_download:
            page.get_by_role("button", name="Download JSON").click()
        downloaded_text = Path(text_download.value.path()).read_text()
        downloaded = json.loads(Path(json_download.value.path()).read_text())
        options = page.locator('[data-part="device"] option').all_text_contents()
    finally:
        context.close()
    assert (
        min(
            contrast[name]
            for name in (
                "status",
                "timer",
                "transcript",
                "figures",
                "label",
                "record",
                "stop",
                "copy",
            )
        )
        >= 4.5
    ), contrast
    assert contrast["recordAgainstPage"] >= 3.0, contrast
    assert (focused_while_recording, focused_when_done) == ("stop", "record")
    assert all(
        transcript.endswith(words) for words, transcript in announced
    )  # only the new words, at the end
    assert any(
        len(words) < len(transcript) for words, transcript in announced
    )  # not the whole text again
    assert (
        done["timer"] == f"0:{int(int(done['samples']) / int(done['sampleRate'])):02d}"
        and done["timer"] >= "0:02"
    )
    assert float(done["level"]) > 0.01  # the fake microphone's speech moved the meter
    assert done["device"] and "Default microphone" in options
    assert copied == done["transcript"] and downloaded_text == done["transcript"] + "\n"
    assert (
        downloaded["transcript"] == done["transcript"] and downloaded["figures"] == done["figures"]
    )
    assert downloaded["result"]["time_to_first_delta_s"] > 0 and downloaded[
        "sample_rate_hz"
    ] == int(done["sampleRate"])


def test_a_zero_length_recording_opens_no_stream(stack, browser):
    servers, url = stack
    sessions_before = len(servers.vllm.sessions)
    page = browser.new_page()
    opened = []
    page.on("websocket", lambda websocket: opened.append(websocket.url))
    try:
        page.goto(url)
        page.get_by_role("button", name="Record").wait_for()
        page.evaluate("""() => { const root = document.querySelector(".voicectl-recorder");
                                 root.querySelector('[data-part="record"]').click();
                                 root.querySelector('[data-part="stop"]').click(); }""")
        state = wait_until(
            lambda: (state := recorder_state(page))["state"] == "empty" and state, 10
        )
    finally:
        page.close()
    assert state["status"] == "Nothing was recorded, so nothing was sent. Press Record and speak."
    assert opened == [] and len(servers.vllm.sessions) == sessions_before
    assert (state["recordDisabled"], state["stopDisabled"]) == (False, True)


def sonic_reply(pcm16: bytes, parts: int) -> list[bytes]:
    """Sonic's newline-delimited JSON events for ``pcm16`` in ``parts`` chunks, then done."""
    import base64

    size = -(-len(pcm16) // parts)
    lines = [
        json.dumps(
            {
                "type": "chunk",
                "data": base64.b64encode(pcm16[i : i + size]).decode(),
                "done": False,
                "status_code": 206,
            }
        ).encode()
        + b"\n"
        for i in range(0, len(pcm16), size)
    ]
    return [*lines, json.dumps({"type": "done", "done": True, "status_code": 200}).encode() + b"\n"]


def test_the_speak_panel_plays_sonic_as_it_streams_and_shows_the_time_to_first_audio(
    stack, browser, sonic_runtime
):
    _, url = stack
    pcm16 = (np.sin(np.arange(44_100) / 8) * 8000).astype("<i2").tobytes()  # 1 s at 44.1 kHz
    sonic_runtime.reply_stream(sonic_reply(pcm16, 5))
    sonic_runtime.reply_raw(
        424,
        {"x-amzn-ErrorType": "ModelError", "Content-Type": "application/json"},
        json.dumps(
            {
                "Message": "Received client error (422) from primary",
                "OriginalStatusCode": 422,
                "OriginalMessage": "voice not found",
            }
        ).encode(),
    )
    page = browser.new_page()

    def state():
        return page.evaluate("""() => { const root = document.querySelector(".voicectl-recorder");
            const text = (name) => root.querySelector(`[data-part="${name}"]`).textContent;
            return {...root.dataset, status: text("speak-status"),
                    error: text("speak-error-summary"), detail: text("speak-error-detail")}; }""")

    try:
        page.goto(url)
        page.get_by_role("textbox", name="Text to speak").fill("Hello from SageMaker.")
        page.get_by_role("button", name="Speak").click()
        spoken = wait_until(lambda: (now := state()).get("speakState") == "done" and now, 20)
        page.get_by_role("button", name="Speak").click()
        refused = wait_until(lambda: (now := state()).get("speakState") == "error" and now, 20)
    finally:
        page.close()
    request = json.loads(sonic_runtime.requests[-2].body)
    assert sonic_runtime.requests[-2].path == "/endpoints/sonic-tts/invocations-response-stream"
    assert (
        request["transcript"] == "Hello from SageMaker." and request["voice"]["id"] == "local-voice"
    )
    assert int(spoken["speakSamples"]) == len(pcm16) // 2  # every sample reached the page's player
    assert re.fullmatch(
        r"Spoken: 1\.00 s of audio; first audio after \d+\.\d\d s\.", spoken["status"]
    )
    assert int(spoken["firstAudioMs"]) >= 0
    assert refused["status"] == "Not spoken: see the error below."
    assert "voice not found" in refused["detail"]
    assert refused["error"] == (
        "Sonic endpoint sonic-tts refused the request (422: voice not found). Check the voice "
        "ID and the text."
    )


def test_a_stream_that_stops_answering_shows_the_stall_then_one_error_and_the_next_recording_works(
    browser, monkeypatch
):
    """A frozen bridge looked exactly like "Recording" with no words, and a wedged stream left
    "Finishing the transcript..." forever. The watchdog's timeouts are shortened here; the states
    are asserted, not times."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    for name, value in {
        "FIRST_ANSWER_TIMEOUT_S": 2.0,
        "STALL_NOTICE_S": 1.0,
        "STALL_TIMEOUT_S": 3.0,
        "STOP_TIMEOUT_S": 2.0,
        "WATCHDOG_TICK_S": 0.05,
    }.items():
        monkeypatch.setattr(mic_recording, name, value)
    bridge = QuietBridge()
    bridge.answers = 3  # three words, then nothing
    with bridge.serving() as container:
        args = client_parser().parse_args(["mic", "--url", container, "--port", str(free_port())])
        with serve_mic_page(args) as url:
            page = browser.new_page()
            try:
                page.goto(url)
                page.get_by_role("button", name="Record").click()
                stalled = wait_until(
                    lambda: (state := recorder_state(page)).get("stalled") and state, 15
                )
                failed = wait_until(
                    lambda: (state := recorder_state(page))["state"] == "error" and state, 15
                )
                bridge.answers = None
                page.get_by_role("button", name="Record").click()
                wait_until(lambda: recorder_state(page)["transcript"], 10)
                page.get_by_role("button", name="Stop").click()
                done = wait_until(
                    lambda: (state := recorder_state(page))["state"] == "done" and state, 10
                )
            finally:
                page.close()
    assert stalled["state"] == "recording" and stalled["transcript"] == "word word word "
    assert re.fullmatch(
        r"No answer from the endpoint for \d+ s; still sending\. Press Stop to end, or wait\.",
        stalled["status"],
    )
    assert re.fullmatch(
        r"ws://\S+ stopped answering: nothing for 3 s while audio was sent\. Check that the "
        r"endpoint is in service and its logs, then press Record again\.",
        failed["error"],
    )
    assert failed["transcript"] == "word word word " and (
        failed["recordDisabled"],
        failed["stopDisabled"],
    ) == (False, True)
    assert done["transcript"].startswith("word ") and done["error"] == "" and bridge.streams == 2


STATE_LOG = """() => {
    const root = document.querySelector(".voicectl-recorder");
    window.voicectlStates = [root.dataset.state];
    new MutationObserver(() => {
        const states = window.voicectlStates;
        if (states[states.length - 1] !== root.dataset.state) states.push(root.dataset.state);
    }).observe(root, {attributes: true, attributeFilter: ["data-state"]});
}"""
"""Logs every change of the recorder's state (each state once per run of it), so a state shown for
an instant is seen too."""


def test_the_page_shows_connecting_until_accepted_and_a_refused_stream_never_shows_recording(
    browser,
):
    """ "Recording: streaming to ..." must not show before the endpoint accepted the call, only once
    it has. The fake container holds its first event until the test lets it go: the states are
    asserted in order, not timed."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    bridge = QuietBridge()
    with bridge.serving() as container:
        args = client_parser().parse_args(["mic", "--url", container, "--port", str(free_port())])
        with serve_mic_page(args) as url:
            page = browser.new_page()
            try:
                page.goto(url)
                page.get_by_role("button", name="Record").wait_for()
                page.evaluate(STATE_LOG)
                bridge.gate = threading.Event()
                page.get_by_role("button", name="Record").click()
                wait_until(
                    lambda: bridge.held == 1, 10
                )  # the stream is open; its first event is held back
                held_samples = int(
                    wait_until(
                        lambda: (
                            int(recorder_state(page).get("samples") or 0) > 0
                            and recorder_state(page)["samples"]
                        ),
                        10,
                    )
                )
                connecting = recorder_state(
                    page
                )  # the first event is still held: no "started" can have come
                bridge.gate.set()
                recording = wait_until(
                    lambda: (state := recorder_state(page))["state"] == "recording" and state, 10
                )
                wait_until(lambda: recorder_state(page)["transcript"], 10)
                page.get_by_role("button", name="Stop").click()
                done = wait_until(
                    lambda: (state := recorder_state(page))["state"] == "done" and state, 10
                )
                accepted_states = page.evaluate("window.voicectlStates")

                page.evaluate(
                    "window.voicectlStates = "
                    "[document.querySelector('.voicectl-recorder').dataset.state]"
                )
                bridge.gate, bridge.refusal = threading.Event(), bridge.REFUSAL
                page.get_by_role("button", name="Record").click()
                wait_until(lambda: bridge.held == 2, 10)
                refusing = recorder_state(page)
                bridge.gate.set()
                refused = wait_until(
                    lambda: (state := recorder_state(page))["state"] == "error" and state, 10
                )
                refused_states = page.evaluate("window.voicectlStates")
            finally:
                if bridge.gate is not None:
                    bridge.gate.set()
                page.close()
    device = connecting["device"]
    assert connecting["state"] == "connecting" and connecting["stopDisabled"] is False
    assert connecting["status"] == (
        f"Connecting to {container}… Listening to {device}; what you say is kept and "
        "sent once the endpoint accepts."
    )
    assert held_samples and connecting["transcript"] == ""
    assert recording["status"] == f"Recording: streaming to {container}. Press Stop when done."
    assert accepted_states == ["idle", "connecting", "recording", "finishing", "done"]
    samples, rate_hz = int(done["samples"]), int(done["sampleRate"])
    assert (
        abs(bridge.audio_bytes // 2 - samples * 16_000 / rate_hz) <= 1
    )  # the audio captured while held included
    assert done["transcript"].startswith("word ") and done["error"] == ""

    assert refusing["state"] == "connecting"
    assert refused_states == [
        "done",
        "connecting",
        "error",
    ]  # from the last recording's end: never "recording"
    assert refused["error"] == (
        "The endpoint reported an error (upstream_unavailable): the model server is not "
        "reachable (Connect call failed)."
    )
    assert (refused["recordDisabled"], refused["stopDisabled"]) == (False, True)
