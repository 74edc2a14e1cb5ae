"""The whole voice agent as a page hears it: N turns of recorded speech against the bot's
WebSocket (``make local AGENT=1``, or a deployment's AgentUrl), each answer interrupted by the
next turn's speech, with per-turn figures in milliseconds and their p50 / p95.

From the bot's ``latency`` event, the values it writes as EMF (contracts/agent_metrics.py, with
``Ms`` appended): ``TimeToFinalTranscript``, ``LlmFirstToken``, ``SonicFirstAudio``,
``VoiceToVoice`` (the bot's end of speech is Silero VAD's stop minus its stop_secs).

Measured at the page (not metrics of the bot):

- ``PageVoiceToVoice``: from the end of the user's speech (the recording's last sample above
  :data:`SPEECH_THRESHOLD`, at the moment the page's microphone delivers it) to the first audio
  message of the answer received;
- ``BargeIn``: from the start of the user's speech over an answer to the agent's silence. The page
  plays what it receives on a 24 kHz clock and drops what is queued at ``interrupt`` (as the talk
  page does), so the agent falls silent at the ``interrupt`` event, or where the last audio frame
  of the cancelled answer ends if that comes first.

The page is the talk page's (voice_client/talk_page/index.html): 16 kHz PCM16 in chunks of
1024 samples at real-time pace, silence between utterances. Each turn: an utterance, its answer's
first audio, :data:`BARGE_IN_AFTER_S` of the answer, then the next utterance over it (one more
utterance interrupts the last answer). The utterances are espeak-ng's (one sentence each, so that
VAD hears one turn); without espeak-ng, the recording in tests/clients/data.

Run it (it prints, it asserts nothing)::

    make bench-agent                    # starts make local AGENT=1 itself; VLLM=real, TURNS=...
    .venv/bin/python bench/agent_turns_bench.py --local --turns 20 --bedrock-first-token-ms 350
    .venv/bin/python bench/agent_turns_bench.py --url ws://127.0.0.1:8100/   # a running bot

``--local`` starts ``python -m voice_devtools.local --agent`` (its default ports) and stops it after
the turns; without it the bot at ``--url`` is used as it runs (the header then names only the URL).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import websockets  # noqa: E402

from contracts.agent_metrics import TURN_LATENCY_METRICS  # noqa: E402
from voice_client.audio import load_pcm16  # noqa: E402
from voice_devtools.local.fake_bedrock import FIRST_TOKEN_S  # noqa: E402

UTTERANCES = (
    "What is the weather like in Paris tomorrow morning?",
    "Please book a table for two at seven thirty.",
    "I would like to change the delivery address on my order.",
    "Can you read me the last three messages?",
    "Turn off the lights in the living room.",
    "How long does the train to Berlin take?",
    "My account number is four five six seven.",
)
"""What the user says, in turn (espeak-ng, en-us, 160 words a minute; agent_latency_bench.py's
sentences, one sentence each)."""

RECORDING = ROOT / "tests/clients/data/speech_22k_stereo.wav"
"""The committed recording used without espeak-ng (tests/clients/data/README.md)."""

BOT_FIGURES = ("TimeToFinalTranscript", "LlmFirstToken", "SonicFirstAudio", "VoiceToVoice")
"""The ``latency`` event's keys, in the order of the pipeline; the bot's EMF name of each is
TURN_LATENCY_METRICS[key]."""
assert set(BOT_FIGURES) == set(TURN_LATENCY_METRICS), "the bot's latency event changed"

TIMELINE = (
    ("user_stopped", "turn", {"state": "user_stopped"}),
    ("final transcript", "user_transcript", {"final": True}),
    ("agent_thinking", "turn", {"state": "agent_thinking"}),
    ("first agent_text", "agent_text", {"final": False}),
    ("agent_speaking", "turn", {"state": "agent_speaking"}),
)
"""The events of a turn the page sees, in order: (label, type, fields); their arrivals after the
end of speech show where the voice-to-voice time goes."""

PAGE_FIGURES = ("PageVoiceToVoice", "BargeIn")
"""Figures measured at the page."""

COLUMNS = ("turn", *BOT_FIGURES, *PAGE_FIGURES)
"""The per-turn table's columns."""

CHUNK_SAMPLES = 1024
"""Samples per audio message up: the talk page's ScriptProcessor buffer (64 ms at 16 kHz)."""

