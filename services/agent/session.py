"""One conversation: a page's WebSocket and the Pipecat pipeline that answers it.

    page audio -> [Silero VAD in the user aggregator] -> VoxtralSTTService -> LLM -> SonicTTSService
    -> page

The pipeline (Pipecat 1.14): Silero VAD (``VADProcessor``) -> :class:`SpeechGate` ->
``VoxtralSTTService`` -> :class:`TranscriptTap` -> the user context aggregator (its user turn
start, at VAD's start of speech, is the interruption) -> the LLM -> :class:`AnswerTap` ->
``SonicTTSService`` -> :class:`PageOutput` -> the assistant context aggregator. Audio from the
page is queued into the pipeline in 20 ms frames.

The gate passes the STT only the audio of speech (from :data:`PREROLL_S` before VAD's start to
VAD's stop): the page sends silence continuously, and without the gate every session would hold
one of the Voxtral endpoint's streams for its whole length (each utterance is one stream, opened
by its first audio).

Barge-in: when the user starts speaking while the agent's answer is being generated, spoken by
Sonic or played (its end is the LLM's end frame reaching :class:`PageOutput`: Pipecat's TTS
passes it on behind the answer's last audio; then the page's playback clock),
Pipecat's interruption cancels the LLM call and the Sonic request (its connection is closed), and
:class:`PageOutput` sends ``interrupt`` before anything else: every audio frame of the answers
begun before it is dropped, so none reaches the page after the event.

Closing the WebSocket cancels the pipeline at once (``CancelFrame``): the Sonic request, the LLM
stream and the Voxtral streams are closed, and the session's slot is freed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADParams
from pipecat.frames.frames import (
    CancelFrame,
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.turns.user_start.transcription_user_turn_start_strategy import (
    TranscriptionUserTurnStartStrategy,
)
from pipecat.turns.user_start.vad_user_turn_start_strategy import VADUserTurnStartStrategy
from pipecat.turns.user_stop.speech_timeout_user_turn_stop_strategy import (
    SpeechTimeoutUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from agent.metrics import MetricsSink
from agent.protocol import (
    INPUT_SAMPLE_RATE_HZ,
    MAX_AUDIO_MESSAGE_BYTES,
    OUTPUT_SAMPLE_RATE_HZ,
)
from contracts.agent_metrics import INTERRUPTIONS
from voice_client.frameworks.pipecat_sonic import SonicTTSService
from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService

logger = logging.getLogger("agent.session")

FRAME_S = 0.02
"""Seconds of page audio per pipeline frame (20 ms, a Pipecat transport's usual frame)."""

FRAME_BYTES = int(FRAME_S * INPUT_SAMPLE_RATE_HZ) * 2
"""Bytes of 16 kHz PCM16 per pipeline frame."""

VAD_STOP_S = 0.2
"""Silero VAD's stop_secs: Pipecat's recommended value (``VAD_STOP_SECS``)."""

PREROLL_S = 0.5
"""Seconds of audio before VAD's start of speech passed to the STT: Silero needs its start_secs
(0.2 s) of speech to decide, and the first syllable starts a little before that."""

USER_SPEECH_TIMEOUT_S = 0.3
"""Seconds after VAD's stop before the user's turn ends (with a transcript): Pipecat's speech
timeout strategy, shorter than its 0.6 s default since Voxtral's final transcript already waits
for the final commit."""


class PageGone(Exception):
    """The page's WebSocket closed."""


class PageLink:
    """Sends to the page: JSON events and binary audio, in order. The pipeline's processors only
    queue (they never wait on the network); :meth:`run` writes."""

    def __init__(self, websocket: Any) -> None:
        self.websocket = websocket
        self._queue: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.closed = False
        self.audio_bytes = 0

    async def event(self, kind: str, **fields: Any) -> None:
        self._put(json.dumps({"type": kind, **fields}))

    async def audio(self, pcm16: bytes) -> None:
        self.audio_bytes += len(pcm16)
        self._put(pcm16)

    def _put(self, message: str | bytes) -> None:
        if not self.closed:
            self._queue.put_nowait(message)

    async def run(self) -> None:
        """Write what is queued until :meth:`finish` (or the page leaves)."""
        while (message := await self._queue.get()) is not None:
            try:
                await self.websocket.send(message)
            except Exception:  # websockets' ConnectionClosed: the page left
                self.closed = True
                return

    def finish(self) -> None:
        """Write what is queued, then stop."""
        self._queue.put_nowait(None)


@dataclass
class Turn:
    """One user turn and the agent's answer, for the latency figures (``time.time()`` clocks)."""

    number: int
    speech_end: float | None = None
    final_at: float | None = None
    llm_started: float | None = None
    llm_first_token: float | None = None
    tts_started: float | None = None
    sonic_first_audio: float | None = None
    first_audio_sent: float | None = None
    reported: bool = False

    def latencies_ms(self) -> dict[str, float | None]:
        def between(start: float | None, end: float | None) -> float | None:
            if start is None or end is None or end < start:
                return None
            return (end - start) * 1000

        return {
            "TimeToFinalTranscript": between(self.speech_end, self.final_at),
            "LlmFirstToken": between(self.llm_started, self.llm_first_token),
            "SonicFirstAudio": between(self.tts_started, self.sonic_first_audio),
            "VoiceToVoice": between(self.speech_end, self.first_audio_sent),
        }


@dataclass
class SessionState:
    """What the taps share: the turn being measured and whether the agent is speaking."""

    session_id: str
    page: PageLink
    metrics: MetricsSink
    clock: Callable[[], float] = time.time
    turns: int = 0
    pending: Turn | None = None  # the user's turn whose answer has not started
    answering: Turn | None = None  # the turn whose answer is being generated or played
    answer_sent: bool = True  # all of the answer's audio went to the page (its end frame did)
    playback_until: float = 0.0  # when the page finishes playing what was sent (estimated)
    seen_contexts: set[str] = field(default_factory=set)
    cancelled_contexts: set[str] = field(default_factory=set)
    interruptions: int = 0
    user_text: list[str] = field(default_factory=list)
    agent_text: list[str] = field(default_factory=list)

    def speaking(self) -> bool:
        """The agent's answer is still being generated or spoken (some of its audio is still to
        come), or the page is still playing it."""
        unsent = self.answering is not None and not self.answer_sent
        return unsent or self.clock() < self.playback_until

    def new_pending(self) -> Turn:
        if self.pending is None:
            self.turns += 1
            self.pending = Turn(self.turns)
        return self.pending

    def report(self, turn: Turn) -> None:
        if turn.reported or turn.first_audio_sent is None:
            return
        turn.reported = True
        self.metrics.turn(turn.latencies_ms(), self.session_id, turn.number)


class SpeechGate(FrameProcessor):
    """Between VAD and the STT: audio passes from VAD's start of speech (with the
    :data:`PREROLL_S` before it, which VAD needed to decide) to its end of speech; the rest is
    dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.open = False
        self._preroll: collections.deque[InputAudioRawFrame] = collections.deque(
            maxlen=round(PREROLL_S / FRAME_S)
        )

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InputAudioRawFrame):
            if self.open:
                await self.push_frame(frame, direction)
            else:
                self._preroll.append(frame)
            return
        if (
            isinstance(frame, VADUserStartedSpeakingFrame)
            and direction == FrameDirection.DOWNSTREAM
        ):
            self.open = True
            await self.push_frame(frame, direction)
            while self._preroll:
                await self.push_frame(self._preroll.popleft(), direction)
            return
        if (
            isinstance(frame, VADUserStoppedSpeakingFrame)
            and direction == FrameDirection.DOWNSTREAM
        ):
            self.open = False
        await self.push_frame(frame, direction)


class TranscriptTap(FrameProcessor):
    """After the STT: the user's transcripts to the page, and the end of speech of each turn."""

    def __init__(self, state: SessionState) -> None:
        super().__init__()
        self.state = state

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        state = self.state
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            # Pipecat's convention: the end of speech is VAD's decision minus its stop_secs.
            state.new_pending().speech_end = frame.timestamp - frame.stop_secs
            await state.page.event("turn", state="user_stopped")
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            await state.page.event("turn", state="user_started")
        elif isinstance(frame, InterimTranscriptionFrame):
            await state.page.event("user_transcript", text=frame.text, final=False)
        elif isinstance(frame, TranscriptionFrame):
            turn = state.new_pending()
            turn.final_at = turn.final_at or state.clock()
            state.user_text.append(frame.text)
            await state.page.event("user_transcript", text=frame.text, final=True)
        elif isinstance(frame, ErrorFrame):
            await state.page.event("error", message=str(frame.error))
        await self.push_frame(frame, direction)


class AnswerTap(FrameProcessor):
    """After the LLM: the agent's text to the page, and the LLM's first token of each turn."""

    def __init__(self, state: SessionState) -> None:
        super().__init__()
        self.state = state
        self._text = ""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        state = self.state
        if isinstance(frame, LLMFullResponseStartFrame):
            turn = state.pending or Turn(state.turns)
            state.pending = None
            turn.llm_started = state.clock()
            state.answering, state.answer_sent, self._text = turn, False, ""
            await state.page.event("turn", state="agent_thinking")
        elif isinstance(frame, LLMTextFrame) and state.answering is not None:
            state.answering.llm_first_token = state.answering.llm_first_token or state.clock()
            self._text += frame.text
            await state.page.event("agent_text", text=self._text, final=False)
        elif isinstance(frame, LLMFullResponseEndFrame):
            if self._text:
                state.agent_text.append(self._text)
                await state.page.event("agent_text", text=self._text, final=True)
            self._text = ""
        elif isinstance(frame, ErrorFrame):
            await state.page.event("error", message=str(frame.error))
        await self.push_frame(frame, direction)


class PageOutput(FrameProcessor):
    """After the TTS: the agent's audio to the page; ``interrupt`` at a barge-in, after which no
    audio of the answers begun before it is sent."""

    def __init__(self, state: SessionState) -> None:
        super().__init__()
        self.state = state

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        state = self.state
        if isinstance(frame, InterruptionFrame):
            if state.speaking():
                state.interruptions += 1
                state.metrics.count(INTERRUPTIONS, state.session_id)
                await state.page.event("interrupt")
            state.cancelled_contexts |= state.seen_contexts
            state.answering, state.answer_sent, state.playback_until = None, True, 0.0
        elif isinstance(frame, LLMFullResponseEndFrame) and direction == FrameDirection.DOWNSTREAM:
            # The TTS queues the LLM's end behind the answer's audio: none of it is still to come.
            state.answer_sent = True
        elif isinstance(frame, TTSAudioRawFrame) and direction == FrameDirection.DOWNSTREAM:
            context = frame.context_id or ""
            if context in state.cancelled_contexts:
                return  # an interrupted answer's audio: never after the interrupt event
            state.seen_contexts.add(context)
            now = state.clock()
            turn = state.answering
            if turn is not None and turn.first_audio_sent is None:
                turn.first_audio_sent = now
                await state.page.event("turn", state="agent_speaking")
            await state.page.audio(frame.audio)
            seconds = len(frame.audio) / 2 / frame.sample_rate
            state.playback_until = max(state.playback_until, now) + seconds
            if turn is not None and turn.first_audio_sent is not None and not turn.reported:
                state.report(turn)
                latencies = turn.latencies_ms()
                await state.page.event(
                    "latency",
                    turn=turn.number,
                    **{key: round(value) for key, value in latencies.items() if value is not None},
                )
            return  # audio ends here: the assistant aggregator needs none of it
        await self.push_frame(frame, direction)


class MeasuredSonic(SonicTTSService):
    """``SonicTTSService`` noting, for the turn being answered, its first request and first
    audio."""

    def __init__(self, state: SessionState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    async def run_tts(self, text: str, context_id: str):  # type: ignore[override]
        turn = self.state.answering
        if turn is not None and turn.tts_started is None:
            turn.tts_started = self.state.clock()
        async for frame in super().run_tts(text, context_id):
            if (
                turn is not None
                and turn.sonic_first_audio is None
                and isinstance(frame, TTSAudioRawFrame)
            ):
                turn.sonic_first_audio = self.state.clock()
            yield frame


@dataclass
class Services:
    """What a session is built from (the bot makes them per session from its configuration)."""

    stt: VoxtralSTTService
    llm: LLMService
    tts_kwargs: dict[str, Any]
    system_prompt: str
    greeting: str = ""


class AgentSession:
    """Runs one page's conversation until the page leaves, the session's time is up, or the page
    stays silent for ``idle_s``.

    Args:
        websocket: the page's connection (``websockets`` server connection).
        services: the STT, LLM and Sonic settings.
        metrics: where the EMF lines go.
        max_session_s: the session's longest duration.
        idle_s: seconds without audio from the page before the session ends.
    """

    def __init__(
        self,
        websocket: Any,
        services: Services,
        metrics: MetricsSink,
        *,
        max_session_s: float,
        idle_s: float,
    ) -> None:
        self.websocket = websocket
        self.services = services
        self.session_id = uuid.uuid4().hex[:12]
        self.page = PageLink(websocket)
        self.state = SessionState(self.session_id, self.page, metrics)
        self.max_session_s = max_session_s
        self.idle_s = idle_s
        self.end_reason = ""
        self.tts: MeasuredSonic | None = None

    def build(self) -> PipelineWorker:
        services = self.services
        context = LLMContext([{"role": "system", "content": services.system_prompt}])
        strategies = UserTurnStrategies(
            start=[VADUserTurnStartStrategy(), TranscriptionUserTurnStartStrategy()],
            stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=USER_SPEECH_TIMEOUT_S)],
        )
        aggregators = LLMContextAggregatorPair(
            context, user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
        )
        vad = VADProcessor(vad_analyzer=SileroVADAnalyzer(params=VADParams(stop_secs=VAD_STOP_S)))
        self.tts = MeasuredSonic(self.state, **services.tts_kwargs)
        pipeline = Pipeline(
            [
                vad,
                SpeechGate(),
                services.stt,
                TranscriptTap(self.state),
                aggregators.user(),
                services.llm,
                AnswerTap(self.state),
                self.tts,
                PageOutput(self.state),
                aggregators.assistant(),
            ]
        )
        worker = PipelineWorker(
            pipeline,
            cancel_on_idle_timeout=False,
            params=PipelineParams(
                audio_in_sample_rate=INPUT_SAMPLE_RATE_HZ,
                audio_out_sample_rate=OUTPUT_SAMPLE_RATE_HZ,
            ),
        )

        @worker.event_handler("on_pipeline_error")
        async def on_pipeline_error(_worker: PipelineWorker, frame: ErrorFrame) -> None:
            self.stage_error(frame)

        return worker

    def stage_of(self, processor: object) -> str | None:
        """The stage (``stt``, ``llm``, ``tts``) a processor is, None for the others."""
        stages = {"stt": self.services.stt, "llm": self.services.llm, "tts": self.tts}
        return next(
            (
                stage
                for stage, service in stages.items()
                if service is not None and processor is service
            ),
            None,
        )

    def stage_error(self, frame: ErrorFrame) -> None:
        """Count an error of the STT, the LLM or Sonic (``SttErrors``, ``LlmErrors``,
        ``TtsErrors``); errors of other processors are only logged."""
        stage = self.stage_of(frame.processor)
        logger.warning(
            "session %s: %s error: %s", self.session_id, stage or "pipeline", frame.error
        )
        if stage is not None:
            self.state.metrics.stage_error(stage, self.session_id, str(frame.error))

    async def run(self) -> None:
        """Converse until the end; the pipeline is cancelled (every stream closed) on return."""
        worker = self.build()
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        running = asyncio.ensure_future(runner.run())
        writing = asyncio.ensure_future(self.page.run())
        try:
            await self.page.event(
                "ready",
                session_id=self.session_id,
                input_sample_rate_hz=INPUT_SAMPLE_RATE_HZ,
                output_sample_rate_hz=OUTPUT_SAMPLE_RATE_HZ,
            )
            if self.services.greeting:
                await worker.queue_frame(TTSSpeakFrame(self.services.greeting))
                await self.page.event("agent_text", text=self.services.greeting, final=True)
            reading = asyncio.ensure_future(self._read(worker))
            done, _ = await asyncio.wait(
                {reading, running}, timeout=self.max_session_s, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                self.end_reason = f"the session reached its {self.max_session_s:g} s limit"
            elif reading in done:
                reading.result()
            else:
                self.end_reason = self.end_reason or "the pipeline ended"
            await _stop(reading)
        finally:
            if not running.done():
                await worker.queue_frame(CancelFrame())
                with contextlib.suppress(asyncio.TimeoutError, Exception):
                    await asyncio.wait_for(asyncio.shield(running), 5)
                await _stop(running)
            if not self.page.closed:
                await self.page.event("end", reason=self.end_reason or "the session ended")
            self.page.finish()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(writing), 2)
            await _stop(writing)

    async def _read(self, worker: PipelineWorker) -> None:
        pending = b""
        while True:
            try:
                message = await asyncio.wait_for(self.websocket.recv(), self.idle_s)
            except TimeoutError:
                self.end_reason = f"no audio from the page for {self.idle_s:g} s"
                return
            except Exception:  # ConnectionClosed: the page left
                self.page.closed = True
                self.end_reason = "the page closed the connection"
                return
            if isinstance(message, str):
                if _is_end(message):
                    self.end_reason = "the page ended the session"
                    return
                continue
            if len(message) > MAX_AUDIO_MESSAGE_BYTES:
                await self.page.event(
                    "error", message=f"audio messages are at most {MAX_AUDIO_MESSAGE_BYTES} bytes"
                )
                continue
            pending += message
            while len(pending) >= FRAME_BYTES:
                chunk, pending = pending[:FRAME_BYTES], pending[FRAME_BYTES:]
                await worker.queue_frame(InputAudioRawFrame(chunk, INPUT_SAMPLE_RATE_HZ, 1))


def _is_end(message: str) -> bool:
    try:
        event = json.loads(message)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("type") == "end"


async def _stop(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
