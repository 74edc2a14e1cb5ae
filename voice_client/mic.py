"""``voicectl mic``: a local web page that transcribes the microphone live through the transcription
path.

    voicectl mic --endpoint NAME [--region R] [--profile P] [--port 7860] [--share]
    voicectl mic --url ws://HOST:PORT/invocations-bidirectional-stream

The page is a Gradio app bound to 127.0.0.1 (no public link unless ``--share``: whoever can open the
page calls the endpoint with *your* AWS credentials). The target is opened once, before the page's
address is printed: for ``--endpoint`` the AWS credentials are resolved and the SDK client is made
then, so the command fails at once without them (as ``transcribe`` does), and every recording reuses
them.

One recording is one WebSocket from the page to this process (:data:`RECORDING_PATH`) and one
transcription (:func:`voice_client.realtime.transcribe_stream`, the same code as
``transcribe``). The page's recorder (``mic_page/recorder.js``) captures the microphone with an
AudioWorklet and sends every sample. Gradio's streaming ``gr.Audio`` is not used: its frontend
(gradio 6.31, ``templates/frontend/assets/audio-*.js``) discards a chunk that arrives once recording
is off, so the audio after the last full chunk is lost at Stop, and a chunk captured while its
stream is still being set up (``stream_state`` ``waiting``) is lost too.

Messages on the recording WebSocket (text frames are JSON):

- page -> server: ``{"type": "start", "sample_rate_hz": N}`` first; then binary frames of float32
  little-endian mono samples at that rate; then ``{"type": "stop", "samples": TOTAL}`` once every
  sample has been sent.
- server -> page: ``{"type": "started", "target"}`` once the endpoint has accepted the stream (it is
  opened when the recording starts; accepted at its first server event that is not an ``error``:
  vLLM's ``session.created``, see
  :attr:`voice_client.realtime.TranscriptionMachine.accepted_at`; until then the page shows
  "Connecting to ..." and its audio waits here); ``{"type": "transcript", "text"}`` whenever the
  transcript changed; ``{"type": "stall", "silent_s"}`` while the endpoint does not answer (``0``
  once it answers again; see :func:`watch`); at the end either ``{"type": "done", "text", "figures",
  "result"}`` (``result`` as ``TranscriptionResult.as_dict()``) or ``{"type": "error", "message",
  "summary", "text"}`` (``summary``: one line in the user's words; ``message``: the detail;
  ``text``: the text received so far); then the server closes the WebSocket.

The page opens the recording WebSocket at the first captured audio, so a zero-length recording opens
no stream. The Speak panel has a WebSocket of its own (:data:`SPEAK_PATH`) when ``--sonic-endpoint``
and ``--voice`` are given.

Every request and WebSocket handshake passes :class:`voice_client.mic_guard.PageGuard` first
(loopback ``Host``, the page's own ``Origin``, only the page's routes), and a recording may hold
only so much audio (:data:`MAX_AHEAD_S`, :data:`MAX_QUEUED_AUDIO_S`).

A failure ends the recording: the page stops capturing and shows the one error, which is also
printed on the terminal. When the page goes away (tab closed, reload, browser quit) its WebSocket
closes and the transcription is cancelled, which closes the stream to the endpoint at once.

Gradio is an optional dependency: ``make mic-deps`` in the repository (pinned), or ``pip install
'.[mic]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn
from urllib.parse import urlsplit

import numpy as np
import soxr

from voice_client.audio import (
    CHUNK_BYTES,
    RESAMPLER_QUALITY,
    TARGET_SAMPLE_RATE_HZ,
    float_to_pcm16,
)
from voice_client.errors import UsageError
from voice_client.mic_guard import PageGuard, page_hosts
from voice_client.realtime import (
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    RealtimeError,
    Transcript,
    TranscriptionResult,
    TransportOpener,
    transcribe_stream,
)
from voice_client.transcribe import (
    EXIT_FAILED,
    LIMITS_HELP,
    add_target_arguments,
    format_figures,
    open_target,
    validate_target_arguments,
)

MIC_HOST = "127.0.0.1"
"""Interface the page binds: loopback only, so other machines cannot reach it."""

DEFAULT_PORT = 7860
"""Gradio's customary port."""

RECORDING_PATH = "/voicectl/recording"
"""WebSocket route of a recording, next to Gradio's own routes."""

SPEAK_PATH = "/voicectl/speak"
"""WebSocket route of the Speak panel: ``{"type": "speak", "text"}`` in; ``{"type": "audio",
"sample_rate_hz"}``, binary frames of PCM16 little-endian mono as Sonic streams it, then
``{"type": "done", "time_to_first_audio_s", "audio_s"}`` or ``{"type": "error", "message",
"summary"}`` out. Closing it cancels the Sonic request."""

SPEAK_SAMPLE_RATE_HZ = 44_100
"""The Speak panel's audio rate: Sonic's default output rate (``voicectl speak``'s too)."""

MAX_SPEAK_CHARS = 2_000
"""Characters the Speak panel sends in one call (a paragraph; ``voicectl speak`` takes longer texts
from a file)."""

MIN_SAMPLE_RATE_HZ = 8_000
MAX_SAMPLE_RATE_HZ = 384_000
"""Microphone sample rates accepted from the page (browsers capture at 44.1 or 48 kHz, some devices
at 8-192 kHz)."""

START_MESSAGE_TIMEOUT_S = 10.0
"""Seconds the page has, after its WebSocket opens, to send ``start``."""