SPEECH_THRESHOLD = 0.02
"""A sample this far from zero (of full scale, -34 dBFS) is speech: espeak-ng's silences are
digital zero, its quietest phonemes well above it."""

BARGE_IN_AFTER_S = 1.0
"""Seconds of an answer (from its first audio) the page hears before the next utterance starts."""

EVENT_TIMEOUT_S = 30.0
"""Seconds to wait for an event of the bot before the turn counts as missing."""

SETTLE_S = 0.5
"""Seconds of silence sent after ``ready`` (and after the greeting) before the first utterance."""

LOCAL_START_TIMEOUT_S = 300.0
"""Seconds ``python -m voice_devtools.local`` may take to print its banner (vLLM's real server on a
CPU starts in 1-3 minutes)."""

LOCAL_URL = "ws://127.0.0.1:8100/"
"""The bot of ``make local AGENT=1`` (voice_devtools.local's --agent-port default)."""


def speech_bounds(pcm16: bytes) -> tuple[int, int]:
    """(first, last + 1) sample index of the speech in ``pcm16`` (above SPEECH_THRESHOLD)."""
    samples = np.frombuffer(pcm16, dtype="<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > SPEECH_THRESHOLD * 32768)
    if not len(loud):
        raise ValueError("the recording holds no speech above the threshold")
    return int(loud[0]), int(loud[-1]) + 1


def recordings(directory: Path) -> tuple[str, list[bytes]]:
    """(what they are, 16 kHz mono PCM16 of each utterance)."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        return (
            f"{RECORDING.relative_to(ROOT)} (espeak-ng not found)",
            [load_pcm16(RECORDING).data],
        )
    made = []
    for index, text in enumerate(UTTERANCES):
        path = directory / f"utterance-{index}.wav"
        subprocess.run([espeak, "-v", "en-us", "-s", "160", "-w", str(path), text], check=True)
        made.append(load_pcm16(path).data)
    return f"espeak-ng en-us 160 wpm, {len(made)} sentences", made


class Microphone:
    """Sends PCM16 up in :data:`CHUNK_SAMPLES` chunks on an absolute real-time schedule, silence
    when nothing is said: sample ``s`` is spoken at ``t0 + s / rate`` and sent with the end of its
    chunk (a microphone delivers a buffer once it is full)."""

    def __init__(self, websocket: Any, rate_hz: int) -> None:
        self.websocket = websocket
        self.rate_hz = rate_hz
        self.t0 = time.monotonic()
        self.sent = 0  # samples sent
        self.pending = bytearray()

    def say(self, pcm16: bytes) -> tuple[float, float]:
        """Queue ``pcm16`` after what is queued; (speech start, speech end) on the monotonic
        clock."""
        begin = self.sent + len(self.pending) // 2
        first, last = speech_bounds(pcm16)
        self.pending += pcm16
        return (self.t0 + (begin + first) / self.rate_hz, self.t0 + (begin + last) / self.rate_hz)

    def idle_at(self) -> float:
        """When everything queued has been spoken."""
        return self.t0 + (self.sent + len(self.pending) // 2) / self.rate_hz

    async def run(self) -> None:
        chunk_bytes = CHUNK_SAMPLES * 2
        while True:
            due = self.t0 + (self.sent + CHUNK_SAMPLES) / self.rate_hz
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            chunk = bytes(self.pending[:chunk_bytes]).ljust(chunk_bytes, b"\0")
            del self.pending[:chunk_bytes]
            await self.websocket.send(chunk)
            self.sent += CHUNK_SAMPLES


@dataclass
class Event:
    """One JSON event from the bot: its arrival (monotonic), its place among all messages, and
    for ``interrupt`` when the agent fell silent at the page."""

    at: float
    seq: int
    body: dict[str, Any]
    silent_at: float | None = None

    @property
    def kind(self) -> str:
        return self.body.get("type", "")


@dataclass
class Speaker:
    """The page's side down: the events and audio arrivals in order, and the playback clock."""

    rate_hz: int = 24000
    events: list[Event] = field(default_factory=list)
    audio_at: list[float] = field(default_factory=list)  # arrival of each audio message
    audio_seq: list[int] = field(default_factory=list)  # its place among all messages
    play_until: float = 0.0  # where playback of what is queued ends (0: nothing queued)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self, websocket: Any) -> None:
        seq = 0
        with contextlib.suppress(websockets.ConnectionClosed):
            async for message in websocket:
                now, seq = time.monotonic(), seq + 1
                if isinstance(message, bytes):
                    self.play_until = max(self.play_until, now) + len(message) / 2 / self.rate_hz
                    self.audio_at.append(now)
                    self.audio_seq.append(seq)
                    continue
                event = Event(now, seq, json.loads(message))
                if event.kind == "interrupt":
                    # What is queued is dropped: silent now, or where playback had ended.
                    event.silent_at = min(now, self.play_until) if self.play_until else now
                    self.play_until = 0.0
                self.events.append(event)
                self.arrived.set()

    def find(self, after: float, kind: str, **fields: Any) -> Event | None:
        """The first event of ``kind`` (with ``fields``) that arrived after ``after``."""
        for event in reversed(self.events):  # the sought one is near the end
            if event.at <= after:
                break
        else:
            event = None
        start = 0 if event is None else self.events.index(event) + 1
        return next(
            (
                e
                for e in self.events[start:]
                if e.kind == kind and all(e.body.get(k) == v for k, v in fields.items())
            ),
            None,
        )

    def first_audio(self, after_seq: int) -> float | None:
        """Arrival of the first audio message after the message ``after_seq``."""
        index = bisect.bisect_right(self.audio_seq, after_seq)
        return self.audio_at[index] if index < len(self.audio_at) else None

    async def wait(
        self, after: float, kind: str, timeout_s: float = EVENT_TIMEOUT_S, **fields: Any
    ) -> Event | None:
        deadline = time.monotonic() + timeout_s
        while (found := self.find(after, kind, **fields)) is None:
            if time.monotonic() > deadline:
                return None
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), max(0.0, deadline - time.monotonic()))
        return found

    def audio_after_interrupts(self) -> int:
        """Audio messages that arrived after an ``interrupt`` and before the next answer began
        (its ``agent_speaking``): audio of a cancelled answer, which the bot must never send."""
        count = 0
        for index, event in enumerate(self.events):
            if event.kind != "interrupt":
                continue
            resumed = next(
                (
                    e.seq
                    for e in self.events[index + 1 :]
                    if e.kind == "turn" and e.body.get("state") == "agent_speaking"
                ),
                sys.maxsize,
            )
            count += bisect.bisect_left(self.audio_seq, resumed) - bisect.bisect_right(
                self.audio_seq, event.seq
            )
        return count


