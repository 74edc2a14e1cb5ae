"""``voicectl mic``: a local web page that streams the microphone through the transcription path.

    voicectl mic --endpoint NAME [--region R] [--profile P] [--port 7860] [--share]
    voicectl mic --url ws://HOST:PORT/invocations-bidirectional-stream

The page (Gradio) sends the microphone audio in short chunks; each recording is one transcription
(:func:`voicectl.realtime.transcribe_stream`, the same code as ``transcribe``), and the transcript grows on the page
as deltas arrive. The server binds 127.0.0.1 only and creates no public link unless ``--share`` is given: whoever
can open the page calls the endpoint with *your* AWS credentials.

Gradio is an optional dependency: ``pip install '.[mic]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import soxr

from voicectl.audio import CHUNK_BYTES, RESAMPLER_QUALITY, TARGET_SAMPLE_RATE_HZ, float_to_pcm16
from voicectl.cli import UsageError
from voicectl.realtime import RealtimeError, TranscriptionResult, join_transcripts, transcribe_stream
from voicectl.transcribe import add_target_arguments, format_figures, open_target, validate_target_arguments

MIC_HOST = "127.0.0.1"
"""Interface the page binds: loopback only, so other machines cannot reach it."""

DEFAULT_PORT = 7860
"""Gradio's customary port."""

STREAM_EVERY_S = 0.25
"""Seconds of microphone audio per chunk sent from the browser to the page's server."""

INSTALL_HINT = "the mic page needs Gradio, an optional dependency: pip install '.[mic]' (from the repository root)"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mic`` subcommand."""
    parser = subparsers.add_parser("mic", help="transcribe your microphone live in a local web page",
                                   description=__doc__.split("\n\n")[0])
    add_target_arguments(parser)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"local port (default: {DEFAULT_PORT})")
    parser.add_argument("--share", action="store_true",
                        help="also create a public gradio.live link (exposes your AWS credentials' access to anyone "
                             "with the link; off by default)")
    parser.set_defaults(func=run)


def launch_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``gradio.Blocks.launch``: loopback only, public link only with ``--share``."""
    return {"server_name": MIC_HOST, "server_port": args.port, "share": bool(args.share), "inbrowser": False}


def import_gradio() -> Any:
    """Import gradio, or raise :class:`UsageError` saying how to install it."""
    try:
        import gradio
    except ImportError as error:
        raise UsageError(INSTALL_HINT) from error
    return gradio


