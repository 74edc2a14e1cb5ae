"""``voicectl talk`` in a real browser against the local voice agent.

Chromium (tests/e2e/browser_testkit.py) opens the talk page, whose fake microphone is espeak-ng
asking a question. ``voicectl talk``'s relay takes the page's WebSocket to the bot
(``agent_factory``, tests/e2e/local/conftest.py), which hears the question through Silero VAD and
Voxtral (the front door, the real bridge, the fake vLLM), answers with the Bedrock stand-in and
speaks with the Sonic stand-in in real time.

Which utterance reaches the page is the test's choice, not the clock's: an init script puts a
gate between the fake microphone and the page (:data:`MICROPHONE_GATE`). The microphone repeats
the question (the WAV loops: the question, then :data:`QUESTION_GAP_S` of silence); the gate
passes silence until the test arms it, then exactly the next whole question.

Every wait is on a condition, with a generous timeout; nothing is timed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser_testkit import chromium, requires_chromium, wait_until
from tests.e2e.local.conftest import DELTAS, spoken_pcm16
from voice_client.audio import pcm16_to_wav_bytes
from voice_devtools.local.fake_bedrock import reply_words
from voice_devtools.local.fake_sonic import TONE_AMPLITUDE

pytestmark = requires_chromium

QUESTION = "What is the weather like in Paris today?"
"""What the fake microphone asks (espeak-ng)."""

QUESTION_GAP_S = 1.5
"""Seconds of silence after the question in the microphone's looped WAV: more than twice the
gate's :data:`GATE_QUIET_S`, so that the gate sees each question whole and apart."""

GATE_QUIET_S = 0.6
"""Seconds of silence that end an utterance at the gate; one must come before it too. More than
espeak-ng's pauses between words and sentences, less than half of :data:`QUESTION_GAP_S`."""

GATE_LEVEL = 0.01
"""RMS above which the gate hears sound (espeak-ng's speech is 0.1-0.3; its silence 0)."""

MICROPHONE_GATE = f"""(() => {{
  // Between the fake microphone and the page: silence, except the next whole utterance after
  // window.micGate.state = "armed" (from a sound after {GATE_QUIET_S} s of silence to the next
  // {GATE_QUIET_S} s of silence); micGate.passed counts the utterances let through.
  const gate = window.micGate = {{state: "closed", passed: 0}};
  const getUserMedia = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {{
    const microphone = await getUserMedia(constraints);
    const context = new AudioContext();
    const node = context.createScriptProcessor(1024, 1, 1);
    const output = context.createMediaStreamDestination();
    let quiet = 0;
    node.onaudioprocess = (event) => {{
      const input = event.inputBuffer.getChannelData(0);
      const out = event.outputBuffer.getChannelData(0);
      let sum = 0;
      for (const x of input) sum += x * x;
      const loud = Math.sqrt(sum / input.length) > {GATE_LEVEL};
      if (gate.state === "armed" && loud && quiet >= {GATE_QUIET_S}) gate.state = "open";
      if (gate.state === "open") out.set(input); else out.fill(0);
      quiet = loud ? 0 : quiet + input.length / context.sampleRate;
      if (gate.state === "open" && quiet >= {GATE_QUIET_S}) {{
        gate.state = "closed"; gate.passed += 1;
      }}
    }};
    context.createMediaStreamSource(microphone).connect(node);
    node.connect(output);
    return output.stream;
  }};
}})();"""

OUTPUT_TAP = """() => {
  // The level of what the page plays: RMS per 1024 samples at the player's clock.
  const speaker = window.talkOutput, context = speaker.context;
  const tap = context.createScriptProcessor(1024, 1, 1);
  window.outputLevels = [];
  tap.onaudioprocess = (event) => {
    const input = event.inputBuffer.getChannelData(0);
    let sum = 0;
    for (const x of input) sum += x * x;
    window.outputLevels.push([event.playbackTime, Math.sqrt(sum / input.length)]);
    event.outputBuffer.getChannelData(0).fill(0);
  };
  speaker.connect(tap);
  tap.connect(context.destination);
}"""

TAP_LAG_S = 2 * 1024 / 24000
"""How far before its playbackTime a tap block's audio may begin, at the player's 24 kHz: two
blocks (ScriptProcessorNode double-buffers)."""

STOP_APPLIED_S = 0.2
"""Player-clock seconds a stop may take to reach the audio thread (one 128-frame render quantum,
5 ms, on an idle machine; more when the page's thread is late on a loaded one). A page that did
not stop would play on for the seconds of the answer it has queued (:data:`FAST_PACE`)."""