@dataclass
class TurnFigures:
    """One turn's figures (:data:`COLUMNS`, ms) and when each :data:`TIMELINE` event arrived
    after the end of speech (ms)."""

    number: int
    figures: dict[str, float | None] = field(default_factory=dict)
    timeline: dict[str, float] = field(default_factory=dict)


async def converse(
    url: str, utterances: list[bytes], turns: int, barge_in_after_s: float
) -> tuple[list[TurnFigures], dict[str, Any]]:
    """Run ``turns`` turns (and one utterance more, over the last answer); the figures of each,
    and what else was seen (session id, answered turns, interrupts, error events, audio after an
    interrupt)."""
    async with websockets.connect(url, max_size=None, compression=None) as websocket:
        speaker = Speaker()
        reading = asyncio.ensure_future(speaker.read(websocket))
        ready = await speaker.wait(-1.0, "ready")
        if ready is None:
            raise RuntimeError(f"no ready event from {url} within {EVENT_TIMEOUT_S:.0f} s")
        speaker.rate_hz = ready.body["output_sample_rate_hz"]
        mic = Microphone(websocket, ready.body["input_sample_rate_hz"])
        sending = asyncio.ensure_future(mic.run())
        results = []
        try:
            await settle(speaker, ready)
            _, speech_end = mic.say(utterances[0])
            for index in range(turns):
                result, speech_end = await one_turn(
                    speaker, mic, utterances, index, speech_end, barge_in_after_s
                )
                results.append(result)
            await websocket.send(json.dumps({"type": "end"}))
            await speaker.wait(ready.at, "end", timeout_s=5.0)
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, websockets.ConnectionClosed):
                await sending
        await websocket.close()
        await reading
    seen = {
        "session": ready.body.get("session_id"),
        "latency events": sum(1 for e in speaker.events if e.kind == "latency"),
        "interrupts": sum(1 for e in speaker.events if e.kind == "interrupt"),
        "errors": [e.body.get("message") for e in speaker.events if e.kind == "error"],
        "audio after an interrupt": speaker.audio_after_interrupts(),
    }
    return results, seen


