"""The latency figures voice-agent builders compare, through a real Pipecat pipeline with the
project's services:

- time to final transcript: from the end of speech to the final ``TranscriptionFrame`` (Pipecat's
  convention, as in its stt-benchmark and ``STTService``: the end of speech is Silero VAD's stop
  time minus its ``stop_secs``);
- Sonic's time to first audio: from sending a sentence's request to its first audio;
- voice to voice: from the end of speech to the agent's first audio frame, through
  VAD -> Voxtral STT -> an LLM stand-in with a fixed first-token time -> Sonic TTS.

Each is printed as p50 / p95 / p99 in ms over the utterances (``--repeats`` passes over recorded
utterances with their reference text; ``espeak-ng`` makes them, else the one recording in
tests/clients/data is used), with the word error rate of the final transcripts. It is a benchmark,
never a test: it prints, it asserts nothing.

Against ``make local`` (source the env.sh it prints; the fake vLLM, or ``VLLM=real``)::

    .venv/bin/python bench/agent_latency_bench.py

Against deployed endpoints (credentials and Region from the standard chain; a GPU's figures)::

    .venv/bin/python bench/agent_latency_bench.py --voxtral-endpoint <VoxtralEndpointName> \\
        --sonic-endpoint <SonicEndpointName> --voice <Cartesia voice id> --region us-east-1

The transcription delay the Voxtral endpoint runs at sets a floor under the time to final
transcript; the bench cannot ask the endpoint for it, so ``--transcription-delay-ms`` names it for
the header (a deployment's ``voxtral.transcription_delay_ms``, ``make local VLLM=real
TRANSCRIPTION_DELAY_MS=...``; not given: the checkpoint's 480 ms unless the server was set
otherwise).

Needs the agents extra (``make agents-deps``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from pipecat.audio.vad.silero import SileroVADAnalyzer  # noqa: E402
from pipecat.audio.vad.vad_analyzer import VADParams  # noqa: E402
from pipecat.frames.frames import (  # noqa: E402
    EndFrame,
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.audio.vad_processor import VADProcessor  # noqa: E402
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402

from contracts.bridge_env import DEFAULT_TRANSCRIPTION_DELAY_MS  # noqa: E402
from voice_client.audio import TARGET_SAMPLE_RATE_HZ, load_pcm16  # noqa: E402
from voice_client.frameworks.pipecat_sonic import SonicTTSService  # noqa: E402
from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService  # noqa: E402
from voice_client.frameworks.sonic_stream import SonicSynthesizer  # noqa: E402
from voice_client.frameworks.targets import SonicTarget, VoxtralTarget  # noqa: E402

REFERENCES = (
    "Hello from SageMaker. Streaming speech to text.",
    "What is the weather like in Paris tomorrow morning?",
    "Please book a table for two at seven thirty.",
    "I would like to change the delivery address on my order.",
    "Can you read me the last three messages?",
    "Turn off the lights in the living room.",
    "How long does the train to Berlin take?",
    "My account number is four five six seven.",
)
"""The utterances spoken (espeak-ng, en-us, 160 words a minute) and their reference text."""

RECORDING = ROOT / "tests/clients/data/speech_22k_stereo.wav"
RECORDING_TEXT = REFERENCES[0]
"""The fallback recording and its text (tests/clients/data/README.md) when espeak-ng is not
installed."""

FRAME_S = 0.02
"""Seconds of audio per input frame (20 ms, a transport's usual frame)."""

VAD_STOP_S = 0.2
"""Silero VAD's stop_secs: Pipecat's recommended default (``VAD_STOP_SECS``; its stt_latency figures
use it)."""

LLM_FIRST_TOKEN_S = 0.35
"""The LLM stand-in's time to first token (a fast hosted model's order of magnitude; pass yours with
--llm-ttft-ms)."""

REPLY = "Sure. Here is what I found for you."
"""What the LLM stand-in answers (its first sentence is what Sonic speaks first)."""

TURN_TIMEOUT_S = 20.0
"""Seconds a turn may take before it is recorded as missing."""

OUTPUT_RATE_HZ = 24000


@dataclass
class Turn:
    reference: str
    speech_end: float | None = None  # time.time() of VAD's stop minus stop_secs
    final_at: float | None = None
    final_text: str = ""
    first_audio_at: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Probe(FrameProcessor):
    """Records, for the current turn, VAD's end of speech and the final transcript (after the
    STT)."""

    def __init__(self, bench: Bench) -> None:
        super().__init__()
        self.bench = bench

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        turn = self.bench.turn
        stopped = isinstance(frame, VADUserStoppedSpeakingFrame)
        if turn is not None and stopped and turn.speech_end is None:
            turn.speech_end = frame.timestamp - frame.stop_secs
        if turn is not None and isinstance(frame, TranscriptionFrame) and turn.final_at is None:
            turn.final_at, turn.final_text = time.time(), frame.text
        if isinstance(frame, ErrorFrame):
            print(f"error: {frame.error}", file=sys.stderr)
        await self.push_frame(frame, direction)


class LlmStandIn(FrameProcessor):
    """An LLM with a fixed time to first token: each final transcript is answered with
    :data:`REPLY`."""

    def __init__(self, first_token_s: float) -> None:
        super().__init__()
        self.first_token_s = first_token_s
        self.answers: set[asyncio.Task[None]] = set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, TranscriptionFrame):
            task = self.create_task(self._answer(), name="llm_stand_in")
            self.answers.add(task)
            task.add_done_callback(self.answers.discard)

    async def cleanup(self) -> None:
        for task in list(self.answers):
            await self.cancel_task(task)
        await super().cleanup()

    async def _answer(self) -> None:
        await asyncio.sleep(self.first_token_s)
        await self.push_frame(LLMFullResponseStartFrame())
        for word in REPLY.split(" "):
            await self.push_frame(LLMTextFrame(word + " "))
        await self.push_frame(LLMFullResponseEndFrame())


