"""The bridge server: SageMaker's bidirectional-streaming contract in front, vLLM's realtime
WebSocket behind.

SageMaker container contract
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html, "Container
Contract to Support Bidirectional Streaming Capabilities"; with the image label
`com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true`): listen on port 8080; `GET
/ping` answers 200 only when the model can serve; the stream arrives as a WebSocket at
`/invocations-bidirectional-stream`, must be accepted within 250 ms, and carries the caller's
payload parts as frames (text frames for DataType UTF8); SageMaker sends RFC 6455 pings every 60 s
and closes after 5 unanswered ones.

`ModelInvocationPath`: InvokeEndpointWithBidirectionalStream takes an optional `ModelInvocationPath`
(HTTP header `X-Amzn-SageMaker-Model-Invocation-Path`, per the service model in
aws-sdk-sagemaker-runtime-http2; API reference
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpointWithBidirectionalStream.html
and
https://docs.aws.amazon.com/sdk-for-python/v1/reference/clients/sagemaker-runtime-http2/operations/invoke_endpoint_with_bidirectional_stream/,
which say only "Model invocation path"). AWS's own vLLM-Omni container relies on SageMaker's sidecar
opening the container's WebSocket at that path with a slash before it, in place of
`/invocations-bidirectional-stream` (github.com/aws/deep-learning-containers,
test/vllm-omni/sagemaker/test_sm_omni_bidi_endpoint.py and test_sagemaker_middleware.py: the path is
passed without its leading slash, which SageMaker adds). Our clients never send it, but a caller who
knows vLLM may pass `v1/realtime`: the bridge takes `/v1/realtime` as the same stream
(`STREAM_PATH_ALIASES`), and answers any other path with 404 naming the paths to use.

vLLM side: `ws://127.0.0.1:8081/v1/realtime` (vllm
`vllm/entrypoints/speech_to_text/realtime/api_router.py`).

Sockets: `legs.ClientLeg` and `legs.UpstreamLeg`, asyncio protocols driving websockets' documented
Sans-I/O API (see `legs`). Per stream: accept the client, open the vLLM socket, relay frames both
ways (`stream.Stream`), unchanged except for the checks in `protocol.check_client_frame` (malformed
JSON and bad audio answered by the bridge, `session.update` given the served model name) and the
stream's audio accounting (`protocol.GenerationAudio`, `protocol.AudioRate`); one task ends idle
and stalled streams (`sweep`). permessage-deflate is off on both legs (no extension is offered or
accepted): the audio is base64 PCM16, which deflate barely shrinks, and compressing it would cost
CPU on every frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import time
from collections.abc import Awaitable

from websockets.datastructures import Headers
from websockets.exceptions import InvalidHandshake
from websockets.frames import CloseCode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from contracts import realtime
from contracts.bridge_env import BridgeEnvironment, need
from contracts.realtime import PING_PATH, STREAM_PATH

from . import plain_http, protocol
from .auth import BearerToken, RefusalLog, Verdict
from .health import HealthProbe
from .legs import CLIENT_CLOSE_TIMEOUT_S, FRAME_BUDGET, WRITE_LIMIT_BYTES, ClientLeg, UpstreamLeg
from .metrics import BridgeMetrics
from .stream import Stream
from .sweep import sweep_streams
from .task_protection import TaskProtection

__all__ = [
    "FRAME_BUDGET",
    "INVOCATIONS_PATH",
    "PING_PATH",
    "STREAM_PATH",
    "STREAM_PATH_ALIASES",
    "WRITE_LIMIT_BYTES",
    "Bridge",
]

log = logging.getLogger("bridge")

#: KV-cache groups of Voxtral Realtime in vLLM's pool: the decoder's and the causal encoder's
#: sliding-window layers (constructs_lib/capacity.py, "Page size").
KV_CACHE_GROUPS = 2

#: The paths of SageMaker's container contract (see the module docstring): PING_PATH and STREAM_PATH
#: (contracts.realtime), and the request-response path, which the bridge does not serve.
INVOCATIONS_PATH = "/invocations"
#: Other paths accepted as the stream: where SageMaker opens the WebSocket when a caller passes
#: `ModelInvocationPath=v1/realtime` (vLLM's own path; see the module docstring).
STREAM_PATH_ALIASES = frozenset({protocol.VLLM_REALTIME_PATH})

#: Longest wait for vLLM to complete the WebSocket handshake, seconds. A refused connection (vLLM
#: down) fails at once; this only bounds a vLLM that accepts TCP but is slow to answer. 1 s was too
#: short: in bench/bridge_bench.py, a burst of 200 simultaneous sessions on a loaded machine took
#: longer. A client that leaves meanwhile cancels the wait at once.
UPSTREAM_OPEN_TIMEOUT_S = 5.0


class Bridge:
    """The bridge: `GET /ping`, `POST /invocations` (an error), `WS
    /invocations-bidirectional-stream`.

    Args:
        settings: see `BridgeEnvironment` (contracts.bridge_env), as `from_env` returns it.

    Use `await bridge.start()`, then `await bridge.shutdown()` (drains for `settings.drain_s`), or
    `async with Bridge(settings) as bridge:` (no drain on exit). `port` is the bound port (useful
    with 0).
    """

    def __init__(self, settings: BridgeEnvironment) -> None:
        self.settings = settings
        self.health = HealthProbe(
            need(settings.vllm_host),
            need(settings.vllm_port),
            settings.served_model,
            self._kv_cache_read if settings.kv_blocks_per_stream else None,
        )
        self.metrics = BridgeMetrics(
            need(settings.metrics_namespace),
            need(settings.endpoint_name),
            need(settings.variant_name),
        )
        #: Streams admitted at once: MAX_STREAMS, lowered to what vLLM's KV cache holds
        #: (_kv_cache_read).
        self.stream_cap = need(settings.max_streams)
        self.metrics.stream_cap = self.stream_cap
        #: True once vLLM has been healthy: metrics are written only from then on
        #: (_flush_metrics_periodically).
        self._served = False
        self.port = need(settings.port)
        self.active_streams = 0
        #: Largest message on either leg, bytes (read by the legs).
        self.max_frame_bytes = need(settings.max_frame_bytes)
        #: Every open client connection (streams, `/ping`s, requests not yet read), for shutdown.
        self.legs: set[ClientLeg] = set()
        self._streams: set[Stream] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        #: vLLM's Realtime WebSocket URL (logged at start-up).
        self._upstream_url = f"ws://{need(settings.vllm_host)}:{need(settings.vllm_port)}{protocol.VLLM_REALTIME_PATH}"
        self._upstream_uri = parse_uri(self._upstream_url)
        self._audio_limit = settings.session_audio_limit_bytes
        self._no_streams = asyncio.Event()
        self._no_streams.set()
        #: The bearer token stream requests must carry (BRIDGE_TOKEN), or None (no check:
        #: SageMaker).
        self._token = (
            BearerToken(settings.bridge_token) if settings.bridge_token is not None else None
        )
        #: Refused upgrades, logged at most once a minute with a count (every one is counted in the
        #: metric).
        self.refusals = RefusalLog(log)
        #: Streams refused at the stream cap, likewise (a caller retrying at once must not flood
        #: the log).
        self.busy_refusals = RefusalLog(log, subject="", status="close 1013")
        #: ECS task scale-in protection while streams are live (ECS_AGENT_URI), or None (not on
        #: ECS).
        self.protection: TaskProtection | None = (
            TaskProtection(
                settings.ecs_agent_uri,
                self.metrics,
                expires_minutes=need(settings.task_protection_minutes),
                grace_s=need(settings.task_protection_grace_s),
            )
            if settings.ecs_agent_uri
            else None
        )
        self.metrics.checks_token = self._token is not None
        self.metrics.manages_protection = self.protection is not None

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> Bridge:
        """Start listening (at once: `/ping` says 503 until vLLM is healthy) and start the
        background tasks."""
        self.health.start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: ClientLeg(self), need(self.settings.host), need(self.settings.port)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._spawn(sweep_streams(self._streams, self.settings, self.metrics))
        self._spawn(self._flush_metrics_periodically())
        if self.protection is not None:
            self._spawn(self.protection.run())
        log.info(
            "bridge listening on %s:%d, vLLM at %s, max %d stream%s, bearer token %s, ECS task "
            "scale-in protection %s",
            need(self.settings.host),
            self.port,
            self._upstream_url,
            need(self.settings.max_streams),
            "" if need(self.settings.max_streams) == 1 else "s",
            "required" if self._token else "not checked",
            "on while streams are live" if self.protection else "off",
        )
        return self

    async def shutdown(self, drain_s: float | None = None) -> None:
        """Stop accepting streams, let open ones finish for up to `drain_s` (default
        `settings.drain_s`) seconds, then end the rest with `server_shutdown` and close 1001, and
        stop."""
        drain_s = self.settings.drain_s if drain_s is None else drain_s
        if self._server is not None:
            self._server.close()  # stops listening; open connections go on
        if self.active_streams:
            log.info(
                "draining %d open stream%s for up to %.0f s",
                self.active_streams,
                "" if self.active_streams == 1 else "s",
                drain_s,
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(drain_s):
                    await self._no_streams.wait()
        for stream in list(self._streams):
            stream.end(
                "the server is shutting down", realtime.SERVER_SHUTDOWN, CloseCode.GOING_AWAY
            )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLIENT_CLOSE_TIMEOUT_S + 1):
                await self._no_streams.wait()
        for leg in list(self.legs):  # /pings, unread requests, streams past their close timeout
            leg.transport.abort()
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

    # ---- plain HTTP: /ping and everything that is not the stream (called by ClientLeg) ----------
    def answer_get(self, path: str, headers: Headers) -> Response | None:
        """The answer to `GET path` with request `headers`, or None for the stream (then the
        WebSocket handshake follows). With a bearer token set (BRIDGE_TOKEN), a stream request
        without it gets 401 (`auth`)."""
        if path == STREAM_PATH or path in STREAM_PATH_ALIASES:
            if self._token is None:
                return None
            verdict = self._token.check(headers)
            if verdict is Verdict.OK:
                return None
            return self._unauthorized(verdict)
        if path == PING_PATH:
            if self.health.healthy:
                return plain_http.json_response(http.HTTPStatus.OK, {"status": "healthy"})
            return plain_http.json_response(
                http.HTTPStatus.SERVICE_UNAVAILABLE, {"status": "vLLM is not ready"}
            )
        return plain_http.json_response(
            http.HTTPStatus.NOT_FOUND,
            {
                "error": (
                    f"no such path: GET {path}; the bridge answers GET {PING_PATH} and the "
                    f"WebSocket stream at {STREAM_PATH} (SageMaker's default: call "
                    "InvokeEndpointWithBidirectionalStream without ModelInvocationPath), also "
                    f"reachable as {', '.join(sorted(STREAM_PATH_ALIASES))} (ModelInvocationPath "
                    f"{', '.join(alias.lstrip('/') for alias in sorted(STREAM_PATH_ALIASES))})"
                ),
                "code": "unknown_path",
            },
        )

    def _unauthorized(self, verdict: Verdict) -> Response:
        """401 for a stream request whose bearer token is `verdict` (missing, malformed or wrong);
        counted and logged without the token."""
        self.metrics.unauthorized()
        self.refusals.refused(verdict)
        challenge = "Bearer" if verdict is Verdict.MISSING else 'Bearer error="invalid_token"'
        return plain_http.json_response(
            http.HTTPStatus.UNAUTHORIZED,
            {
                "error": f"{verdict.value} bearer token: send Authorization: Bearer <token> (the "
                "token secret's value)",
                "code": "unauthorized",
            },
            {"WWW-Authenticate": challenge},
        )

    def answer_non_get(self, head: bytes) -> Response:
        """The answer to a request whose method is not GET (see `plain_http.answer_non_get`)."""
        return plain_http.answer_non_get(head, STREAM_PATH, PING_PATH, INVOCATIONS_PATH)

    # ---- the stream -----------------------------------------------------------------------------
    @property
    def audio_limit(self) -> int | None:
        """PCM16 bytes one generation may append (`BridgeEnvironment.session_audio_limit_bytes`)."""
        return self._audio_limit

    def session_limit_message(self) -> str:
        """The `session_limit` error text: the limit in seconds and where it comes from."""
        seconds = (self._audio_limit or 0) / realtime.PCM_BYTES_PER_SECOND
        return (
            f"the session reached its audio limit of {seconds:.0f} s in one generation (the "
            f"model's max_model_len {self.settings.max_model_len} tokens less "
            f"{self.settings.stream_overhead_tokens} of the stream format, at "
            f"{self.settings.tokens_per_audio_second:g} tokens per second of audio); end each "
            "utterance with a final commit, or start a new session to continue"
        )

    def _kv_cache_read(self, num_gpu_blocks: int) -> None:
        """vLLM reported its KV cache: log it beside the configured cap, emit it, and lower the cap
        when vLLM holds fewer live streams (num_gpu_blocks // KV_BLOCKS_PER_STREAM) than
        MAX_STREAMS.

        KV_BLOCKS_PER_STREAM counts blocks of KV_BLOCK_SIZE tokens (16, vLLM's GPU default). vLLM's
        CPU build reports `block_size` 128 (seen in tests/vllm): the same bytes per token in blocks
        8 times larger, so the stream's blocks are converted to vLLM's block size (rounded up), plus
        one block per KV-cache group (decoder and encoder: constructs_lib/capacity.py) that each may
        round up at the coarser size."""
        per_stream = self.settings.kv_blocks_per_stream or 1
        block_size = self.health.block_size
        if block_size and block_size != need(self.settings.kv_block_size):
            converted = -(-per_stream * need(self.settings.kv_block_size) // block_size)
            if block_size > need(self.settings.kv_block_size):
                converted += KV_CACHE_GROUPS
            log.info(
                "vLLM's KV-cache blocks hold %d tokens, KV_BLOCKS_PER_STREAM=%d counts blocks of "
                "%d: %d of vLLM's blocks per stream",
                block_size,
                per_stream,
                need(self.settings.kv_block_size),
                converted,
            )
            per_stream = converted
        streams = num_gpu_blocks // per_stream
        self.metrics.kv_cache_streams = streams
        log.info(
            "vLLM KV cache: %d blocks, %d live stream%s at KV_BLOCKS_PER_STREAM=%d; stream cap "
            "MAX_STREAMS=%d",
            num_gpu_blocks,
            streams,
            "" if streams == 1 else "s",
            per_stream,
            need(self.settings.max_streams),
        )
        if streams < self.stream_cap:
            log.warning(
                "vLLM's KV cache holds %d live stream%s, fewer than MAX_STREAMS=%d: the stream "
                "cap is now %d (the capacity estimate was too high; see voicectl capacity)",
                streams,
                "" if streams == 1 else "s",
                need(self.settings.max_streams),
                max(1, streams),
            )
            self.stream_cap = max(1, streams)
            self.metrics.stream_cap = self.stream_cap

    def stream_accepted(self, leg: ClientLeg) -> None:
        """The client's WebSocket is open (accepted at once, as SageMaker requires): relay it in a
        task."""
        self._spawn(self._handle_stream(leg))

    async def _handle_stream(self, client: ClientLeg) -> None:
        """Relay one stream; never raises for an ordinary disconnect."""
        if self.active_streams >= self.stream_cap:
            self.metrics.stream_rejected()
            self.busy_refusals.refused(f"{realtime.SERVER_BUSY}, MAX_STREAMS={self.stream_cap}")
            await self._refuse(
                client,
                f"the server is busy: {self.stream_cap} streams are open (MAX_STREAMS); "
                "retry later",
                realtime.SERVER_BUSY,
                CloseCode.TRY_AGAIN_LATER,
                max_streams=self.stream_cap,
            )
            return
        self.active_streams += 1
        self._no_streams.clear()
        if self.protection is not None:
            self.protection.streams_changed(self.active_streams)
        stream = Stream(self, client)
        client.stream = stream
        try:
            connecting = asyncio.ensure_future(self._open_upstream(stream))
            # The client may leave while vLLM is slow to accept: then give up at once (cancelling
            # the connect drops its TCP connection) rather than hold a MAX_STREAMS slot for the open
            # timeout.
            await asyncio.wait((connecting, stream.done), return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                connecting.cancel()
                await asyncio.wait((connecting,))
                stream.outcome = stream.outcome or "the client left before vLLM accepted"
                return
            try:
                upstream = connecting.result()
                del (
                    connecting
                )  # the finished task would otherwise be kept for the stream's lifetime
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                stream.ending = True
                client.stream = None
                self.metrics.upstream_error()
                self.health.mark_unhealthy()
                log.warning("vLLM did not accept a session: %s", exc or type(exc).__name__)
                stream.outcome = (
                    f"{realtime.UPSTREAM_UNAVAILABLE} (close {int(CloseCode.INTERNAL_ERROR)})"
                )
                await self._refuse(
                    client,
                    f"the model server is not reachable ({exc or type(exc).__name__}); retry later",
                    realtime.UPSTREAM_UNAVAILABLE,
                    CloseCode.INTERNAL_ERROR,
                )
                return
            await self._relay(stream, upstream)
        finally:
            client.stream = None
            log.info(
                "stream from %s ended after %.3f s: %s",
                _peer(client),
                time.monotonic() - stream.started,
                stream.outcome or "ended",
            )
            self.active_streams -= 1
            if not self.active_streams:
                self._no_streams.set()
            if self.protection is not None:
                self.protection.streams_changed(self.active_streams)

    async def _open_upstream(self, stream: Stream) -> UpstreamLeg:
        """Connect to vLLM and complete the WebSocket handshake within `UPSTREAM_OPEN_TIMEOUT_S`."""
        loop = asyncio.get_running_loop()
        leg: UpstreamLeg | None = None

        def make_leg() -> UpstreamLeg:
            nonlocal leg
            leg = UpstreamLeg(stream, self._upstream_uri, need(self.settings.max_frame_bytes))
            return leg

        try:
            async with asyncio.timeout(UPSTREAM_OPEN_TIMEOUT_S):
                await loop.create_connection(
                    make_leg, need(self.settings.vllm_host), need(self.settings.vllm_port)
                )
                assert leg is not None
                await leg.opened
        except BaseException:
            if leg is not None and leg.transport is not None:
                leg.transport.abort()
            raise
        return leg

    async def _relay(self, stream: Stream, upstream: UpstreamLeg) -> None:
        self._streams.add(stream)
        self.metrics.stream_opened()
        try:
            stream.upstream_ready(upstream)
            if upstream.ws.state is not State.OPEN:  # vLLM went away before the stream was wired
                stream.upstream_lost()
            await stream.done
            stream.ending = True
        finally:
            stream.ending = True
            upstream.close()  # bounded by UPSTREAM_CLOSE_TIMEOUT_S; no-op if already closed
            await asyncio.wait(
                (upstream.closed, stream.client.closed)
            )  # each bounded by its close timeout
            self._streams.discard(stream)
            first_delta_ms = (
                None
                if stream.first_delta_at is None
                else (stream.first_delta_at - stream.started) * 1000
            )
            self.metrics.stream_closed(time.monotonic() - stream.started, first_delta_ms)

    @staticmethod
    async def _refuse(
        client: ClientLeg, message: str, code: str, close_code: CloseCode, **fields: int
    ) -> None:
        client.send_text(protocol.error_event(message, code, **fields))
        client.close(
            close_code, code
        )  # reads on (and drops) what the client sent, up to its close frame
        await client.closed

    # ---- background work ------------------------------------------------------------------------
    async def _flush_metrics_periodically(self) -> None:
        """Write the metrics every METRICS_INTERVAL_S, but only once vLLM has been healthy.

        Autoscaling tracks the Average of ActiveStreams across instances: an instance still loading
        the model (10-20 minutes) would report zeros and hide the load of the serving ones during a
        scale-out. SageMaker sends it no traffic before /ping says 200, so holding its figures back
        loses nothing; they are written with the first interval after it becomes healthy.
        """
        while True:
            await asyncio.sleep(need(self.settings.metrics_interval_s))
            self.refusals.flush_due()  # refusals since the last line, once its interval has passed
            self.busy_refusals.flush_due()
            if self.health.healthy:
                self._served = True
            if self._served:
                self.metrics.flush()


def _peer(leg: ClientLeg) -> str:
    """The client's address as ``host:port`` (SageMaker's sidecar on SageMaker, the load balancer
    on ECS)."""
    peer = leg.transport.get_extra_info("peername") if leg.transport is not None else None
    return f"{peer[0]}:{peer[1]}" if peer else "-"