SERVER_START_TIMEOUT_S = 30.0
"""Seconds allowed for Gradio's server to come up before the target is opened on its event loop."""

FIRST_ANSWER_TIMEOUT_S = 10.0
"""Watchdog: seconds from the first audio sent to the first answer (a ``transcription.delta``, empty
ones included: vLLM sends one per 80 ms of audio once 0.6 s is buffered:
tests/vllm/test_vllm_contract.py) before the recording fails."""

STALL_NOTICE_S = 3.0
"""Seconds without an answer, while audio is being sent, before the page shows the stall ("no answer
for N s; still sending")."""

STALL_TIMEOUT_S = 15.0
"""Watchdog: seconds without an answer, while audio is being sent, before the recording fails."""

STOP_TIMEOUT_S = 15.0
"""Watchdog: seconds from Stop (the last sample queued) to the final transcript before the recording
fails. The bridge answers the final commit within about 1.4 s of vLLM work (17 deltas at the default
480 ms delay; what the final commit decodes: docs/settings.md, transcription delay); a replay after
a dropped stream adds up to the audio held divided by the 16 x send speed."""

WATCHDOG_TICK_S = 0.25
"""How often the watchdog looks."""

MAX_AHEAD_S = 3.0
"""Seconds of audio the page may send beyond the time since its recording WebSocket opened. A
microphone makes audio in real time; the page sends what it captured every 50 ms (and captures only
once its socket exists), so only a client that is not a microphone gets further ahead, and it is
refused rather than queued (queued, 190 MB sent in 30 s grew the page's server by 194 MB)."""

MAX_QUEUED_AUDIO_S = 60.0
"""Seconds of 16 kHz audio a recording may hold waiting for the endpoint (1.9 MB of PCM16). The
endpoint takes audio faster than real time (a replay after a dropped stream catches up at up to 16
x); more waiting means the stream has stopped taking audio, and the recording ends with an error
instead of growing without bound."""

INSTALL_HINT = (
    "the mic page needs Gradio, an optional dependency: `make mic-deps` in the repository "
    "(pinned, from requirements-mic.lock), or pip install '.[mic]' where the project is "
    "installed with pip"
)

_ASSETS = resources.files("voice_client") / "mic_page"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mic`` subcommand."""
    parser = subparsers.add_parser(
        "mic",
        help="transcribe your microphone live in a local web page",
        description=(
            "Serve a local web page (127.0.0.1) that streams your microphone "
            "through the Voxtral endpoint and shows the transcript as it grows. "
            "Needs the optional Gradio dependency: `make mic-deps` in the repository, or "
            "pip install '.[mic]' where the project is installed with pip. "
            + LIMITS_HELP.replace(
                "the run ends with exit code 1 and one line on stderr",
                "the recording ends with one error on the page",
            )
        ),
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"local port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--sonic-endpoint",
        metavar="NAME",
        help="the Sonic endpoint the page's Speak panel calls (InvokeEndpointWithResponseStream; "
        "runtime URL from AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME as for `voicectl speak`)",
    )
    parser.add_argument(
        "--voice",
        metavar="ID",
        help="Cartesia voice ID for the Speak panel (with --sonic-endpoint)",
    )
    parser.add_argument(
        "--share",
        action="store_true",
        help="also create a public gradio.live link (exposes your AWS credentials' access to "
        "anyone with the link; off by default)",
    )
    parser.set_defaults(func=run)


def launch_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``gradio.Blocks.launch``: loopback only, public link only with
    ``--share``, no browser opened, no server-side rendering (the page is one static component), no
    "Use via API" link (the page has no Gradio API), and not blocking (:func:`serve` yields,
    :func:`run` waits)."""
    return {
        "server_name": MIC_HOST,
        "server_port": args.port,
        "share": bool(args.share),
        "inbrowser": False,
        "prevent_thread_lock": True,
        "quiet": True,
        "ssr_mode": False,
        "footer_links": ["gradio", "settings"],
    }


def import_gradio() -> Any:
    """Import gradio, or raise :class:`UsageError` saying how to install it."""
    try:
        import gradio
    except ImportError as error:
        raise UsageError(INSTALL_HINT) from error
    return gradio


def log(message: str) -> None:
    """Print one line for the terminal that runs the page (stderr, flushed)."""
    print(f"voicectl mic: {message}", file=sys.stderr, flush=True)