class Recorder(FrameProcessor):
    """The pipeline's end: the first audio frame of the current turn's reply."""

    def __init__(self, bench: Bench) -> None:
        super().__init__()
        self.bench = bench

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        turn = self.bench.turn
        if turn is not None and isinstance(frame, TTSAudioRawFrame) and turn.first_audio_at is None:
            turn.first_audio_at = time.time()
            turn.done.set()
        await self.push_frame(frame, direction)


class Bench:
    def __init__(self) -> None:
        self.turn: Turn | None = None


def recordings(directory: Path) -> list[tuple[str, bytes]]:
    """(reference text, 16 kHz mono PCM16) of each utterance."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        print("espeak-ng not found: using the one recording in tests/clients/data", file=sys.stderr)
        return [(RECORDING_TEXT, load_pcm16(RECORDING).data)]
    made = []
    for index, text in enumerate(REFERENCES):
        path = directory / f"utterance-{index}.wav"
        subprocess.run([espeak, "-v", "en-us", "-s", "160", "-w", str(path), text], check=True)
        made.append((text, load_pcm16(path).data))
    return made


async def feed(worker: PipelineWorker, pcm16: bytes) -> None:
    """Queue ``pcm16`` in 20 ms frames at real-time pace (an absolute schedule: no drift)."""
    step = int(FRAME_S * TARGET_SAMPLE_RATE_HZ) * 2
    start = time.monotonic()
    for index, offset in enumerate(range(0, len(pcm16), step)):
        frame = InputAudioRawFrame(pcm16[offset : offset + step], TARGET_SAMPLE_RATE_HZ, 1)
        await worker.queue_frame(frame)
        delay = start + (index + 1) * FRAME_S - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


async def voice_turns(args: argparse.Namespace, utterances: list[tuple[str, bytes]]) -> list[Turn]:
    bench = Bench()
    voxtral = VoxtralTarget(
        endpoint_name=args.voxtral_endpoint, region=args.region, endpoint_url=args.voxtral_url
    )
    sonic = SonicTarget(args.sonic_endpoint, region=args.region, endpoint_url=args.sonic_url)
    pipeline = Pipeline(
        [
            VADProcessor(vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=VAD_STOP_S))),
            VoxtralSTTService(target=voxtral),
            Probe(bench),
            LlmStandIn(args.llm_ttft_ms / 1000),
            SonicTTSService(target=sonic, voice_id=args.voice),
            Recorder(bench),
        ]
    )
    worker = PipelineWorker(
        pipeline,
        cancel_on_idle_timeout=False,
        params=PipelineParams(
            audio_in_sample_rate=TARGET_SAMPLE_RATE_HZ, audio_out_sample_rate=OUTPUT_RATE_HZ
        ),
    )
    runner = WorkerRunner()
    await runner.add_workers(worker)
    running = asyncio.ensure_future(runner.run())
    silence = bytes(int(FRAME_S * TARGET_SAMPLE_RATE_HZ) * 2)
    turns = []
    await feed(worker, silence * 25)  # half a second of silence to settle the VAD
    for _ in range(args.repeats):
        for reference, pcm16 in utterances:
            bench.turn = turn = Turn(reference)
            await feed(worker, pcm16)
            deadline = time.monotonic() + TURN_TIMEOUT_S
            while not turn.done.is_set() and time.monotonic() < deadline:
                await feed(worker, silence * 5)  # while the agent thinks and starts to speak
            await feed(worker, silence * 50)  # the reply plays; the next turn starts in silence
            turns.append(turn)
    await worker.queue_frame(EndFrame())
    await running
    return turns


async def sonic_first_audio(args: argparse.Namespace) -> list[float]:
    target = SonicTarget(args.sonic_endpoint, region=args.region, endpoint_url=args.sonic_url)
    synthesizer = SonicSynthesizer(target, voice_id=args.voice)
    figures = []
    try:
        for _ in range(args.repeats):
            for text in REFERENCES:
                async for _ in synthesizer.stream(text, OUTPUT_RATE_HZ):
                    pass
                if synthesizer.last_time_to_first_audio_s is not None:
                    figures.append(synthesizer.last_time_to_first_audio_s)
    finally:
        await synthesizer.aclose()
    return figures


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the reference's word count (case and punctuation
    ignored)."""

    def words(text: str) -> list[str]:
        return "".join(c.lower() if c.isalnum() or c.isspace() else " " for c in text).split()

    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[len(hyp)] / max(1, len(ref))


