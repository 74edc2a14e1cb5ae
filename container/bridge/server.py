"""The bridge server: SageMaker's bidirectional-streaming contract in front, vLLM's realtime WebSocket behind.

SageMaker container contract (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html,
"Container Contract to Support Bidirectional Streaming Capabilities"; with the image label
`com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true`): listen on port 8080; `GET /ping`
answers 200 only when the model can serve; the stream arrives as a WebSocket at
`/invocations-bidirectional-stream`, must be accepted within 250 ms, and carries the caller's payload
parts as frames (text frames for DataType UTF8); SageMaker sends RFC 6455 pings every 60 s and closes
after 5 unanswered ones.

vLLM side: `ws://127.0.0.1:8081/v1/realtime` (vllm `vllm/entrypoints/speech_to_text/realtime/api_router.py`).

One `websockets` asyncio server serves the three paths (it is lean: no ASGI layers, one task per
connection, and frames are forwarded in the socket callbacks, see `_Stream`). Its HTTP parser accepts only GET, so `BridgeConnection`
looks at the request line first and answers `POST /invocations` itself with a JSON error.

Per stream: accept the client, open the vLLM socket, relay frames both ways, unchanged except for the
checks in `protocol.check_client_frame` (malformed JSON and bad audio answered by the bridge,
`session.update` given the served model name). permessage-deflate is off on both legs: the audio is
base64 PCM16, which deflate barely shrinks, and compressing it would cost CPU on every frame.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import http
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.frames import DATA_OPCODES, CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State

from . import protocol
from .health import HealthProbe
from .metrics import BridgeMetrics
from .settings import Settings

log = logging.getLogger("bridge")

#: The paths of SageMaker's container contract (see the module docstring).
PING_PATH = "/ping"
STREAM_PATH = "/invocations-bidirectional-stream"
INVOCATIONS_PATH = "/invocations"

#: Longest wait for vLLM to complete the WebSocket handshake, seconds. A refused connection (vLLM down)
#: fails at once; this only bounds a vLLM that accepts TCP but is slow to answer. 1 s was too short:
#: in the benchmark, a burst of 200 simultaneous sessions on the loaded 2-core machine took longer.
#: A client that leaves meanwhile cancels the wait at once.
UPSTREAM_OPEN_TIMEOUT_S = 5.0
#: Longest wait for the other side's close frame when the bridge closes a socket, seconds; then the
#: TCP connection is dropped. Keeps "client gone -> vLLM socket closed" under 1 s even if vLLM hangs.
UPSTREAM_CLOSE_TIMEOUT_S = 0.5
CLIENT_CLOSE_TIMEOUT_S = 2.0
#: Client messages held (while vLLM accepts the session, or a write buffer is full) before reading from
#: the client pauses; also websockets' `max_queue`. The relay forwards frames as they come, so this only
#: bounds memory.
MAX_QUEUE_FRAMES = 8
#: Write buffer high-water mark per socket, bytes (websockets `write_limit`), about three appends.
WRITE_LIMIT_BYTES = 16 * 1024
#: Longest time between two looks at every stream's idle and stall clocks, seconds.
SWEEP_PERIOD_S = 0.5
#: Client messages the bridge handles in one turn of the event loop; then it pauses reading that client
#: and goes on in the next turn, so that one client sending many small frames at once (a 256 KiB read
#: can hold thousands) cannot keep the loop from other streams and `/ping`.
FRAME_BUDGET = 32
#: Client bytes parsed at a time, so that the frame budget is looked at often; one 4096-byte PCM16 append
#: is about 5.5 KiB as a frame, so the usual read is one piece.
FEED_BYTES = 8 * 1024
# Why the bridge holds a client's frames instead of handling them (bits of `BridgeConnection.hold_reasons`).
#: vLLM has not accepted the session yet.
HOLD_PENDING = 1
#: vLLM's socket has more than `WRITE_LIMIT_BYTES` waiting to be sent.
HOLD_UPSTREAM_FULL = 2
#: The client's own socket has more than `WRITE_LIMIT_BYTES` waiting: it is not reading its events
#: (relayed or the bridge's own error events), so the bridge stops reading what it sends.
HOLD_CLIENT_FULL = 4
#: `FRAME_BUDGET` messages were handled in this turn of the event loop.
HOLD_BUDGET = 8
#: Largest HTTP request head `BridgeConnection` buffers before deciding GET or not, bytes.
MAX_SNIFF_BYTES = 16 * 1024
#: The byte sequence of a transcription delta in vLLM's compact JSON, for TimeToFirstDelta.
_DELTA_MARKER = b'"type":"transcription.delta"'


def _json_response(status: http.HTTPStatus, body: dict[str, object], extra: dict[str, str] | None = None) -> Response:
    payload = json.dumps(body).encode()
    headers = Headers(
        {"Content-Type": "application/json", "Content-Length": str(len(payload)), "Connection": "close", **(extra or {})}
    )
    return Response(status.value, status.phrase, headers, payload)


def _serialise(response: Response) -> bytes:
    head = f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in response.headers.raw_items())
    return head.encode("latin-1") + b"\r\n" + (response.body or b"")


class BridgeConnection(ServerConnection):
    """The client side of a stream: a websockets server connection that relays frames and answers non-GET requests.

    Relay: client frames are handled in `process_event` (see `_Stream`), or held, in order, while
    `hold_reasons` is not 0 (the `HOLD_*` bits): vLLM has not accepted the session, a write buffer is
    full, or the frame budget of this turn of the event loop is spent. Once `MAX_QUEUE_FRAMES` frames
    are held (at once for the budget), reading from the client pauses and unparsed input waits in
    `_unparsed`, so a client's input costs at most one read (256 KiB) plus a few frames of memory.

    Non-GET requests: websockets' HTTP/1.1 parser only accepts GET and drops any other request without
    an answer; SageMaker's `POST /invocations` (the non-streaming invocation) deserves a clear error
    instead. The first bytes of each connection are held until the request head is complete: GET goes
    on to websockets unchanged, anything else gets a JSON error and the connection is closed once the
    request body has been read (closing with unread input would reset the connection and could lose the answer).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sniff: bytearray | None = bytearray()
        self._discard = 0
        self.stream: _Stream | None = None
        self.assembly = _MessageAssembly()
        # Frames can arrive in the same read as the upgrade request, before the handler has decided to
        # relay or refuse the stream: hold them from the start.
        self.hold_reasons = HOLD_PENDING
        self.held: collections.deque[Frame] | None = None  # made on first use (an empty deque is ~600 bytes)
        self._unparsed = b""  # client input not parsed yet; reading is paused while it is not empty
        self._reading_paused = False
        self._turn_frames = 0  # messages handled in this turn of the event loop
        self._releasing = False

    # -- the relay (see _Stream) ------------------------------------------------------------------------
    def process_event(self, event: Any) -> None:
        if not isinstance(event, Frame):
            super().process_event(event)  # the handshake request
        elif self.hold_reasons or self.held:
            if self.held is None:
                self.held = collections.deque()
            self.held.append(event)
        else:
            self._handle_frame(event)

    def _handle_frame(self, frame: Frame) -> None:
        if frame.opcode not in DATA_OPCODES:
            super().process_event(frame)  # control frames (websockets has answered pings already)
            return
        message = self.assembly.add(frame)
        if message is None or self.stream is None:
            return  # part of a message, or no stream (a refused one): nothing to relay to
        self.stream.guarded(self.stream.from_client, message)
        self._turn_frames += 1
        if self._turn_frames >= FRAME_BUDGET and not self.hold_reasons & HOLD_BUDGET:
            self.hold(HOLD_BUDGET)
            self.loop.call_soon(self.release, HOLD_BUDGET)

    def hold(self, reason: int) -> None:
        """Hold client frames (one of the `HOLD_*` bits) until `release(reason)`."""
        self.hold_reasons |= reason

    def release(self, reason: int) -> None:
        """Clear one hold reason; with none left, handle the held frames (within the budget) and read on."""
        self.hold_reasons &= ~reason
        self._turn_frames = 0  # every release runs in its own callback: a new turn of the event loop
        if self.hold_reasons or self._releasing:
            return
        self._releasing = True
        try:
            while self.held and not self.hold_reasons:
                self._handle_frame(self.held.popleft())
            if self._unparsed and not self.hold_reasons:
                unparsed, self._unparsed = self._unparsed, b""
                self._feed(unparsed)
            if self._reading_paused and not self._unparsed and not self._must_stop_reading():
                self._reading_paused = False
                self.transport.resume_reading()
        finally:
            self._releasing = False

    def _must_stop_reading(self) -> bool:
        return bool(self.hold_reasons & HOLD_BUDGET) or (self.held is not None and len(self.held) >= MAX_QUEUE_FRAMES)

    def _feed(self, data: bytes) -> None:
        """Parse client input a piece at a time; stop (and pause reading) when frames must wait."""
        if len(data) <= FEED_BYTES:
            super().data_received(data)
            if self._must_stop_reading():
                self._pause_reading()
            return
        view = memoryview(data)
        while view:
            piece, view = view[:FEED_BYTES], view[FEED_BYTES:]
            super().data_received(piece)  # type: ignore[arg-type]  # any bytes-like object is fed as is
            if self._must_stop_reading():
                self._unparsed = bytes(view)
                self._pause_reading()
                return

    def _pause_reading(self) -> None:
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        super().pause_writing()
        self.hold(HOLD_CLIENT_FULL)
        if self.stream is not None and self.stream.upstream is not None:
            self.stream.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.stream is not None and self.stream.upstream is not None:
            self.stream.upstream.transport.resume_reading()
        self.release(HOLD_CLIENT_FULL)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.held = None
        self._unparsed = b""
        if self.stream is not None:
            self.stream.client_lost()

    # -- answering non-GET requests -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._discard:  # the body of a request already answered (see _answer)
            self._discard_body(data)
            return
        if self._sniff is None:
            if self._unparsed:  # reading is paused; a transport may still deliver what it had read
                self._unparsed += data
            else:
                self._turn_frames = 0
                self._feed(data)
            return
        self._sniff += data
        if self._sniff.startswith(b"GET "):
            head, self._sniff = bytes(self._sniff), None
            self._feed(head)
            return
        if len(self._sniff) < 4 and b"GET ".startswith(self._sniff):
            return  # too short to tell
        end = self._sniff.find(b"\r\n\r\n")
        if end < 0:
            if len(self._sniff) > MAX_SNIFF_BYTES:
                self._answer(_json_response(http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, {"error": "request head too large"}), 0)
            return
        head = bytes(self._sniff[:end]).decode("latin-1")
        body_received = len(self._sniff) - end - 4
        request_line, *header_lines = head.split("\r\n")
        method, _, rest = request_line.partition(" ")
        path = rest.split(" ", 1)[0]
        length = 0
        for line in header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length" and value.strip().isdigit():
                length = int(value.strip())
        self._answer(_non_get_response(method, path), max(length - body_received, 0))

    def _answer(self, response: Response, unread_body: int) -> None:
        self._sniff = None
        self.transport.write(_serialise(response))
        self._discard = unread_body
        if not unread_body:
            self.transport.close()

    def _discard_body(self, data: bytes) -> None:
        self._discard -= len(data)
        if self._discard <= 0:
            self._discard = 0
            self.transport.close()