class MicTranscriber:
    """One recording: microphone chunks in, a growing transcript out.

    :meth:`feed` takes chunks as the browser delivers them (any sample rate, int16 or float, mono or multi-channel),
    mixes them down, resamples them to 16 kHz with a streaming soxr resampler (which keeps filter state across
    chunks, unlike resampling each chunk alone) and queues 4096-byte PCM16 chunks for the session task.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pending = bytearray()
        self._resampler: soxr.ResampleStream | None = None
        self._sample_rate_hz: int | None = None
        self._finished: list[str] = []
        self._current: list[str] = []
        self._task: asyncio.Task[TranscriptionResult] | None = None
        self._exit_stack = contextlib.AsyncExitStack()

    async def start(self) -> None:
        """Open the target and start the session task."""
        opener = await self._exit_stack.enter_async_context(open_target(self._args))
        self._task = asyncio.create_task(transcribe_stream(
            self._chunks(), opener, model=self._args.model, on_delta=self._current.append,
            on_session_text=self._session_done, session_limit_s=self._args.session_limit,
        ))

    @property
    def text(self) -> str:
        """The transcript so far: finished sessions plus the deltas of the current one."""
        return join_transcripts([*self._finished, "".join(self._current)])

    @property
    def error(self) -> BaseException | None:
        """The failure of the session task, once it failed."""
        if self._task is not None and self._task.done() and not self._task.cancelled():
            return self._task.exception()
        return None

    def feed(self, sample_rate_hz: int, samples: np.ndarray) -> None:
        """Queue one microphone chunk (shape ``(n,)`` or ``(n, channels)``; int16 or float in [-1, 1])."""
        data = np.asarray(samples)
        if np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.float32) / float(np.iinfo(data.dtype).max + 1)
        mono = data.astype(np.float32) if data.ndim == 1 else data.astype(np.float32).mean(axis=1)
        if self._resampler is None or self._sample_rate_hz != sample_rate_hz:
            self._flush_resampler()
            self._sample_rate_hz = sample_rate_hz
            self._resampler = soxr.ResampleStream(sample_rate_hz, TARGET_SAMPLE_RATE_HZ, 1, dtype="float32",
                                                  quality=RESAMPLER_QUALITY)
        self._queue_pcm(float_to_pcm16(self._resampler.resample_chunk(mono)))

    async def stop(self) -> TranscriptionResult:
        """End the recording: flush the audio, finish the session and return the result.

        Raises:
            RealtimeError: the session failed.
        """
        self._flush_resampler()
        if self._pending:
            self._queue.put_nowait(bytes(self._pending))
            self._pending.clear()
        self._queue.put_nowait(None)
        try:
            assert self._task is not None, "start() was not called"
            return await self._task
        finally:
            await self._exit_stack.aclose()

    async def cancel(self) -> None:
        """Abandon the recording (page closed): stop the task and close the stream."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self._exit_stack.aclose()

    def _flush_resampler(self) -> None:
        if self._resampler is not None:
            self._queue_pcm(float_to_pcm16(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)))
            self._resampler = None

    def _queue_pcm(self, pcm16: bytes) -> None:
        self._pending += pcm16
        while len(self._pending) >= CHUNK_BYTES:
            self._queue.put_nowait(bytes(self._pending[:CHUNK_BYTES]))
            del self._pending[:CHUNK_BYTES]

    def _session_done(self, text: str) -> None:
        self._finished.append(text)
        self._current.clear()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._queue.get()) is not None:
            yield chunk


def build_page(gr: Any, args: argparse.Namespace) -> Any:
    """Build the Gradio Blocks page for ``args`` (``gr`` is the gradio module)."""

    async def on_chunk(chunk: tuple[int, np.ndarray] | None, state: MicTranscriber | None):
        if chunk is None:
            return gr.skip(), state
        if state is None:
            state = MicTranscriber(args)
            try:
                await state.start()
            except (RealtimeError, UsageError) as error:
                return f"[error] {error}", None
        sample_rate_hz, samples = chunk
        state.feed(sample_rate_hz, samples)
        if state.error is not None:
            text = state.text
            await state.cancel()
            return f"{text}\n\n[error] {state.error}", None
        return state.text, state

    async def on_stop(state: MicTranscriber | None):
        if state is None:
            return gr.skip(), None
        try:
            result = await state.stop()
        except RealtimeError as error:
            return f"{state.text}\n\n[error] {error}", None
        return f"{result.transcript}\n\n({format_figures(result)})", None

    target = args.url or f"SageMaker endpoint {args.endpoint}"
    with gr.Blocks(title="voicectl mic") as page:
        gr.Markdown(f"### Live transcription\nStreaming to {target}. Press record, speak, press stop.")
        state = gr.State(None)
        microphone = gr.Audio(sources=["microphone"], type="numpy", streaming=True, label="Microphone")
        transcript = gr.Textbox(label="Transcript", lines=10)
        microphone.stream(on_chunk, inputs=[microphone, state], outputs=[transcript, state],
                          stream_every=STREAM_EVERY_S, concurrency_limit=None)
        microphone.stop_recording(on_stop, inputs=[state], outputs=[transcript, state])
    return page


def run(args: argparse.Namespace, gradio_module: Any = None) -> int:
    """Entry point of ``voicectl mic``: build the page and serve it until Ctrl-C."""
    validate_target_arguments(args)
    gr = gradio_module if gradio_module is not None else import_gradio()
    settings = launch_kwargs(args)
    if settings["share"]:
        print("voicectl mic: --share creates a public link: anyone who has it can call the endpoint with your AWS "
              "credentials. Close the page when done.", file=sys.stderr)
    page = build_page(gr, args)
    print(f"voicectl mic: open http://{MIC_HOST}:{args.port} (Ctrl-C to stop)", file=sys.stderr)
    page.queue().launch(**settings)
    return 0