class MicTranscriber:
    """One recording: microphone samples in, a growing transcript out.

    :meth:`start` opens the stream to the endpoint at once (not at the first chunk), so a recording
    that cannot reach the endpoint fails before any audio is taken. :meth:`feed` takes samples as
    the page delivers them (any sample rate, int16 or float, mono or multi-channel), mixes them
    down, resamples them to 16 kHz with a streaming soxr resampler (which keeps filter state across
    chunks, unlike resampling each chunk alone) and queues 4096-byte PCM16 chunks; :meth:`end_audio`
    flushes the resampler and the last partial chunk, so every sample is sent.

    Args:
        opener: opens a stream to the endpoint (from
            :func:`voice_client.transcribe.open_target`).
        model: model name for ``session.update``.
        session_limit_s: audio seconds per session (see :func:`transcribe_stream`).
        on_delta: called with each ``transcription.delta`` text.
        on_replay: called with a one-line reason when a session is replayed on a new stream.
    """

    def __init__(
        self,
        opener: TransportOpener,
        *,
        model: str = DEFAULT_MODEL,
        session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
        on_delta: Callable[[str], None] = lambda delta: None,
        on_replay: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._opener = opener
        self._model = model
        self._session_limit_s = session_limit_s
        self._on_delta = on_delta
        self._on_replay = on_replay
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queued_bytes = 0
        self._pending = bytearray()
        self._resampler: soxr.ResampleStream | None = None
        self._sample_rate_hz: int | None = None
        self._audio_ended = False
        self._transcript = Transcript()
        self._first_transport: Any = None
        self.first_sent_at: float | None = None
        """``time.monotonic()`` of the first chunk handed to the endpoint, for the watchdog."""
        self.last_sent_at: float | None = None
        self.last_answer_at: float | None = None
        """``time.monotonic()`` of the last ``transcription.delta`` (empty ones included) or
        ``transcription.done``."""
        self.audio_ended_at: float | None = None
        self.accepted = asyncio.Event()
        """Set at the endpoint's first event that is not an ``error``: it accepted the stream."""
        self.task: asyncio.Task[TranscriptionResult] | None = None
        """The transcription, once :meth:`start` returned; it ends after :meth:`end_audio`, or with
        the failure."""

    async def start(self) -> None:
        """Open the stream to the endpoint and start the transcription.

        Raises:
            RealtimeError: the stream cannot be opened (the message says what to check).
        """
        self._first_transport = await self._opener()
        self.task = asyncio.create_task(
            transcribe_stream(
                self._chunks(),
                self._open,
                model=self._model,
                on_delta=self._answered,
                on_replay=self._on_replay,
                on_session_text=lambda text: self._answered(None),
                on_accepted=self.accepted.set,
                transcript=self._transcript,
                session_limit_s=self._session_limit_s,
            )
        )

    def _answered(self, delta: str | None) -> None:
        self.last_answer_at = time.monotonic()
        if delta is not None:
            self._on_delta(delta)

    @property
    def text(self) -> str:
        """The transcript so far: finished sessions plus the deltas of the current one."""
        return self._transcript.text

    def feed(self, sample_rate_hz: int, samples: np.ndarray) -> None:
        """Queue microphone samples (shape ``(n,)`` or ``(n, channels)``; int16, or float in [-1,
        1])."""
        data = np.asarray(samples)
        if np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.float32) / float(np.iinfo(data.dtype).max + 1)
        mono = data.astype(np.float32) if data.ndim == 1 else data.astype(np.float32).mean(axis=1)
        if self._resampler is None or self._sample_rate_hz != sample_rate_hz:
            self._flush_resampler()
            self._sample_rate_hz = sample_rate_hz
            self._resampler = soxr.ResampleStream(
                sample_rate_hz, TARGET_SAMPLE_RATE_HZ, 1, dtype="float32", quality=RESAMPLER_QUALITY
            )
        self._queue_pcm(float_to_pcm16(self._resampler.resample_chunk(mono)))

    def end_audio(self) -> None:
        """No more samples: queue what the resampler holds and the last partial chunk, then the end
        (idempotent)."""
        if self._audio_ended:
            return
        self._audio_ended = True
        self.audio_ended_at = time.monotonic()
        self._flush_resampler()
        if self._pending:
            self._put(bytes(self._pending))
            self._pending.clear()
        self._queue.put_nowait(None)

    async def stop(self) -> TranscriptionResult:
        """End the audio, wait for the final transcript and return the result.

        Raises:
            RealtimeError: the transcription failed.
        """
        self.end_audio()
        assert self.task is not None, "start() was not called"
        try:
            return await self.task
        finally:
            await self._close_unused_transport()

    async def cancel(self) -> None:
        """Abandon the recording (the page went away): stop the transcription, which closes its
        stream."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await self.task
        await self._close_unused_transport()

    async def _open(self) -> Any:
        """The opener handed to :func:`transcribe_stream`: the stream opened by :meth:`start`
        first."""
        transport, self._first_transport = self._first_transport, None
        return transport if transport is not None else await self._opener()

    async def _close_unused_transport(self) -> None:
        transport, self._first_transport = self._first_transport, None
        if transport is not None:
            with contextlib.suppress(Exception):
                await transport.close()

    def _flush_resampler(self) -> None:
        if self._resampler is not None:
            self._queue_pcm(
                float_to_pcm16(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True))
            )
            self._resampler = None

    def _queue_pcm(self, pcm16: bytes) -> None:
        self._pending += pcm16
        while len(self._pending) >= CHUNK_BYTES:
            self._put(bytes(self._pending[:CHUNK_BYTES]))
            del self._pending[:CHUNK_BYTES]

    def _put(self, chunk: bytes) -> None:
        """Queue a chunk for the endpoint, or raise :class:`AudioOverrun` past
        :data:`MAX_QUEUED_AUDIO_S`."""
        waiting_s = (self._queued_bytes + len(chunk)) / (2 * TARGET_SAMPLE_RATE_HZ)
        if waiting_s > MAX_QUEUED_AUDIO_S:
            raise AudioOverrun(
                f"the endpoint stopped taking audio: {waiting_s:.0f} s of it is waiting to be sent "
                f"(at most {MAX_QUEUED_AUDIO_S:.0f} s is kept)"
            )
        self._queued_bytes += len(chunk)
        self._queue.put_nowait(chunk)

    async def _chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._queue.get()) is not None:
            self._queued_bytes -= len(chunk)
            self.last_sent_at = time.monotonic()
            if self.first_sent_at is None:
                self.first_sent_at = self.last_sent_at
            yield chunk


@dataclass
class SpokenAudio:
    """What one Speak request has sent to the page so far."""

    audio_s: float = 0.0
    time_to_first_audio_s: float | None = None


class AudioOverrun(Exception):
    """More audio than a recording may hold (:data:`MAX_AHEAD_S`, :data:`MAX_QUEUED_AUDIO_S`); the
    message says which."""


class StreamStalled(Exception):
    """The watchdog gave up on the stream (no first answer, no answer while audio flows, or a Stop
    that does not finish); the message says which, in the user's words."""