async def settle(speaker: Speaker, ready: Event) -> None:
    """Let a greeting play out: wait :data:`SETTLE_S`, and while its audio comes or plays,
    longer."""
    await asyncio.sleep(SETTLE_S)
    if speaker.find(ready.at, "agent_text", final=True) is None:
        return
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while time.monotonic() < deadline and (
        speaker.first_audio(ready.seq) is None or speaker.play_until > time.monotonic()
    ):
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_S)


async def one_turn(
    speaker: Speaker,
    mic: Microphone,
    utterances: list[bytes],
    index: int,
    speech_end: float,
    barge_in_after_s: float,
) -> tuple[TurnFigures, float]:
    """Turn ``index + 1``, whose utterance ends at ``speech_end``: its answer's figures, then the
    next utterance over that answer; (the figures, the next utterance's end)."""
    result = TurnFigures(index + 1, dict.fromkeys(COLUMNS[1:]))
    following = utterances[(index + 1) % len(utterances)]
    await asyncio.sleep(max(0.0, speech_end - time.monotonic()))
    speaking = await speaker.wait(speech_end, "turn", state="agent_speaking")
    latency = await speaker.wait(speaking.at, "latency") if speaking else None
    first_audio = speaker.first_audio(speaking.seq) if speaking else None
    for label, kind, fields in TIMELINE:
        seen = speaker.find(speech_end, kind, **fields)
        if seen is not None and (speaking is None or seen.at <= speaking.at):
            result.timeline[label] = (seen.at - speech_end) * 1000
    if latency is not None:
        result.figures.update({key: latency.body.get(key) for key in BOT_FIGURES})
    if first_audio is None:  # no answer: the next utterance is said into silence
        return result, mic.say(following)[1]
    result.figures["PageVoiceToVoice"] = (first_audio - speech_end) * 1000
    await asyncio.sleep(max(0.0, first_audio + barge_in_after_s - time.monotonic()))
    answering = speaker.play_until > time.monotonic()
    speech_start, next_end = mic.say(following)
    if answering:  # else the answer had ended: nothing to interrupt
        interrupt = await speaker.wait(first_audio, "interrupt")
        if interrupt is not None and interrupt.silent_at is not None:
            result.figures["BargeIn"] = (interrupt.silent_at - speech_start) * 1000
    return result, next_end


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (as agent_latency_bench.py's)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def table(results: list[TurnFigures]) -> str:
    """One row per turn, then p50 and p95 of each column over the turns that have it."""
    widths = [max(4, len(name)) for name in COLUMNS]

    def row(cells: list[str]) -> str:
        return " ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    lines = [row(list(COLUMNS))]
    for result in results:
        lines.append(
            row([str(result.number), *(cell(result.figures.get(name)) for name in COLUMNS[1:])])
        )
    for label, fraction in (("p50", 0.5), ("p95", 0.95)):
        values = [
            [r.figures[name] for r in results if r.figures.get(name) is not None]
            for name in COLUMNS[1:]
        ]
        lines.append(row([label, *(cell(percentile(v, fraction)) if v else "-" for v in values)]))
    return "\n".join(lines)


@contextlib.contextmanager
def local_stack(args: argparse.Namespace):
    """``python -m voice_devtools.local --agent`` until the block ends (SIGINT, as Ctrl-C)."""
    state = Path(tempfile.mkdtemp(prefix="agent-bench-"))
    command = [
        sys.executable,
        "-m",
        "voice_devtools.local",
        "--agent",
        "--vllm",
        args.vllm,
        "--state-dir",
        str(state),
    ]
    if args.bedrock_first_token_ms is not None:
        command += ["--bedrock-first-token-ms", f"{args.bedrock_first_token_ms:g}"]
    print(f"starting python {' '.join(command[1:])} (logs in {state})", file=sys.stderr, flush=True)
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + LOCAL_START_TIMEOUT_S
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"python -m voice_devtools.local exited with code {process.wait()}; see {state}"
                )
            if line.startswith("Ctrl-C stops everything"):
                break
        else:
            raise RuntimeError(
                f"python -m voice_devtools.local did not start within "
                f"{LOCAL_START_TIMEOUT_S:.0f} s; see {state}"
            )
        yield state
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def load_average() -> str:
    """The 1, 5 and 15-minute load averages (the machine's other work competes with the bot)."""
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else the architecture."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def header(args: argparse.Namespace, source: str, url: str, load: str) -> list[str]:
    lines = [
        (
            f"Whole voice agent at {url}: {args.turns} turn{'s' if args.turns > 1 else ''}, each "
            f"answer interrupted {args.barge_in_after_s:g} s after its first audio"
        ),
        (
            f"machine: {os.cpu_count()} CPUs ({cpu_model()}), load average {load} at the start; "
            f"Python {platform.python_version()}"
        ),
        f"speech: {source}; the page sends {CHUNK_SAMPLES}-sample chunks in real time",
    ]
    if args.local:
        vllm = "real (CPU build, tiny random-weight checkpoint)" if args.vllm == "real" else "fake"
        first_token = (
            FIRST_TOKEN_S * 1000
            if args.bedrock_first_token_ms is None
            else args.bedrock_first_token_ms
        )
        lines.append(
            f"stack: make local AGENT=1 (python -m voice_devtools.local --agent), vLLM {vllm}, "
            f"Bedrock stand-in first token {first_token:g} ms, Sonic stand-in (as fast "
            "as it can)"
        )
    return lines