STATE = """() => ({
  status: document.getElementById("status").textContent,
  lines: [...document.querySelectorAll("#log p")].map((p) => [p.className, p.textContent]),
  stats: window.talkStats || null,
  now: window.talkOutput ? window.talkOutput.context.currentTime : 0,
  gate: window.micGate,
})"""

WAIT_S = 60.0
"""Generous bound of each wait (a loaded 2-core machine; each is a condition, not a target)."""

MIN_PLAYED = 10
"""Frames (20 ms each) of an answer played before the test goes on: it is audibly playing."""

FAST_PACE = 0.5
"""The Sonic stand-in's pace while the page converses (wall seconds per second of audio): twice
real time, so that the page holds seconds of an answer queued when it is interrupted, as it does
with a Sonic that generates faster than it speaks."""

SLOW_PACE = 20.0
"""Its pace when the page closes: the request then streaming cannot end before the close reaches
it (half of its sentence is left, seconds at this pace), so the close is what ends it."""

STAND_IN_RMS = TONE_AMPLITUDE / 2**0.5
"""The Sonic stand-in's tone's RMS: what the page plays while an answer is heard."""


@pytest.fixture(scope="module")
def question_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("question")
    pcm16 = spoken_pcm16(QUESTION, directory) + bytes(2 * round(16000 * QUESTION_GAP_S))
    path = directory / "question.wav"
    path.write_bytes(pcm16_to_wav_bytes(pcm16, 16000))
    return path


@pytest.fixture(scope="module")
def browser(question_wav: Path) -> Iterator[Any]:
    with chromium(question_wav) as browser:
        yield browser


def open_talk_page(browser: Any, url: str) -> Any:
    """A new tab on the talk page, gated microphone, Start pressed."""
    page = browser.new_page()
    page.add_init_script(MICROPHONE_GATE)
    page.goto(url)
    page.get_by_role("button", name="Start").click()
    return page


def state(page: Any) -> dict[str, Any]:
    return page.evaluate(STATE)


def lines(snapshot: dict[str, Any], kind: str) -> list[str]:
    """The final lines of one side (``user``, ``agent``), without their "You: " or "Agent: "."""
    return [text.split(": ", 1)[1] for cls, text in snapshot["lines"] if cls == kind]


def played(snapshot: dict[str, Any], answer: int) -> list[dict[str, Any]]:
    """The frames of ``answer`` the player's clock has gone past, not stopped before their end."""
    return [
        frame
        for frame in snapshot["stats"]["frames"]
        if frame["answer"] == answer
        and frame["end"] <= snapshot["now"]
        and (frame["stoppedAt"] is None or frame["stoppedAt"] >= frame["end"])
    ]


def streaming(call: Any) -> bool:
    """A Sonic stand-in's call with more than half of its audio still to send."""
    return not call.client_closed and len(call.audio) < call.full_audio_bytes // 2


def pass_one_question(page: Any) -> None:
    passed = state(page)["gate"]["passed"]
    page.evaluate("window.micGate.state = 'armed'")
    wait_until(lambda: state(page)["gate"]["passed"] == passed + 1, WAIT_S)


def assert_is_the_fakes_transcript(text: str) -> None:
    """The fake vLLM's transcript: its DELTAS round-robin, one per token of the utterance."""
    words = text.split(" ")
    expected = [delta.strip() for delta in itertools.islice(itertools.cycle(DELTAS), len(words))]
    assert words == expected and len(words) >= len(DELTAS), text