def table(rows: list[tuple[str, list[float]]]) -> str:
    lines = [f"{'figure':<46} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"]
    for name, values in rows:
        if values:
            lines.append(
                f"{name:<46} {len(values):>4} "
                + " ".join(f"{percentile(values, q) * 1000:>8.0f}" for q in (0.5, 0.95, 0.99))
            )
        else:
            lines.append(f"{name:<46} {0:>4} {'-':>8} {'-':>8} {'-':>8}")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        utterances = recordings(Path(directory))
    turns = await voice_turns(args, utterances)
    ttfa = await sonic_first_audio(args)
    ttfs = [
        t.final_at - t.speech_end
        for t in turns
        if t.final_at and t.speech_end and t.final_at >= t.speech_end
    ]
    v2v = [t.first_audio_at - t.speech_end for t in turns if t.first_audio_at and t.speech_end]
    missing = sum(1 for t in turns if t.first_audio_at is None or t.speech_end is None)
    wer = [word_error_rate(t.reference, t.final_text) for t in turns if t.final_at]
    print(
        f"{len(turns)} turns ({len(utterances)} utterances x {args.repeats}); Voxtral "
        f"{args.voxtral_endpoint}, Sonic {args.sonic_endpoint}; VAD stop_secs {VAD_STOP_S},"
    )
    print(
        f"LLM stand-in first token {args.llm_ttft_ms:.0f} ms; Voxtral transcription delay "
        f"{delay_label(args.transcription_delay_ms)}"
    )
    print(
        table(
            [
                ("time to final transcript (after end of speech)", ttfs),
                ("Sonic time to first audio (per sentence)", ttfa),
                ("voice to voice (end of speech to first audio)", v2v),
            ]
        )
    )
    if wer:
        print(
            f"word error rate of the final transcripts: {sum(wer) / len(wer):.1%} (mean over "
            f"{len(wer)})"
        )
        print(
            "(meaningful only against a real Voxtral: make local's fake vLLM sends scripted words, "
            "its real-vLLM tier a random-weight model's letters)"
        )
    if missing:
        print(f"{missing} turns without an end of speech or a reply within {TURN_TIMEOUT_S:.0f} s")


def delay_label(delay_ms: int | None) -> str:
    """The transcription delay the header names: as given, or what not giving it means."""
    if delay_ms is not None:
        return f"{delay_ms} ms"
    return (
        f"not given (the checkpoint's {DEFAULT_TRANSCRIPTION_DELAY_MS} ms unless the "
        "server sets another)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--voxtral-endpoint",
        default="voxtral-realtime",
        help="Voxtral SageMaker endpoint (default: make local's voxtral-realtime)",
    )
    parser.add_argument(
        "--sonic-endpoint",
        default="sonic-tts",
        help="Sonic SageMaker endpoint (default: make local's sonic-tts)",
    )
    parser.add_argument(
        "--voice", default="local-voice", help="Cartesia voice ID (default: make local's)"
    )
    parser.add_argument("--region", help="AWS Region (default: the standard chain's)")
    parser.add_argument(
        "--voxtral-url",
        help="bidirectional runtime URL (default: "
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2 or the Region's)",
    )
    parser.add_argument(
        "--sonic-url",
        help="runtime URL (default: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME or the Region's)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="passes over the utterances (default: 3)"
    )
    parser.add_argument(
        "--llm-ttft-ms",
        type=float,
        default=LLM_FIRST_TOKEN_S * 1000,
        help="the LLM stand-in's time to first token, ms (default: "
        f"{LLM_FIRST_TOKEN_S * 1000:.0f})",
    )
    parser.add_argument(
        "--transcription-delay-ms",
        type=int,
        metavar="MS",
        help="the transcription delay the Voxtral endpoint runs at, for the header "
        "(voxtral.transcription_delay_ms; make local's TRANSCRIPTION_DELAY_MS)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