def report(
    args: argparse.Namespace,
    source: str,
    url: str,
    results: list[TurnFigures],
    seen: dict[str, Any],
    load: str,
) -> str:
    names = ", ".join(f"{key} = {TURN_LATENCY_METRICS[key]}" for key in BOT_FIGURES)
    lines = [
        *header(args, source, url, load),
        "",
        f"ms; the first four are the bot's latency event (its EMF metrics: {names});",
        (
            "PageVoiceToVoice: end of the user's speech to the answer's first audio, at the page; "
            "BargeIn: start of the user's speech over an answer to the agent's silence (interrupt, "
            "queued audio dropped); p50/p95 nearest rank"
        ),
        "",
        table(results),
        "",
    ]
    parts = []
    for label, _, _ in TIMELINE:
        values = [r.timeline[label] for r in results if label in r.timeline]
        if values:
            parts.append(f"{label} {percentile(values, 0.5):.0f}")
    if parts:
        lines.append(
            f"at the page, p50 ms after the end of speech: {', '.join(parts)}, first "
            "audio = PageVoiceToVoice"
        )
    lines.append(
        f"load average at the end {load_average()}; "
        f"session {seen['session']}: answered turns {seen['latency events']}, "
        f"interrupts {seen['interrupts']}, audio messages of a cancelled answer after "
        f"its interrupt {seen['audio after an interrupt']}"
    )
    for message in seen["errors"]:
        lines.append(f"error event: {message}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=LOCAL_URL, help=f"the bot's WebSocket (default: make local's, {LOCAL_URL})"
    )
    parser.add_argument("--turns", type=int, default=20, help="turns (default: 20)")
    parser.add_argument(
        "--barge-in-after-s",
        type=float,
        default=BARGE_IN_AFTER_S,
        help="seconds of each answer before the next utterance starts over it "
        f"(default: {BARGE_IN_AFTER_S:g})",
    )
    parser.add_argument(
        "--local",
        action="store_true",
        help="start python -m voice_devtools.local --agent for the run (its default "
        "ports), stop it after",
    )
    parser.add_argument(
        "--vllm",
        choices=("fake", "real"),
        default="fake",
        help="with --local: the fake vLLM or vLLM's real CPU server (default: fake)",
    )
    parser.add_argument(
        "--bedrock-first-token-ms",
        type=float,
        metavar="MS",
        help="with --local: the Bedrock stand-in's first-token time "
        f"(default: {FIRST_TOKEN_S * 1000:g})",
    )
    args = parser.parse_args(argv)
    if args.turns < 1:
        parser.error(f"--turns {args.turns}: must be at least 1")
    if args.barge_in_after_s < 0:
        parser.error(f"--barge-in-after-s {args.barge_in_after_s:g}: must be 0 or more")
    if not args.local and (args.vllm != "fake" or args.bedrock_first_token_ms is not None):
        parser.error(
            "--vllm and --bedrock-first-token-ms set up the stack --local starts; "
            "without --local the bot at --url runs with its own settings"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        source, utterances = recordings(Path(directory))
    with local_stack(args) if args.local else contextlib.nullcontext():
        load = load_average()
        results, seen = asyncio.run(
            converse(args.url, utterances, args.turns, args.barge_in_after_s)
        )
    print(report(args, source, args.url, results, seen, load), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