def _non_get_response(method: str, path: str) -> Response:
    if method == "POST" and path.split("?", 1)[0] == INVOCATIONS_PATH:
        return _json_response(
            http.HTTPStatus.BAD_REQUEST,
            {
                "error": (
                    "This endpoint streams: call InvokeEndpointWithBidirectionalStream, which SageMaker "
                    f"delivers to the container as a WebSocket at {STREAM_PATH}; POST {INVOCATIONS_PATH} "
                    "(InvokeEndpoint) is not supported."
                ),
                "code": "use_bidirectional_stream",
            },
        )
    return _json_response(
        http.HTTPStatus.METHOD_NOT_ALLOWED,
        {"error": f"{method} {path} is not supported; the bridge answers GET {PING_PATH} and WebSocket {STREAM_PATH}"},
        {"Allow": "GET"},
    )


class _Stream:
    """One relayed stream. Frames are forwarded inside the sockets' `data_received` callbacks.

    Forwarding in the protocol callbacks, rather than in `recv()`/`send()` loops, saves two task
    switches and one queue per frame, which is most of the relay's CPU time and its latency tail
    under load. The handler task only waits on `done` and then closes both sockets.
    Back-pressure: when one socket's write buffer passes its high-water mark (`write_limit`), reading
    from the other socket pauses until it drains; the client's own socket too, since its frames may
    be answered by the bridge itself (error events). Client frames that arrive meanwhile, or while vLLM
    accepts the session, are held in order by `BridgeConnection`.
    """

    __slots__ = (
        "audio_bytes", "audio_since_final", "bridge", "client", "done", "ending", "first_delta_at", "last_rx", "started", "upstream",
    )

    def __init__(self, bridge: Bridge, client: BridgeConnection) -> None:
        self.bridge = bridge
        self.client = client
        self.upstream: UpstreamConnection | None = None
        self.started = self.last_rx = time.monotonic()
        self.first_delta_at: float | None = None
        # PCM16 bytes appended in the current generation (what counts against max_model_len), and since the
        # last final commit (what the next generation starts with once transcription.done has passed).
        self.audio_bytes = 0
        self.audio_since_final = 0
        self.ending = False  # set once the bridge or the client has started ending the stream
        # Resolves when the stream must end: (close code, reason) to close the client with, or None
        # when the client is already gone.
        self.done: asyncio.Future[tuple[CloseCode, str] | None] = asyncio.get_running_loop().create_future()

    # -- client -> vLLM ---------------------------------------------------------------------------------
    def from_client(self, message: bytes) -> None:
        """One complete client message: check it (`protocol.check_client_frame`) and forward it to vLLM."""
        self.last_rx = time.monotonic()
        if self.ending:
            return
        result = protocol.check_client_frame(message, self.bridge.health.served_model)
        if result.forward is None:
            _send_text(self.client, result.error)
            return
        if result.audio_bytes:
            self.audio_bytes += result.audio_bytes
            self.audio_since_final += result.audio_bytes
            limit = self.bridge.audio_limit
            if limit is not None and self.audio_bytes > limit:
                self.end(self.bridge.session_limit_message(), protocol.SESSION_LIMIT, CloseCode.NORMAL_CLOSURE)
                return
        elif result.final_commit:
            self.audio_since_final = 0
        _send_text(self.upstream, result.forward)

    def upstream_ready(self, upstream: UpstreamConnection) -> None:
        """vLLM accepted the session: forward what the client sent meanwhile, then relay directly."""
        self.upstream = upstream
        self.client.release(HOLD_PENDING)

    # -- vLLM -> client ---------------------------------------------------------------------------------
    def from_upstream(self, message: bytes) -> None:
        """One complete vLLM message: forward it unchanged."""
        if self.first_delta_at is None and _DELTA_MARKER in message:
            self.first_delta_at = time.monotonic()
        elif message.startswith(protocol.TRANSCRIPTION_DONE_PREFIX):
            # vLLM applies max_model_len per generation: after transcription.done it clears its audio queue
            # and the next commit starts a fresh request (realtime/connection.py `_run_generation`). What
            # the next generation can see is at most the audio appended since the final commit (vLLM drops
            # what arrives between the final commit and the done, so counting it errs on the safe side).
            self.audio_bytes = self.audio_since_final
        _send_text(self.client, message)

    def guarded(self, handler: Callable[[bytes], None], message: bytes) -> None:
        """Run `handler(message)`; an unexpected exception ends this stream only (1011), never the server.

        The handlers run inside the sockets' `data_received` callbacks, where an exception would drop the
        connection with an ERROR traceback from the event loop; here it is logged at WARNING and the
        client is told (`processing_error`, the code vLLM uses for an exception while handling an event).
        """
        try:
            handler(message)
        except Exception as exc:
            log.warning("ending a stream after an unexpected error in %s: %r", handler.__name__, exc)
            self.end(f"the bridge failed to handle a message ({type(exc).__name__})", protocol.PROCESSING_ERROR,
                     CloseCode.INTERNAL_ERROR)

    # -- ending -----------------------------------------------------------------------------------------
    def end(self, message: str, code: str, close_code: CloseCode) -> None:
        """End the stream from the bridge's side: send the error event now, close from the handler task."""
        if self.ending:
            return
        self.ending = True
        _send_text(self.client, protocol.error_event(message, code))
        if not self.done.done():
            self.done.set_result((close_code, code))

    def client_lost(self) -> None:
        """The client's TCP connection is gone (after a close handshake or not)."""
        self.ending = True
        if not self.done.done():
            self.done.set_result(None)

    def upstream_lost(self) -> None:
        """vLLM's TCP connection is gone; if the stream was not ending, tell the client (`upstream_closed`)."""
        if self.ending or self.upstream is None:
            return
        self.bridge.metrics.upstream_error()
        self.bridge.health.mark_unhealthy()
        code = self.upstream.close_code
        log.warning("vLLM ended a session mid-stream (close code %s)", code)
        self.end(
            f"the model server ended the session (WebSocket close code {code})",
            protocol.UPSTREAM_CLOSED,
            CloseCode.INTERNAL_ERROR,
        )


