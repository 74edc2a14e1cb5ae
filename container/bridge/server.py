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
connection plus one per relayed stream). Its HTTP parser accepts only GET, so `BridgeConnection`
looks at the request line first and answers `POST /invocations` itself with a JSON error.

Per stream: accept the client, open the vLLM socket, relay frames both ways, unchanged except for the
checks in `protocol.check_client_frame` (malformed JSON and bad audio answered by the bridge,
`session.update` given the served model name). permessage-deflate is off on both legs: the audio is
base64 PCM16, which deflate barely shrinks, and compressing it would cost CPU on every frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
import time
from collections.abc import Awaitable

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from . import protocol
from .health import HealthProbe
from .metrics import BridgeMetrics
from .settings import Settings

log = logging.getLogger("bridge")

#: The paths of SageMaker's container contract (see the module docstring).
PING_PATH = "/ping"
STREAM_PATH = "/invocations-bidirectional-stream"
INVOCATIONS_PATH = "/invocations"

#: Longest wait for vLLM to accept a session, seconds; a refused connection fails at once.
UPSTREAM_OPEN_TIMEOUT_S = 1.0
#: Longest wait for the other side's close frame when the bridge closes a socket, seconds; then the
#: TCP connection is dropped. Keeps "client gone -> vLLM socket closed" under 1 s even if vLLM hangs.
UPSTREAM_CLOSE_TIMEOUT_S = 0.5
CLIENT_CLOSE_TIMEOUT_S = 2.0
#: Frames buffered per direction before websockets stops reading the socket (its `max_queue`). The
#: relay consumes frames as they come, so a small queue only bounds memory when one side stalls.
MAX_QUEUE_FRAMES = 8
#: Write buffer high-water mark per socket, bytes (websockets `write_limit`), about three appends.
WRITE_LIMIT_BYTES = 16 * 1024
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
    """A websockets server connection that answers non-GET requests itself.

    websockets' HTTP/1.1 parser only accepts GET and drops any other request without an answer; SageMaker's
    `POST /invocations` (the non-streaming invocation) deserves a clear error instead. The first bytes of
    each connection are held until the request head is complete: GET goes on to websockets unchanged,
    anything else gets a JSON error and the connection is closed once the request body has been read
    (closing with unread input would reset the connection and could lose the answer).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._sniff: bytearray | None = bytearray()
        self._discard = 0

    def data_received(self, data: bytes) -> None:
        if self._sniff is None:
            super().data_received(data)
            return
        if self._discard:
            self._discard_body(data)
            return
        self._sniff += data
        if self._sniff.startswith(b"GET "):
            head, self._sniff = bytes(self._sniff), None
            super().data_received(head)
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
    """State of one relayed stream (plain slots: touched on every frame)."""

    __slots__ = ("audio_bytes", "client", "ending", "first_delta_at", "last_rx", "started", "upstream")

    def __init__(self, client: ServerConnection, upstream: ClientConnection, now: float) -> None:
        self.client = client
        self.upstream = upstream
        self.started = now
        self.last_rx = now
        self.first_delta_at: float | None = None
        self.audio_bytes = 0
        self.ending = False  # set once the bridge or the client has started ending the stream


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
        self._spawn(self._sweep_idle_streams())
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
            self._spawn(self._end(stream, "the server is shutting down", protocol.SERVER_SHUTDOWN, CloseCode.GOING_AWAY))
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLIENT_CLOSE_TIMEOUT_S + 1):
                    await self._server.wait_closed()
            self._server = None
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.health.stop()
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
    async def _handle_stream(self, client: ServerConnection) -> None:
        """Relay one stream (the WebSocket is already accepted); never raises for an ordinary disconnect."""
        if self.active_streams >= self.settings.max_streams:
            self.metrics.stream_rejected()
            await self._refuse(
                client,
                f"the server is busy: {self.settings.max_streams} streams are open (MAX_STREAMS); retry later",
                protocol.SERVER_BUSY,
                CloseCode.TRY_AGAIN_LATER,
            )
            return
        self.active_streams += 1
        self._no_streams.clear()
        try:
            try:
                upstream = await connect(
                    self._upstream_url,
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
            except (OSError, TimeoutError, InvalidHandshake) as exc:
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
            await self._relay(_Stream(client, upstream, time.monotonic()))
        finally:
            self.active_streams -= 1
            if not self.active_streams:
                self._no_streams.set()

    async def _relay(self, stream: _Stream) -> None:
        self._streams.add(stream)
        self.metrics.stream_opened()
        downstream = asyncio.create_task(self._upstream_to_client(stream))
        try:
            await self._client_to_upstream(stream)
        finally:
            stream.ending = True
            await stream.upstream.close()  # bounded by UPSTREAM_CLOSE_TIMEOUT_S; no-op if already closed
            await downstream
            self._streams.discard(stream)
            now = time.monotonic()
            first_delta_ms = None if stream.first_delta_at is None else (stream.first_delta_at - stream.started) * 1000
            self.metrics.stream_closed(now - stream.started, first_delta_ms)

    async def _client_to_upstream(self, stream: _Stream) -> None:
        """Client frames to vLLM, after `check_client_frame`; returns when the client or vLLM is gone."""
        client, upstream = stream.client, stream.upstream
        check = protocol.check_client_frame
        health = self.health
        limit = self._audio_limit
        clock = time.monotonic
        while True:
            try:
                frame = await client.recv(decode=False)
            except ConnectionClosed:
                return
            stream.last_rx = clock()
            result = check(frame, health.served_model)
            if result.forward is None:
                try:
                    await client.send(result.error, text=True)
                except ConnectionClosed:
                    return
                continue
            if result.audio_bytes and limit is not None:
                stream.audio_bytes += result.audio_bytes
                if stream.audio_bytes > limit:
                    seconds = limit / (protocol.SAMPLE_RATE_HZ * protocol.BYTES_PER_SAMPLE)
                    await self._end(
                        stream,
                        f"the session reached its audio limit of {seconds:.0f} s (the model's max_model_len "
                        f"{self.settings.max_model_len} tokens at {self.settings.tokens_per_audio_second} tokens "
                        "per second of audio); start a new session to continue",
                        protocol.SESSION_LIMIT,
                        CloseCode.NORMAL_CLOSURE,
                    )
                    return
            try:
                await upstream.send(result.forward, text=True)
            except ConnectionClosed:
                return  # _upstream_to_client reports it to the client

    async def _upstream_to_client(self, stream: _Stream) -> None:
        """vLLM frames to the client, unchanged; reports vLLM's end to the client as `upstream_closed`."""
        client, upstream = stream.client, stream.upstream
        while True:
            try:
                frame = await upstream.recv(decode=False)
            except ConnectionClosed:
                if not stream.ending:
                    self.metrics.upstream_error()
                    self.health.mark_unhealthy()
                    code = upstream.close_code
                    log.warning("vLLM ended a session mid-stream (close code %s)", code)
                    await self._end(
                        stream,
                        f"the model server ended the session (WebSocket close code {code})",
                        protocol.UPSTREAM_CLOSED,
                        CloseCode.INTERNAL_ERROR,
                    )
                return
            if stream.first_delta_at is None and _DELTA_MARKER in frame:
                stream.first_delta_at = time.monotonic()
            try:
                await client.send(frame, text=True)
            except ConnectionClosed:
                return

    async def _end(self, stream: _Stream, message: str, code: str, close_code: CloseCode) -> None:
        """End a stream from the bridge's side: error event to the client, then close (vLLM is closed by `_relay`)."""
        if stream.ending:
            return
        stream.ending = True
        await self._refuse(stream.client, message, code, close_code)

    @staticmethod
    async def _refuse(client: ServerConnection, message: str, code: str, close_code: CloseCode) -> None:
        with contextlib.suppress(ConnectionClosed):
            await client.send(protocol.error_event(message, code), text=True)
        await client.close(close_code, code)

    # ---- background work ----------------------------------------------------------------------------
    async def _sweep_idle_streams(self) -> None:
        """End streams whose client has sent nothing for `idle_timeout_s` (one task for all streams)."""
        idle_s = self.settings.idle_timeout_s
        period = min(1.0, idle_s / 4)
        while True:
            await asyncio.sleep(period)
            deadline = time.monotonic() - idle_s
            for stream in list(self._streams):
                if stream.last_rx < deadline and not stream.ending:
                    self._spawn(
                        self._end(
                            stream,
                            f"no data from the client for {idle_s:g} s (IDLE_TIMEOUT_S); the session was ended",
                            protocol.IDLE_TIMEOUT,
                            CloseCode.NORMAL_CLOSURE,
                        )
                    )

    async def _flush_metrics_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.metrics_interval_s)
            self.metrics.flush()
