"""One relayed stream: the client's messages checked, accounted for and forwarded to vLLM, vLLM's
forwarded to the client, and how the stream ends.

Frames are forwarded inside the sockets' `data_received` callbacks (`legs`); the checks are
`protocol.check_client_frame` (malformed JSON and bad audio answered by the bridge,
`session.update` given the served model name) and the audio accounting `protocol.GenerationAudio`
(the generation's audio limit) and `protocol.AudioRate` (the stream's rate limit). The server
(`server.Bridge`) admits streams, opens vLLM's socket and closes both once `Stream.done` resolves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator
from typing import Protocol

from websockets.frames import CloseCode

from contracts import realtime
from contracts.bridge_env import BridgeEnvironment, need

from . import protocol
from .health import HealthProbe
from .legs import HOLD_PENDING, HOLD_SLICES, ClientLeg, UpstreamLeg
from .metrics import BridgeMetrics

log = logging.getLogger("bridge")

#: The least audio an event costs against the stream's rate limit, seconds (`protocol.AudioRate`).
MIN_EVENT_AUDIO_S = 0.01
#: The byte sequence of a transcription delta in vLLM's compact JSON, for TimeToFirstDelta.
_DELTA_MARKER = b'"type":"transcription.delta"'


class StreamOwner(Protocol):
    """What a `Stream` needs from the server (`server.Bridge`)."""

    settings: BridgeEnvironment
    health: HealthProbe
    metrics: BridgeMetrics

    def session_limit_message(self) -> str: ...


class Stream:
    """One relayed stream. Frames are forwarded inside the sockets' `data_received` callbacks.

    Forwarding in the protocol callbacks, rather than in `recv()`/`send()` loops, saves two task
    switches and one queue per frame, which is most of the relay's CPU time and its latency tail
    under load. The handler task only waits on `done` and then closes both sockets. Back-pressure:
    when one socket's write buffer passes its high-water mark (`WRITE_LIMIT_BYTES`), reading from
    the other socket pauses until it drains; the client's own socket too, since its frames may be
    answered by the bridge itself (error events). Client messages that arrive meanwhile, or while
    vLLM accepts the session, are held in order by `ClientLeg`, weighed in bytes (see `legs`).
    """

    __slots__ = (
        "audio",
        "bridge",
        "client",
        "done",
        "ending",
        "first_delta_at",
        "last_rx",
        "outcome",
        "rate",
        "slices",
        "started",
        "upstream",
    )

    def __init__(self, bridge: StreamOwner, client: ClientLeg) -> None:
        settings = bridge.settings
        self.bridge = bridge
        self.client = client
        self.upstream: UpstreamLeg | None = None
        self.started = self.last_rx = time.monotonic()
        self.first_delta_at: float | None = None
        self.audio = protocol.GenerationAudio(settings.session_audio_limit_bytes)
        self.rate = protocol.AudioRate(
            need(settings.audio_rate_limit), need(settings.audio_burst_s), MIN_EVENT_AUDIO_S
        )
        self.ending = False  # set once the bridge or the client has started ending the stream
        self.slices: Generator[None] | None = None  # a large append being checked and forwarded
        #: How the stream ended, for its log line: the code the bridge sent, or how the client left.
        self.outcome: str | None = None
        # Resolves when the stream must end: True when the bridge ended it (the client is told and
        # closed), False when the client went away.
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    # -- client -> vLLM ---------------------------------------------------------------------------
    def from_client(self, message: bytes) -> None:
        """One complete client message: check it (`protocol.check_client_frame`), account for it,
        forward it.

        A message above `protocol.SLICE_BYTES` (only a canonical append may be that large) is
        checked and then forwarded as fragments a slice per turn of the event loop, the client held
        meanwhile (`HOLD_SLICES`).
        """
        now = time.monotonic()
        self.last_rx = now
        if self.ending:
            return
        if len(message) > protocol.SLICE_BYTES:
            self.slices = self._relay_large(message)
            self.client.hold(HOLD_SLICES)
            self._next_slice()
            return
        forward = self._admit(
            protocol.check_client_frame(message, self.bridge.health.served_model), now
        )
        if forward is not None:
            self.upstream.send_text(forward)  # type: ignore[union-attr]  # messages are held until it is set

    def _admit(self, result: protocol.FrameCheck, now: float) -> bytes | None:
        """Apply the rate limit, the answer to a rejected frame and the generation's audio limit to
        `result`; return the bytes to forward to vLLM, or None (the client has been answered, or the
        stream ended)."""
        rate = self.rate
        if not rate.charge(result.audio_bytes / realtime.PCM_BYTES_PER_SECOND, now):
            self.end(
                f"the stream sent audio faster than {rate.limit_x:g} x real time (beyond a burst "
                f"of {rate.burst_s:g} s of audio; every event counts as at least "
                f"{rate.min_event_s * 1000:g} ms): pace the audio (AUDIO_RATE_LIMIT)",
                realtime.RATE_LIMITED,
                CloseCode.POLICY_VIOLATION,
                limit_x=rate.limit_x,
                burst_s=rate.burst_s,
            )
            return None
        if result.forward is None:
            self.client.send_text(result.error)  # type: ignore[arg-type]  # a rejection always has an error
            return None
        if result.audio_bytes:
            if not self.audio.append(result.audio_bytes):
                self.end(
                    self.bridge.session_limit_message(),
                    realtime.SESSION_LIMIT,
                    CloseCode.NORMAL_CLOSURE,
                    limit_s=round(self.audio.limit_s or 0.0, 3),
                    audio_s=round(self.audio.audio_s, 3),
                )
                return None
        elif result.final_commit:
            self.audio.final_commit()
        return result.forward

    def _relay_large(self, message: bytes) -> Generator[None]:
        """Check a large append a slice per step (`protocol.check_large_append`), then forward it as
        fragments."""
        result = yield from protocol.check_large_append(message)
        forward = self._admit(result, time.monotonic())
        if forward is None:
            return
        view = memoryview(forward)
        for offset in range(0, len(forward), protocol.SLICE_BYTES):
            yield
            if self.ending:
                return
            end = offset + protocol.SLICE_BYTES
            first, fin = offset == 0, end >= len(forward)
            self.upstream.send_fragment(view[offset:end], first=first, fin=fin)  # type: ignore[union-attr]

    def _next_slice(self) -> None:
        """Run one step of the large append in progress; then the next in the next turn of the event
        loop, or, once done, release the client."""
        steps = self.slices
        if steps is None:
            return
        try:
            if not self.ending:
                next(steps)
                asyncio.get_running_loop().call_soon(self._next_slice)
                return
        except StopIteration:
            pass
        except Exception as exc:  # as in `guarded`: this stream only
            log.warning("ending a stream after an unexpected error in a large append: %r", exc)
            self.end(
                f"the bridge failed to handle a message ({type(exc).__name__})",
                realtime.PROCESSING_ERROR,
                CloseCode.INTERNAL_ERROR,
            )
        self.slices = None
        self.client.release(HOLD_SLICES)

    def upstream_ready(self, upstream: UpstreamLeg) -> None:
        """vLLM accepted the session: forward what the client sent meanwhile, then relay
        directly."""
        self.upstream = upstream
        self.client.release(HOLD_PENDING)

    # -- vLLM -> client ---------------------------------------------------------------------------
    def from_upstream(self, message: bytes) -> None:
        """One complete vLLM message: forward it unchanged."""
        if self.first_delta_at is None and _DELTA_MARKER in message:
            self.first_delta_at = time.monotonic()
        elif message.startswith(protocol.TRANSCRIPTION_DONE_PREFIX):
            self.audio.done()
        self.client.send_text(message)

    def guarded(self, handler: Callable[[bytes], None], message: bytes) -> None:
        """Run `handler(message)`; an unexpected exception ends this stream only (1011), never the
        server.

        The handlers run inside the sockets' `data_received` callbacks, where an exception would
        drop the connection with an ERROR traceback from the event loop; here it is logged at
        WARNING and the client is told (`processing_error`, the code vLLM uses for an exception
        while handling an event).
        """
        try:
            handler(message)
        except Exception as exc:
            log.warning(
                "ending a stream after an unexpected error in %s: %r", handler.__name__, exc
            )
            self.end(
                f"the bridge failed to handle a message ({type(exc).__name__})",
                realtime.PROCESSING_ERROR,
                CloseCode.INTERNAL_ERROR,
            )

    # -- ending -----------------------------------------------------------------------------------
    def end(
        self, message: str, code: str, close_code: CloseCode, **fields: float | int | None
    ) -> None:
        """End the stream from the bridge's side: send the error event (with `fields`, see
        `realtime.ERROR_FIELDS`) and start closing the client now; the handler task closes vLLM's
        socket."""
        if self.ending:
            return
        self.ending = True
        self.outcome = self.outcome or f"{code} (close {int(close_code)})"
        self.client.send_text(protocol.error_event(message, code, **fields))
        self.client.close(close_code, code)
        if not self.done.done():
            self.done.set_result(True)

    def client_lost(self) -> None:
        """The client is gone (its TCP connection, or a close frame from it)."""
        self.ending = True
        self.outcome = self.outcome or client_left(self.client)
        if not self.done.done():
            self.done.set_result(False)

    def upstream_lost(self) -> None:
        """vLLM's TCP connection is gone; if the stream was not ending, tell the client
        (`upstream_closed`)."""
        if self.ending or self.upstream is None:
            return
        self.bridge.metrics.upstream_error()
        self.bridge.health.mark_unhealthy()
        code = self.upstream.ws.close_code
        log.warning("vLLM ended a session mid-stream (close code %s)", code)
        self.end(
            f"the model server ended the session (WebSocket close code {code})",
            realtime.UPSTREAM_CLOSED,
            CloseCode.INTERNAL_ERROR,
            upstream_close_code=code,
        )


def client_left(leg: ClientLeg) -> str:
    """How the client's side of a stream ended: its close frame's code, the bridge's (a policy
    violation), or the connection lost without either."""
    ws = leg.ws
    if ws is not None and ws.close_rcvd is not None:
        return f"client closed ({ws.close_rcvd.code})"
    if ws is not None and ws.close_sent is not None:
        return f"closed by the bridge ({ws.close_sent.code})"
    return "client connection lost"
