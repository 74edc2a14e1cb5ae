"""The mic page: a local web page that transcribes the microphone live through the transcription
path (:func:`serve`; ``voicectl mic``, :mod:`voicectl.commands.mic`, serves it until Ctrl-C).

The page is a Gradio app bound to 127.0.0.1 (no public link unless ``share``: whoever can open the
page calls the endpoint with *your* AWS credentials). The target is opened once, before the page's
address is given out: for an endpoint the AWS credentials are resolved and the SDK client is made
then, so :func:`serve` fails at once without them (as ``transcribe`` does), and every recording
reuses them.

One recording is one WebSocket from the page to this process (:data:`RECORDING_PATH`; its messages:
:mod:`voice_client.mic_recording`) and one transcription
(:class:`voice_client.mic_transcriber.MicTranscriber`, over
:func:`voice_client.realtime.transcribe_stream`, the same code as ``transcribe``). The page's
recorder (``mic_page/recorder.js``) captures the microphone with an AudioWorklet and sends every
sample. Gradio's streaming ``gr.Audio`` is not used: its frontend (gradio 6.31,
``templates/frontend/assets/audio-*.js``) discards a chunk that arrives once recording is off, so
the audio after the last full chunk is lost at Stop, and a chunk captured while its stream is still
being set up (``stream_state`` ``waiting``) is lost too.

The page opens the recording WebSocket at the first captured audio, so a zero-length recording opens
no stream. The Speak panel has a WebSocket of its own (:data:`SPEAK_PATH`,
:class:`voice_client.mic_speak.SpeakPanel`) when a Sonic endpoint and a voice are given.

Every request and WebSocket handshake passes :class:`voice_client.mic_guard.PageGuard` first
(loopback ``Host``, the page's own ``Origin``, only the page's routes), and a recording may hold
only so much audio (:data:`voice_client.mic_recording.MAX_AHEAD_S`,
:data:`voice_client.mic_transcriber.MAX_QUEUED_AUDIO_S`).

A failure ends the recording: the page stops capturing and shows the one error, which is also
printed on the terminal. When the page goes away (tab closed, reload, browser quit) its WebSocket
closes and the transcription is cancelled, which closes the stream to the endpoint at once.

Gradio is an optional dependency: ``make mic-deps`` in the repository (pinned), or ``pip install
'.[mic]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn
from urllib.parse import urlsplit

from voice_client.errors import UsageError
from voice_client.mic_guard import PageGuard, page_hosts
from voice_client.mic_recording import (
    START_MESSAGE_TIMEOUT_S,
    PageClosed,
    PageProtocolError,
    PageSocket,
    StreamStalled,
    TranscriptPublisher,
    read_audio,
    read_start,
    stop_task,
    summarize_error,
    watch,
)
from voice_client.mic_speak import SpeakPanel
from voice_client.mic_transcriber import AudioOverrun, MicTranscriber
from voice_client.realtime import (
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    RealtimeError,
    TransportOpener,
)
from voice_client.transcribe import (
    TranscriptionTarget,
    format_figures,
    open_target,
    validate_session_limit,
    validate_target,
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

SERVER_START_TIMEOUT_S = 30.0
"""Seconds allowed for Gradio's server to come up before the target is opened on its event loop."""

INSTALL_HINT = (
    "the mic page needs Gradio, an optional dependency: `make mic-deps` in the repository "
    "(pinned, from requirements-mic.lock), or pip install '.[mic]' where the project is "
    "installed with pip"
)

_ASSETS = resources.files("voice_client") / "mic_page"


@dataclass(frozen=True)
class MicSettings:
    """What the page serves.

    Attributes:
        target: where the recordings stream (:class:`voice_client.transcribe.TranscriptionTarget`).
        port: the page's local port, 1-65535.
        share: also create a public gradio.live link (anyone with it calls the endpoint with your
            AWS credentials).
        model: model name for ``session.update`` (the bridge replaces it with the name vLLM serves).
        session_limit_s: audio seconds per generation (see
            :func:`voice_client.realtime.transcribe_stream`).
        sonic_endpoint: the Sonic endpoint of the Speak panel (None: no Speak).
        voice: the Cartesia voice ID of the Speak panel.
    """

    target: TranscriptionTarget
    port: int = DEFAULT_PORT
    share: bool = False
    model: str = DEFAULT_MODEL
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S
    sonic_endpoint: str | None = None
    voice: str | None = None


def validate_settings(settings: MicSettings) -> None:
    """Raise :class:`UsageError` for settings the page cannot serve: the session limit, the target
    (:func:`voice_client.transcribe.validate_target`) and the port."""
    validate_session_limit(settings.session_limit_s)
    validate_target(settings.target)
    if not 1 <= settings.port <= 65535:
        raise UsageError(f"--port must be a TCP port from 1 to 65535, got {settings.port}")