async def watch(
    transcriber: MicTranscriber,
    page: PageSocket,
    target: str,
    clock: Callable[[], float] = time.monotonic,
) -> NoReturn:
    """The recording's watchdog: tell the page when the endpoint has not answered for
    :data:`STALL_NOTICE_S` while audio is sent (``{"type": "stall", "silent_s"}``, and ``{"type":
    "stall", "silent_s": 0}`` once it answers again), and raise :class:`StreamStalled` when the
    stream is not accepted (no first event) or has sent no first answer within
    :data:`FIRST_ANSWER_TIMEOUT_S` of the first audio sent, no answer for :data:`STALL_TIMEOUT_S`,
    or no final transcript :data:`STOP_TIMEOUT_S` after Stop. The timeouts are read at each tick
    (tests shorten them)."""
    stalled = 0  # the silence last shown, in whole seconds (0: none shown)
    while True:
        await asyncio.sleep(WATCHDOG_TICK_S)
        now = clock()
        if not transcriber.accepted.is_set():
            # Never accepted: that is the diagnosis, whichever deadline passes first (Stop's, when
            # the stream opens so late that no audio has been sent yet).
            for since, limit_s in (
                (transcriber.first_sent_at, FIRST_ANSWER_TIMEOUT_S),
                (transcriber.audio_ended_at, STOP_TIMEOUT_S),
            ):
                if since is not None and now - since > limit_s:
                    raise StreamStalled(
                        f"{target} did not accept the stream: nothing came back in {limit_s:.0f} "
                        "s. Check that the endpoint is in service and its logs, then press "
                        "Record again."
                    )
        if (
            transcriber.audio_ended_at is not None
            and now - transcriber.audio_ended_at > STOP_TIMEOUT_S
        ):
            raise StreamStalled(
                f"The transcript did not finish within {STOP_TIMEOUT_S:.0f} s of Stop: {target} "
                "stopped answering. Check that the endpoint is in service and its logs, then press "
                "Record again."
            )
        if transcriber.first_sent_at is None:
            continue
        if transcriber.last_answer_at is None:
            if now - transcriber.first_sent_at > FIRST_ANSWER_TIMEOUT_S:
                raise StreamStalled(
                    f"{target} accepted the stream but sent nothing back in "
                    f"{FIRST_ANSWER_TIMEOUT_S:.0f} s. Check that the endpoint is in service and "
                    "its logs, then press Record again."
                )
            continue
        silent_s = now - max(transcriber.last_answer_at, transcriber.first_sent_at)
        if silent_s > STALL_TIMEOUT_S and transcriber.audio_ended_at is None:
            raise StreamStalled(
                f"{target} stopped answering: nothing for {STALL_TIMEOUT_S:.0f} s while audio was "
                "sent. Check that the endpoint is in service and its logs, then press Record again."
            )
        if silent_s > STALL_NOTICE_S and transcriber.audio_ended_at is None:
            if (shown := max(1, int(silent_s))) != stalled:  # once per whole second
                stalled = shown
                await page.send({"type": "stall", "silent_s": shown})
        elif stalled and silent_s <= STALL_NOTICE_S:
            stalled = 0
            await page.send({"type": "stall", "silent_s": 0})