def test_the_talk_page_converses_is_interrupted_and_frees_its_slot(
    agent_factory, client_env, browser
):
    from voice_client.talk import TalkRelay

    agent = agent_factory(max_sessions=1)
    sonic = client_env.sonic
    sonic.pace = FAST_PACE
    relay = agent.call(TalkRelay(agent.url, port=0, log=lambda line: None).start())
    pages: list[Any] = []
    try:
        pages.append(page := open_talk_page(browser, relay.url))
        wait_until(lambda: state(page)["status"] == "listening", WAIT_S)
        page.evaluate(OUTPUT_TAP)

        # The question; its transcript, the answer's text, then the answer heard.
        pass_one_question(page)
        heard = wait_until(
            lambda: (
                (now := state(page))["stats"]["frames"]
                and lines(now, "agent")
                and len(played(now, 1)) >= MIN_PLAYED
                and now
            ),
            WAIT_S,
        )
        asked, answered = lines(heard, "user"), lines(heard, "agent")

        # Only one session: a second page is refused while this one talks.
        pages.append(refused := open_talk_page(browser, relay.url))
        refusal = wait_until(
            lambda: (now := state(refused))["status"].startswith("ended") and now, WAIT_S
        )
        refused.close()

        # Barge-in: the question again, over the answer; then the next answer is heard.
        pass_one_question(page)
        barged = wait_until(
            lambda: (
                (now := state(page))["stats"]["stops"]
                and len(lines(now, "agent")) == 2
                and len(played(now, 2)) >= MIN_PLAYED
                and now
            ),
            WAIT_S,
        )
        levels = page.evaluate("window.outputLevels")

        # Leaving during the second answer: its Sonic request is cancelled, the slot freed.
        sonic.pace = SLOW_PACE
        speaking = wait_until(
            lambda: next((call for call in reversed(sonic.calls) if streaming(call)), None), WAIT_S
        )
        page.close()
        health = wait_until(lambda: (now := agent.health())["sessions"] == 0 and now, WAIT_S)
        wait_until(lambda: sonic.generations == 0, WAIT_S)
        pages.append(second := open_talk_page(browser, relay.url))
        admitted = wait_until(
            lambda: (now := state(second))["status"] == "listening" and now, WAIT_S
        )
        busy = agent.health()
    finally:
        for open_page in pages:
            open_page.close()
        agent.call(relay.stop())

    # The user's words as the fake vLLM transcribed them; the Bedrock stand-in's answer to them.
    assert len(asked) == 1
    assert_is_the_fakes_transcript(asked[0])
    request = agent.bedrock.calls[0].request
    assert request["messages"][-1] == {"role": "user", "content": [{"text": asked[0]}]}
    assert answered == [agent.bedrock.calls[0].text]
    assert answered[0] == " ".join(reply_words(request))
    assert answered[0].startswith(f"You said: {asked[0].rstrip('.')}. I heard you.")

    # The first answer was received and played: frames of answer 1, heard at the tone's level.
    stats = heard["stats"]
    assert stats["audioBytes"] >= MIN_PLAYED * 2 * 24000 // 50 and stats["late"] == 0
    assert {frame["answer"] for frame in stats["frames"]} == {1}, stats["events"]
    assert max(level for _, level in levels) == pytest.approx(STAND_IN_RMS, rel=0.05)

    # The second page was refused (the bot's 503) and never got a session.
    assert refusal["status"] == "ended: the agent is unreachable"
    assert any(cls == "error" and "HTTP 503" in text for cls, text in refusal["lines"])

    # The barge-in stopped answer 1: one stop, no frame of it after the interrupt, none playing
    # past the stop, and silence at the output from the stop to answer 2's first frame.
    stats = barged["stats"]
    (stop,) = stats["stops"]
    assert (stop["answer"], stats["late"], stats["events"].count("interrupt")) == (1, 0, 1), stats
    frames = stats["frames"]
    first = [frame for frame in frames if frame["answer"] == 1]
    assert all(frame["end"] <= stop["at"] or frame["stoppedAt"] == stop["at"] for frame in first)
    queued = sum(frame["start"] >= stop["at"] for frame in first)
    assert queued >= 2, (stop, first[-3:])  # frames queued ahead: stopped before they played
    assert [frame["answer"] for frame in frames] == sorted(frame["answer"] for frame in frames)
    next_start = min(frame["start"] for frame in frames if frame["answer"] == 2)
    after_stop = stop["at"] + STOP_APPLIED_S + TAP_LAG_S
    between = [level for at, level in levels if after_stop < at <= next_start]
    assert len(between) >= 10 and max(between) < 1e-4, between  # the user's speech is >= 0.5 s
    assert len(lines(barged, "user")) == 2, barged["lines"]
    assert_is_the_fakes_transcript(lines(barged, "user")[1])
    assert lines(barged, "agent")[1] == agent.bedrock.calls[1].text

    # Closing the page ended its session (the relay closed the bot's socket) and cancelled Sonic.
    assert health == {"status": "ok", "sessions": 0, "max_sessions": 1}
    assert speaking.cancelled, (
        speaking.client_closed,
        len(speaking.audio),
        speaking.full_audio_bytes,
    )
    # Every other request sent all of its audio or was cut short by its caller: none ran on.
    assert all(call.cancelled or len(call.audio) == call.full_audio_bytes for call in sonic.calls)
    assert admitted["status"] == "listening" and busy["sessions"] == 1
    assert relay.relayed == 2  # the first and the last pages; the refused one never reached it