def launch_kwargs(settings: MicSettings) -> dict[str, Any]:
    """Keyword arguments for ``gradio.Blocks.launch``: loopback only, public link only with
    ``share``, no browser opened, no server-side rendering (the page is one static component), no
    "Use via API" link (the page has no Gradio API), and not blocking (:func:`serve` yields, its
    caller waits)."""
    return {
        "server_name": MIC_HOST,
        "server_port": settings.port,
        "share": bool(settings.share),
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


def print_to_stderr(line: str) -> None:
    """The default terminal log: ``line`` on stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


class MicServer:
    """The server side of the page: the target opened once, one transcription per recording
    WebSocket.

    Gradio serves the page on its own event loop (a uvicorn server in a thread); :meth:`lifespan`
    runs on that loop, and :meth:`open_target` opens the target there, so the SDK client and every
    stream share one loop.

    Args:
        settings: what the page serves.
        log: prints one line for the terminal.
    """

    def __init__(self, settings: MicSettings, log: Callable[[str], None] = print_to_stderr) -> None:
        self._settings = settings
        self._log = log
        self.target = settings.target.description
        """What the page streams to, for people: the URL or the endpoint's name."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = threading.Event()
        self._opener: TransportOpener | None = None
        self._exit_stack = contextlib.AsyncExitStack()
        self._numbers = itertools.count(1)
        self.guard: PageGuard | None = None
        """The gate in front of the app (:mod:`voice_client.mic_guard`), once the server
        started."""
        self.speak_panel = SpeakPanel(
            settings.sonic_endpoint,
            settings.voice,
            region=settings.target.region,
            profile=settings.target.profile,
            log=log,
        )

    def allow_share_link(self, share_url: str) -> None:
        """Accept requests for the ``share`` link's host (over https), once Gradio made the
        link."""
        assert self.guard is not None, "the server has not started"
        host = urlsplit(share_url).netloc.lower()
        self.guard.hosts = self.guard.hosts | {host}
        self.guard.https_hosts = self.guard.https_hosts | {host}

    def app_kwargs(self) -> dict[str, Any]:
        """``app_kwargs`` for ``gradio.Blocks.launch``: the recording and Speak routes and the
        lifespan."""
        from starlette.routing import WebSocketRoute

        return {
            "routes": [
                WebSocketRoute(RECORDING_PATH, self.serve_recording),
                WebSocketRoute(SPEAK_PATH, self.speak_panel.serve),
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
            hosts=page_hosts(self._settings.port),
            websocket_paths=[RECORDING_PATH, SPEAK_PATH],
            log=self._log,
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
        self._opener = await self._exit_stack.enter_async_context(
            open_target(self._settings.target)
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
            self._log(f"recording {number}: {reason}")
            publisher.update()

        transcriber = MicTranscriber(
            self._opener,
            model=self._settings.model,
            session_limit_s=self._settings.session_limit_s,
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
                self._log(
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
                await stop_task(publishing)
            await page.send(
                {
                    "type": "done",
                    "text": result.transcript,
                    "figures": format_figures(result),
                    "result": result.as_dict(),
                }
            )
            self._log(f"recording {number} done: {format_figures(result)}")
        except PageClosed as closed:
            self._log(
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
                    await stop_task(task)
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
        self._log(f"recording {number} failed: {message}")
        with contextlib.suppress(PageClosed):
            await page.send(
                {
                    "type": "error",
                    "message": message,
                    "text": text,
                    "summary": summary or summarize_error(message, self.target),
                }
            )


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
def serve(
    settings: MicSettings,
    *,
    log: Callable[[str], None] = print_to_stderr,
    gradio_module: Any = None,
) -> Iterator[str]:
    """Serve the page for ``settings`` and yield its local URL; stop the server (and every
    recording) on exit. ``log`` prints one line for the terminal (the recordings, the refusals);
    ``gradio_module`` replaces ``import gradio`` (tests).

    The target is opened before the URL is yielded (see the module docstring).

    Raises:
        UsageError: bad settings, Gradio missing, the port in use, no Region or an unknown profile.
        RealtimeError: no usable AWS credentials.
    """
    validate_settings(settings)
    gr = gradio_module if gradio_module is not None else import_gradio()
    server = MicServer(settings, log)
    page = build_page(gr, server)
    launch = launch_kwargs(settings)
    if launch["share"]:
        log(
            "--share creates a public link: anyone who has it can call the endpoint with your "
            "AWS credentials. Close the page when done."
        )
    try:
        page.launch(**launch, app_kwargs=server.app_kwargs())
    except OSError as error:  # gradio: "Cannot find empty port in range: N-N. ..."
        raise UsageError(
            f"cannot serve the page on {MIC_HOST}:{settings.port} ({str(error).split('. ')[0]}); "
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