def _send_text(connection: ServerConnection | ClientConnection | None, message: bytes | None) -> None:
    """Write one text frame now (no await), if the connection is open."""
    if connection is None or message is None or connection.protocol.state is not State.OPEN:
        return
    connection.protocol.send_text(message)
    try:
        connection.send_data()
    except Exception as exc:  # the transport is closing: the connection_lost callback ends the stream
        connection.set_connection_exc(exc)


class _MessageAssembly:
    """Joins fragmented data frames into messages (RFC 6455 section 5.4); most messages are one frame."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] | None = None

    def add(self, frame: Frame) -> bytes | None:
        """Add a data frame; return the complete message payload when `frame` ends one, else None."""
        data = frame.data if type(frame.data) is bytes else bytes(frame.data)
        if frame.opcode is not Opcode.CONT:
            if frame.fin:
                return data
            self.parts = [data]
            return None
        if self.parts is None:
            return None  # the protocol layer rejects a stray continuation before this
        self.parts.append(data)
        if not frame.fin:
            return None
        message, self.parts = b"".join(self.parts), None
        return message


class UpstreamConnection(ClientConnection):
    """The vLLM side of one stream: messages go to `stream.from_upstream`; flow control pauses the client."""

    def __init__(self, *args: Any, stream: _Stream, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream = stream
        self.assembly = _MessageAssembly()
        self.last_rx = time.monotonic()  # when vLLM last sent anything (see Bridge._sweep_streams)
        self.ping_sent_at: float | None = None

    def data_received(self, data: bytes) -> None:
        self.last_rx = time.monotonic()
        super().data_received(data)

    def process_event(self, event: Any) -> None:
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES:
            message = self.assembly.add(event)
            if message is not None:
                self.stream.guarded(self.stream.from_upstream, message)
            return
        super().process_event(event)

    def pause_writing(self) -> None:
        super().pause_writing()
        self.stream.client.hold(HOLD_UPSTREAM_FULL)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.stream.client.release(HOLD_UPSTREAM_FULL)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.stream.upstream_lost()


class Bridge:
    """The bridge: `GET /ping`, `POST /invocations` (an error), `WS /invocations-bidirectional-stream`.

    Args:
        settings: see `Settings`.

    Use `await bridge.start()`, then `await bridge.shutdown()` (drains for `settings.drain_s`), or
    `async with Bridge(settings) as bridge:` (no drain on exit). `port` is the bound port (useful with 0).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.health = HealthProbe(settings.vllm_host, settings.vllm_port, settings.served_model)
        self.metrics = BridgeMetrics(settings.metrics_namespace, settings.endpoint_name, settings.variant_name)
        #: True once vLLM has been healthy: metrics are written only from then on (_flush_metrics_periodically).
        self._served = False
        self.port = settings.port
        self.active_streams = 0
        self._streams: set[_Stream] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._server: Server | None = None
        self._upstream_url = f"ws://{settings.vllm_host}:{settings.vllm_port}{protocol.VLLM_REALTIME_PATH}"
        self._audio_limit = settings.session_audio_limit_bytes
        self._no_streams = asyncio.Event()
        self._no_streams.set()

    # ---- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> Bridge:
        """Start listening (at once: `/ping` says 503 until vLLM is healthy) and start the background tasks."""
        self.health.start()
        self._server = await serve(
            self._handle_stream,
            self.settings.host,
            self.settings.port,
            create_connection=BridgeConnection,
            process_request=self._process_request,
            compression=None,
            max_size=self.settings.max_frame_bytes,
            max_queue=MAX_QUEUE_FRAMES,
            write_limit=WRITE_LIMIT_BYTES,
            ping_interval=None,  # SageMaker pings us; pings are answered by websockets automatically
            close_timeout=CLIENT_CLOSE_TIMEOUT_S,
            server_header=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._spawn(self._sweep_streams())
        self._spawn(self._flush_metrics_periodically())
        log.info(
            "bridge listening on %s:%d, vLLM at %s, max %d streams",
            self.settings.host, self.port, self._upstream_url, self.settings.max_streams,
        )
        return self

    async def shutdown(self, drain_s: float | None = None) -> None:
        """Stop accepting streams, let open ones finish for up to `drain_s` (default `settings.drain_s`)
        seconds, then end the rest with `server_shutdown` and close 1001, and stop."""
        drain_s = self.settings.drain_s if drain_s is None else drain_s
        if self._server is not None:
            self._server.close(close_connections=False)
        if self.active_streams:
            log.info("draining %d open streams for up to %.0f s", self.active_streams, drain_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_s):
                    await self._no_streams.wait()
        for stream in list(self._streams):
            stream.end("the server is shutting down", protocol.SERVER_SHUTDOWN, CloseCode.GOING_AWAY)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLIENT_CLOSE_TIMEOUT_S + 1):
                    await self._server.wait_closed()
            self._server = None
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.health.stop()
        if self._served or self.health.healthy:
            self.metrics.flush()

    async def __aenter__(self) -> Bridge:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown(drain_s=0)

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- plain HTTP: /ping and everything that is not the stream --------------------------------------
    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == STREAM_PATH:
            return None
        if path == PING_PATH:
            if self.health.healthy:
                return _json_response(http.HTTPStatus.OK, {"status": "healthy"})
            return _json_response(http.HTTPStatus.SERVICE_UNAVAILABLE, {"status": "vLLM is not ready"})
        return _json_response(
            http.HTTPStatus.NOT_FOUND,
            {"error": f"no such path: GET {path}; the bridge answers GET {PING_PATH} and WebSocket {STREAM_PATH}"},
        )

    # ---- the stream ---------------------------------------------------------------------------------
    @property
    def audio_limit(self) -> int | None:
        """PCM16 bytes one session may append (`Settings.session_audio_limit_bytes`)."""
        return self._audio_limit

    def session_limit_message(self) -> str:
        """The `session_limit` error text: the limit in seconds and where it comes from."""
        seconds = (self._audio_limit or 0) / (protocol.SAMPLE_RATE_HZ * protocol.BYTES_PER_SAMPLE)
        return (
            f"the session reached its audio limit of {seconds:.0f} s in one generation (the model's max_model_len "
            f"{self.settings.max_model_len} tokens at {self.settings.tokens_per_audio_second:g} tokens per "
            "second of audio); end each utterance with a final commit, or start a new session to continue"
        )

    async def _handle_stream(self, client: BridgeConnection) -> None:  # type: ignore[override]
        """Relay one stream (the WebSocket is already accepted); never raises for an ordinary disconnect."""
        if self.active_streams >= self.settings.max_streams:
            self.metrics.stream_rejected()
            client.release(HOLD_PENDING)  # read on (and drop) what the client sent, up to its close frame
            await self._refuse(
                client,
                f"the server is busy: {self.settings.max_streams} streams are open (MAX_STREAMS); retry later",
                protocol.SERVER_BUSY,
                CloseCode.TRY_AGAIN_LATER,
            )
            return
        self.active_streams += 1
        self._no_streams.clear()
        stream = _Stream(self, client)
        client.stream = stream
        try:
            connecting = asyncio.ensure_future(
                connect(
                    self._upstream_url,
                    create_connection=functools.partial(UpstreamConnection, stream=stream),
                    compression=None,
                    max_size=self.settings.max_frame_bytes,
                    max_queue=MAX_QUEUE_FRAMES,
                    write_limit=WRITE_LIMIT_BYTES,
                    ping_interval=None,
                    open_timeout=UPSTREAM_OPEN_TIMEOUT_S,
                    close_timeout=UPSTREAM_CLOSE_TIMEOUT_S,
                    proxy=None,
                    user_agent_header=None,
                )
            )
            # The client may leave while vLLM is slow to accept: then give up at once (cancelling the
            # connect drops its TCP connection) rather than hold a MAX_STREAMS slot for the open timeout.
            await asyncio.wait((connecting, stream.done), return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                connecting.cancel()
                await asyncio.wait((connecting,))
                return
            try:
                upstream = connecting.result()
                del connecting  # the finished task would otherwise be kept for the stream's lifetime
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                stream.ending = True
                client.release(HOLD_PENDING)  # read on (and drop) what the client sent, up to its close frame
                self.metrics.upstream_error()
                self.health.mark_unhealthy()
                log.warning("vLLM did not accept a session: %s", exc or type(exc).__name__)
                await self._refuse(
                    client,
                    f"the model server is not reachable ({exc or type(exc).__name__}); retry later",
                    protocol.UPSTREAM_UNAVAILABLE,
                    CloseCode.INTERNAL_ERROR,
                )
                return
            await self._relay(stream, upstream)
        finally:
            client.stream = None
            self.active_streams -= 1
            if not self.active_streams:
                self._no_streams.set()

    async def _relay(self, stream: _Stream, upstream: UpstreamConnection) -> None:
        self._streams.add(stream)
        self.metrics.stream_opened()
        try:
            stream.upstream_ready(upstream)
            if upstream.protocol.state is not State.OPEN:  # vLLM went away before the stream was wired
                stream.upstream_lost()
            outcome = await stream.done
            stream.ending = True
            if outcome is not None:
                await stream.client.close(*outcome)
        finally:
            stream.ending = True
            await upstream.close()  # bounded by UPSTREAM_CLOSE_TIMEOUT_S; no-op if already closed
            self._streams.discard(stream)
            first_delta_ms = None if stream.first_delta_at is None else (stream.first_delta_at - stream.started) * 1000
            self.metrics.stream_closed(time.monotonic() - stream.started, first_delta_ms)

    @staticmethod
    async def _refuse(client: ServerConnection, message: str, code: str, close_code: CloseCode) -> None:
        with contextlib.suppress(ConnectionClosed):
            await client.send(protocol.error_event(message, code), text=True)
        await client.close(close_code, code)

    # ---- background work ----------------------------------------------------------------------------
    async def _sweep_streams(self) -> None:
        """One task for all streams: end those whose client is idle or whose vLLM has stalled.

        Idle: the client sent nothing for `idle_timeout_s`. The clock stops while the bridge itself holds
        the client's frames for vLLM (vLLM has not accepted the session, or its write buffer is full):
        then the client is not idle, vLLM is slow. It runs on while the client's own write buffer is full,
        as then the client is not reading.

        Stalled vLLM (e.g. a stopped or hung process, whose socket stays open): after `upstream_stall_s / 2`
        without a frame from vLLM, the bridge sends a WebSocket ping; with still no frame `upstream_stall_s / 2`
        later, the stream ends with `upstream_closed` and close 1011. Not while the bridge has paused reading
        from vLLM because the client is not reading (the pong could not be read).
        """
        idle_s = self.settings.idle_timeout_s
        stall_s = self.settings.upstream_stall_s
        period = min(SWEEP_PERIOD_S, idle_s / 4, stall_s / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for stream in list(self._streams):
                if stream.ending:
                    continue
                if stream.client.hold_reasons & (HOLD_PENDING | HOLD_UPSTREAM_FULL):
                    stream.last_rx = now  # the bridge holds the client back: its idle clock stops
                elif stream.last_rx < now - idle_s:
                    full = stream.client.hold_reasons & HOLD_CLIENT_FULL
                    stream.end(
                        f"no data from the client for {idle_s:g} s (IDLE_TIMEOUT_S)"
                        + (" while it read none of its events" if full else "")
                        + "; the session was ended",
                        protocol.IDLE_TIMEOUT,
                        CloseCode.NORMAL_CLOSURE,
                    )
                    continue
                self._check_upstream(stream, now, stall_s)

    def _check_upstream(self, stream: _Stream, now: float, stall_s: float) -> None:
        upstream = stream.upstream
        if upstream is None or upstream.protocol.state is not State.OPEN:
            return
        if not upstream.transport.is_reading():  # paused: the client is not reading; vLLM cannot be judged
            upstream.ping_sent_at = None
            return
        if upstream.ping_sent_at is None:
            if now - upstream.last_rx >= stall_s / 2:
                upstream.ping_sent_at = now
                upstream.protocol.send_ping(b"bridge")
                try:
                    upstream.send_data()
                except Exception as exc:  # the transport is closing: connection_lost ends the stream
                    upstream.set_connection_exc(exc)
        elif upstream.last_rx >= upstream.ping_sent_at:
            upstream.ping_sent_at = None  # vLLM answered (the pong, or any frame)
        elif now - upstream.ping_sent_at >= stall_s / 2:
            self.metrics.upstream_error()
            log.warning("vLLM sent nothing for %.1f s and did not answer a ping: ending the stream", now - upstream.last_rx)
            stream.end(
                f"the model server did not answer for {stall_s:g} s (no data, no reply to a WebSocket ping); "
                "the session was ended",
                protocol.UPSTREAM_CLOSED,
                CloseCode.INTERNAL_ERROR,
            )

    async def _flush_metrics_periodically(self) -> None:
        """Write the metrics every METRICS_INTERVAL_S, but only once vLLM has been healthy.

        Autoscaling tracks the Average of ActiveStreams across instances: an instance still loading the model
        (10-20 minutes) would report zeros and hide the load of the serving ones during a scale-out. SageMaker
        sends it no traffic before /ping says 200, so holding its figures back loses nothing; they are written
        with the first interval after it becomes healthy.
        """
        while True:
            await asyncio.sleep(self.settings.metrics_interval_s)
            if self.health.healthy:
                self._served = True
            if self._served:
                self.metrics.flush()