class PageClosed(Exception):
    """The page's WebSocket closed (tab closed, reload, browser quit, network gone)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"WebSocket code {code}")
        self.code = code


class PageProtocolError(Exception):
    """The page sent a message that breaks the recording protocol (see the module docstring)."""


class PageSocket:
    """A recording WebSocket (Starlette's) with the two failure kinds the recording cares about.

    Raises :class:`PageClosed` when the page is gone, whichever call notices it.
    """

    def __init__(self, websocket: Any) -> None:
        self._websocket = websocket

    async def receive(self) -> str | bytes:
        """The next message: text (JSON) or bytes."""
        message = await self._websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise PageClosed(message.get("code"))
        if message.get("bytes") is not None:
            return message["bytes"]
        return message.get("text") or ""

    async def send(self, event: dict[str, Any]) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self._websocket.send_text(json.dumps(event))
        except (
            WebSocketDisconnect,
            OSError,
            RuntimeError,
        ) as error:  # RuntimeError: sent after the close
            raise PageClosed(getattr(error, "code", None)) from error

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._websocket.close()


async def read_start(page: PageSocket) -> int:
    """Read the page's ``start`` message and return its sample rate in Hz.

    Raises:
        PageProtocolError: it is not a valid ``start``.
        PageClosed: the page went away.
    """
    message = await page.receive()
    event = _json_object(message)
    rate = event.get("sample_rate_hz")
    if event.get("type") != "start" or not isinstance(rate, int) or isinstance(rate, bool):
        raise PageProtocolError(
            'the first message must be {"type": "start", "sample_rate_hz": N}, '
            f"got {message!r:.200}"
        )
    if not MIN_SAMPLE_RATE_HZ <= rate <= MAX_SAMPLE_RATE_HZ:
        raise PageProtocolError(
            f"sample rate {rate} Hz is outside {MIN_SAMPLE_RATE_HZ}-{MAX_SAMPLE_RATE_HZ} Hz"
        )
    return rate


async def read_audio(
    page: PageSocket,
    transcriber: MicTranscriber,
    sample_rate_hz: int,
    opened_at: float | None = None,
) -> NoReturn:
    """Feed the page's audio frames to ``transcriber`` until ``stop``, then watch the socket for the
    page leaving.

    ``opened_at`` (``time.monotonic()``; default: now) is when the recording WebSocket opened: the
    page may send at most :data:`MAX_AHEAD_S` more audio than the time since then.

    Never returns: it ends by raising :class:`PageClosed` (the page went away, before or after
    ``stop``), :class:`PageProtocolError` (a malformed frame, a sample count that does not match, a
    message after ``stop``) or :class:`AudioOverrun` (audio faster than real time, or more waiting
    than a recording may hold).
    """
    opened_at = time.monotonic() if opened_at is None else opened_at
    received = 0
    stopped = False
    while True:
        message = await page.receive()
        if stopped:
            raise PageProtocolError(f"the page sent a message after stop: {message!r:.200}")
        if isinstance(message, bytes):
            if len(message) % 4:
                raise PageProtocolError(
                    f"an audio frame of {len(message)} bytes is not whole float32 samples"
                )
            elapsed_s = time.monotonic() - opened_at
            audio_s = (received + len(message) // 4) / sample_rate_hz
            if audio_s > elapsed_s + MAX_AHEAD_S:
                raise AudioOverrun(
                    f"the page sent {audio_s:.1f} s of audio in {elapsed_s:.1f} s, faster than a "
                    f"microphone records (at most {MAX_AHEAD_S:.0f} s ahead of real time)"
                )
            samples = np.frombuffer(message, dtype="<f4")
            if not np.isfinite(samples).all():
                raise PageProtocolError("an audio frame holds samples that are not finite numbers")
            transcriber.feed(sample_rate_hz, samples)
            received += samples.size
            continue
        event = _json_object(message)
        if event.get("type") != "stop":
            raise PageProtocolError(f"expected audio or stop, got {message!r:.200}")
        if event.get("samples") != received:
            raise PageProtocolError(
                f"the page recorded {event.get('samples')} samples but {received} arrived"
            )
        transcriber.end_audio()
        stopped = True


def _json_object(message: str | bytes) -> dict[str, Any]:
    try:
        event = json.loads(message)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PageProtocolError(f"expected a JSON object, got {message!r:.200}") from None
    if not isinstance(event, dict):
        raise PageProtocolError(f"expected a JSON object, got {message!r:.200}")
    return event


class TranscriptPublisher:
    """Sends the transcript to the page as it changes, without taking back text the page may already
    show.

    When a dropped stream's session is replayed, :func:`transcribe_stream` discards that session's
    text and the replay transcribes the same audio again: the text re-grows through words already
    received. Showing that would blank words and bring them back (a flicker), and if the replay
    failed the words would be lost; so a text that is a beginning of the longest one received is not
    shown, and :meth:`text` keeps the longer one.
    """

    def __init__(self, page: PageSocket, transcriber: MicTranscriber) -> None:
        self._page = page
        self._transcriber = transcriber
        self._changed = asyncio.Event()
        self._text = ""
        self._shown = ""

    def update(self) -> None:
        """Note the transcript now and wake :meth:`run` (call it on every delta and replay)."""
        self.text()
        self._changed.set()

    def text(self) -> str:
        """The text to show: the transcript, or the longer text received before a replay that has
        not caught up."""
        current = self._transcriber.text
        if not self._text.startswith(current):
            self._text = current
        return self._text

    async def run(self) -> NoReturn:
        """Send the text to show each time it changed (one message for all the updates since the
        last one)."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            if (text := self.text()) != self._shown:
                await self._page.send({"type": "transcript", "text": text})
                self._shown = text


class MicServer:
    """The server side of the page: the target opened once, one transcription per recording
    WebSocket.

    Gradio serves the page on its own event loop (a uvicorn server in a thread); :meth:`lifespan`
    runs on that loop, and :meth:`open_target` opens the target there, so the SDK client and every
    stream share one loop.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self.target = args.url or f"SageMaker endpoint {args.endpoint}"
        """What the page streams to, for people: the URL or the endpoint's name."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = threading.Event()
        self._opener: TransportOpener | None = None
        self._exit_stack = contextlib.AsyncExitStack()
        self._numbers = itertools.count(1)
        self.guard: PageGuard | None = None
        """The gate in front of the app (:mod:`voice_client.mic_guard`), once the server
        started."""

    def allow_share_link(self, share_url: str) -> None:
        """Accept requests for the ``--share`` link's host (over https), once Gradio made the
        link."""
        assert self.guard is not None, "the server has not started"
        host = urlsplit(share_url).netloc.lower()
        self.guard.hosts = self.guard.hosts | {host}
        self.guard.https_hosts = self.guard.https_hosts | {host}

    def app_kwargs(self) -> dict[str, Any]:
        """``app_kwargs`` for ``gradio.Blocks.launch``: the recording route and the lifespan."""
        from starlette.routing import WebSocketRoute

        return {
            "routes": [
                WebSocketRoute(RECORDING_PATH, self.serve_recording),
                WebSocketRoute(SPEAK_PATH, self.serve_speak),
            ],
            "lifespan": self.lifespan,
        }

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Runs on the server's event loop, before it takes a request: put the :class:`PageGuard` in
        front of the whole app (outside Gradio's own middleware, whose CORS layer answers preflights
        without calling the app), note the loop, and close the target when the server stops."""
        stack = (
            app.middleware_stack
            if app.middleware_stack is not None
            else app.build_middleware_stack()
        )
        self.guard = PageGuard(
            stack,
            hosts=page_hosts(self._args.port),
            websocket_paths=[RECORDING_PATH, SPEAK_PATH],
            log=log,
        )
        app.middleware_stack = (
            self.guard
        )  # Starlette calls middleware_stack for every request once it is set
        self._loop = asyncio.get_running_loop()
        self._serving.set()
        try:
            yield
        finally:
            await self._exit_stack.aclose()

    def open_target(self) -> None:
        """Open the target on the server's event loop; call from another thread once the server is
        up.

        Raises:
            UsageError: no Region, or an unknown profile.
            RealtimeError: no usable AWS credentials (code ``credentials``).
            TimeoutError: the server did not come up within :data:`SERVER_START_TIMEOUT_S`.
        """
        if not self._serving.wait(SERVER_START_TIMEOUT_S):
            raise TimeoutError(
                f"the page's server did not start within {SERVER_START_TIMEOUT_S:.0f} s"
            )
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._open_target(), self._loop).result()

    async def _open_target(self) -> None:
        self._opener = await self._exit_stack.enter_async_context(open_target(self._args))

    async def serve_speak(self, websocket: Any) -> None:
        """The :data:`SPEAK_PATH` route: one text spoken by Sonic, its audio relayed to the page as
        it streams.

        The page leaving (tab closed, reload, its WebSocket closed) cancels the Sonic request at
        once (see :meth:`_speak`): it does not hold one of the endpoint's generation slots until
        its audio ends.
        """
        await websocket.accept()
        page = PageSocket(websocket)
        began = time.monotonic()
        try:
            event = _json_object(await asyncio.wait_for(page.receive(), START_MESSAGE_TIMEOUT_S))
            text = event.get("text")
            if event.get("type") != "speak" or not isinstance(text, str) or not text.strip():
                raise PageProtocolError('expected {"type": "speak", "text": "..."} with some text')
            if len(text) > MAX_SPEAK_CHARS:
                raise PageProtocolError(
                    f"the text has {len(text)} characters; at most {MAX_SPEAK_CHARS} are spoken "
                    "at once (voicectl speak reads longer texts from a file)"
                )
            if not self._args.sonic_endpoint or not self._args.voice:
                raise PageProtocolError(
                    "Speak needs a Sonic endpoint: start voicectl mic with --sonic-endpoint NAME "
                    "--voice ID"
                )
            await page.send({"type": "audio", "sample_rate_hz": SPEAK_SAMPLE_RATE_HZ})
            spoken = SpokenAudio()
            try:
                await self._speak(page, text, spoken)
            except PageClosed as closed:
                log(
                    f"speak abandoned: the page's WebSocket closed ({closed}) "
                    f"{time.monotonic() - began:.1f} s after the request, after "
                    f"{spoken.audio_s:.2f} s of audio; its Sonic request is cancelled"
                )
                raise
            await page.send(
                {
                    "type": "done",
                    "time_to_first_audio_s": spoken.time_to_first_audio_s,
                    "audio_s": spoken.audio_s,
                }
            )
            log(
                f"spoke {len(text)} characters with {self._args.sonic_endpoint}: first audio after "
                f"{spoken.time_to_first_audio_s or 0:.3f} s"
            )
        except PageClosed:
            pass
        except (PageProtocolError, TimeoutError, ValueError) as error:
            await self._speak_failed(page, str(error) or "the page sent no text in time")
        except Exception as error:  # SonicError, UsageError (no Region): on the page and terminal
            await self._speak_failed(page, str(error))
        finally:
            await page.close()

    async def _speak(self, page: PageSocket, text: str, spoken: SpokenAudio) -> None:
        """Speak ``text`` with Sonic and send each chunk of audio to the page as it arrives, until
        Sonic's end or the page's. The page's socket is read meanwhile, so its close is noticed
        even while Sonic sends nothing; the request is then cancelled, which closes its connection
        (:class:`~voice_client.frameworks.sonic_stream.SonicSynthesizer`: boto3's stream, read
        by a blocking thread, could not be stopped and ran to its end).

        Raises:
            PageClosed: the page went away (the request is cancelled).
            PageProtocolError: the page sent another message (one text per connection).
            SonicError: the request was refused or its stream failed.
        """
        from voice_client.frameworks.sonic_stream import SonicSynthesizer
        from voice_client.frameworks.targets import SonicTarget

        target = SonicTarget(
            self._args.sonic_endpoint, region=self._args.region, profile=self._args.profile
        )
        synthesizer = SonicSynthesizer(target, voice_id=self._args.voice)

        async def relay() -> None:
            audio = synthesizer.stream(text, SPEAK_SAMPLE_RATE_HZ)
            try:
                async for pcm16 in audio:
                    spoken.time_to_first_audio_s = synthesizer.last_time_to_first_audio_s
                    await self._send_bytes(page, pcm16)
                    spoken.audio_s += len(pcm16) / 2 / SPEAK_SAMPLE_RATE_HZ
            finally:
                await audio.aclose()  # closes the request's connection unless Sonic had ended it

        async def watch_page() -> NoReturn:
            message = await page.receive()  # raises PageClosed when the page goes away
            raise PageProtocolError(
                f"one text per Speak connection; got another message: {message!r:.200}"
            )

        speaking, watching = asyncio.ensure_future(relay()), asyncio.ensure_future(watch_page())
        try:
            await asyncio.wait({speaking, watching}, return_when=asyncio.FIRST_COMPLETED)
            if not speaking.done():
                watching.result()  # raises
            speaking.result()
        finally:
            for task in (speaking, watching):
                await _stop_task(task)
            await synthesizer.aclose()

    @staticmethod
    async def _send_bytes(page: PageSocket, data: bytes) -> None:
        try:
            await page._websocket.send_bytes(data)
        except Exception as error:
            raise PageClosed(getattr(error, "code", None)) from error

    async def _speak_failed(self, page: PageSocket, message: str) -> None:
        log(f"speak failed: {message}")
        with contextlib.suppress(PageClosed):
            await page.send(
                {
                    "type": "error",
                    "message": message,
                    "summary": summarize_error(
                        message, f"Sonic endpoint {self._args.sonic_endpoint}"
                    ),
                }
            )

    async def serve_recording(self, websocket: Any) -> None:
        """The :data:`RECORDING_PATH` route: one recording, from ``start`` to ``done`` or an
        error."""
        number = next(self._numbers)
        await (
            websocket.accept()
        )  # Host, Origin and route were checked by the PageGuard in front of the app
        opened_at = time.monotonic()
        page = PageSocket(websocket)
        try:
            await self._record(page, number, opened_at)
        except PageClosed:
            pass  # gone before the recording started, or while an error was being reported
        finally:
            await page.close()

    async def _record(self, page: PageSocket, number: int, opened_at: float) -> None:
        try:
            sample_rate_hz = await asyncio.wait_for(read_start(page), START_MESSAGE_TIMEOUT_S)
        except PageProtocolError as error:
            return await self._fail(page, number, f"the page sent a bad message: {error}")
        except TimeoutError:
            return await self._fail(
                page,
                number,
                f"the page sent no start message within {START_MESSAGE_TIMEOUT_S:.0f} s",
            )
        if self._opener is None:
            return await self._fail(
                page, number, "voicectl mic is still starting: press Record again in a moment"
            )

        def replayed(reason: str) -> None:
            log(f"recording {number}: {reason}")
            publisher.update()

        transcriber = MicTranscriber(
            self._opener,
            model=self._args.model,
            session_limit_s=self._args.session_limit,
            on_delta=lambda delta: publisher.update(),
            on_replay=replayed,
        )
        publisher = TranscriptPublisher(page, transcriber)
        reader = asyncio.create_task(read_audio(page, transcriber, sample_rate_hz, opened_at))
        opening = asyncio.create_task(transcriber.start())
        publishing: asyncio.Task[NoReturn] | None = None
        watchdog: asyncio.Task[NoReturn] | None = None
        accepting: asyncio.Task[Any] | None = None
        began = time.monotonic()
        try:
            await asyncio.wait({opening, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not opening.done():
                # the page left (or misbehaved) while the stream was opening: raises
                reader.result()
            opening.result()
            watchdog = asyncio.create_task(
                watch(transcriber, page, self.target)
            )  # also bounds the wait to accept
            assert transcriber.task is not None
            # "Recording" only once the endpoint accepted: an opened stream may still be refused
            # (module docstring).
            accepting = asyncio.create_task(transcriber.accepted.wait())
            await asyncio.wait(
                {accepting, reader, transcriber.task, watchdog}, return_when=asyncio.FIRST_COMPLETED
            )
            if transcriber.accepted.is_set():
                log(
                    f"recording {number}: streaming {sample_rate_hz} Hz audio to {self.target} "
                    "(it accepted the stream)"
                )
                await page.send({"type": "started", "target": self.target})
                publishing = asyncio.create_task(
                    publisher.run()
                )  # after "started": no text before it
                await asyncio.wait(
                    {reader, transcriber.task, watchdog}, return_when=asyncio.FIRST_COMPLETED
                )
            if watchdog.done():
                watchdog.result()  # raises StreamStalled
            if not transcriber.task.done():
                reader.result()  # raises: read_audio never returns
            result = transcriber.task.result()
            if publishing is not None:
                await _stop_task(publishing)
            await page.send(
                {
                    "type": "done",
                    "text": result.transcript,
                    "figures": format_figures(result),
                    "result": result.as_dict(),
                }
            )
            log(f"recording {number} done: {format_figures(result)}")
        except PageClosed as closed:
            log(
                f"recording {number} abandoned: the page's WebSocket closed ({closed}) "
                f"{time.monotonic() - began:.1f} s after the start, before Stop; its stream to "
                "the endpoint is closed"
            )
        except PageProtocolError as error:
            await self._fail(
                page, number, f"the page sent a bad message: {error}", publisher.text()
            )
        except StreamStalled as error:  # already in the user's words
            await self._fail(page, number, str(error), publisher.text(), summary=str(error))
        except (RealtimeError, AudioOverrun) as error:
            await self._fail(page, number, str(error), publisher.text())
        finally:
            for task in (opening, reader, accepting, publishing, watchdog):
                if task is not None:
                    await _stop_task(task)
            await transcriber.cancel()

    async def _fail(
        self,
        page: PageSocket,
        number: int,
        message: str,
        text: str = "",
        summary: str | None = None,
    ) -> None:
        """End the recording with one error: on the terminal and on the page (which stops
        recording), there as one line in the user's words (``summary``) with the full ``message``
        behind a details toggle."""
        log(f"recording {number} failed: {message}")
        with contextlib.suppress(PageClosed):
            await page.send(
                {
                    "type": "error",
                    "message": message,
                    "text": text,
                    "summary": summary or summarize_error(message, self.target),
                }
            )


def summarize_error(message: str, target: str) -> str:
    """One line for the page: what failed and what to check (the full ``message`` stays behind
    "Details").

    The patterns are the clients' own messages (voice_client/realtime/,
    voice_client/sagemaker_stream.py, voice_client/frameworks/sonic_stream.py, this module).
    """
    lowered = message.lower()
    if "http/2 could not be negotiated" in lowered or "http1_1" in lowered:
        return (
            "The endpoint URL answered without HTTP/2, which streaming needs: HTTP/2 needs "
            "https://, so check that --endpoint-url starts with https://."
        )
    if refused := re.search(r"ModelError[^(]*\(status (4\d\d)\): ([^.]*)", message):
        return (
            f"{target} refused the request ({refused.group(1)}: {refused.group(2)}). Check the "
            "voice ID and the text."
        )
    if message.startswith("ModelError"):
        return (
            f"{target} could not reach its model container. Check that the endpoint is in "
            "service and its CloudWatch logs, then press Record again."
        )
    if message.startswith("cannot open a WebSocket"):
        return (
            f"{target} is not reachable. Check that the container is running, then press Record "
            "again."
        )
    if "certificate" in lowered or "tls_error" in lowered:
        return (
            "The endpoint's certificate is not trusted. Check AWS_CA_BUNDLE, then press Record "
            "again."
        )
    if "credentials" in lowered or "signature" in lowered:
        return (
            "AWS refused the credentials. Check them (aws sts get-caller-identity) and the Region."
        )
    if "access denied" in lowered:
        return (
            "Access denied: the caller needs sagemaker:InvokeEndpointWithBidirectionalStream on "
            "the endpoint."
        )
    if message.startswith(("the page sent", "the endpoint stopped taking audio")):
        return (
            "The recording was stopped: "
            + message[0].lower()
            + message[1:].split(". ")[0].rstrip(".")
            + "."
        )
    first = message.split(". ")[0].split("; ")[0].rstrip(".")
    return first[0].upper() + first[1:] + "." if first else message


async def _stop_task(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if it still runs and wait for it, keeping its outcome from being reported as
    unretrieved."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def build_page(gr: Any, server: MicServer) -> Any:
    """Build the Gradio Blocks page (``gr`` is the gradio module): a heading and the recorder
    component."""
    with gr.Blocks(title="voicectl mic", analytics_enabled=False) as page:
        gr.Markdown(
            f"### Live transcription\nStreaming to {server.target}. Press **Record**, speak, "
            "press **Stop**."
        )
        gr.HTML(
            html_template=(_ASSETS / "recorder.html").read_text("utf-8"),
            css_template=(_ASSETS / "recorder.css").read_text("utf-8"),
            js_on_load=(_ASSETS / "recorder.js").read_text("utf-8"),
            recording_path=RECORDING_PATH.lstrip("/"),
            speak_path=SPEAK_PATH.lstrip("/"),
            target=server.target,
        )
    return page


@contextlib.contextmanager
def serve(args: argparse.Namespace, gradio_module: Any = None) -> Iterator[str]:
    """Serve the page for ``args`` and yield its local URL; stop the server (and every recording) on
    exit.

    The target is opened before the URL is yielded (see the module docstring).

    Raises:
        UsageError: bad arguments, Gradio missing, the port in use, no Region or an unknown profile.
        RealtimeError: no usable AWS credentials.
    """
    validate_target_arguments(args)
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port must be a TCP port from 1 to 65535, got {args.port}")
    gr = gradio_module if gradio_module is not None else import_gradio()
    server = MicServer(args)
    page = build_page(gr, server)
    settings = launch_kwargs(args)
    if settings["share"]:
        log(
            "--share creates a public link: anyone who has it can call the endpoint with your "
            "AWS credentials. Close the page when done."
        )
    try:
        page.launch(**settings, app_kwargs=server.app_kwargs())
    except OSError as error:  # gradio: "Cannot find empty port in range: N-N. ..."
        raise UsageError(
            f"cannot serve the page on {MIC_HOST}:{args.port} ({str(error).split('. ')[0]}); "
            "another program (or another voicectl mic) uses the port: pass --port with a free "
            "one"
        ) from error
    try:
        if page.share_url:
            server.allow_share_link(page.share_url)
        server.open_target()
        yield f"http://{MIC_HOST}:{page.server_port}"
    finally:
        page.close(verbose=False)


def run(args: argparse.Namespace, gradio_module: Any = None) -> int:
    """Entry point of ``voicectl mic``: serve the page until Ctrl-C; exit 1 when the target cannot
    be opened."""
    try:
        with serve(args, gradio_module) as url:
            # from the line on: a Ctrl-C while it is being written stops the page as one afterwards
            # does
            try:
                log(f"open {url} (Ctrl-C to stop)")
                threading.Event().wait()
            except KeyboardInterrupt:
                log("stopping")
    except RealtimeError as error:
        log(str(error))
        return EXIT_FAILED
    return 0
