"""The sweep: one task for all streams that ends those whose client is idle or whose vLLM has
stalled (`sweep_streams`)."""

from __future__ import annotations

import asyncio
import logging
import time

from websockets.frames import CloseCode
from websockets.protocol import State

from contracts import realtime
from contracts.bridge_env import BridgeEnvironment, need

from .legs import HOLD_CLIENT_FULL, HOLD_PENDING, HOLD_UPSTREAM_FULL
from .metrics import BridgeMetrics
from .stream import Stream

log = logging.getLogger("bridge")

#: Longest time between two looks at every stream's idle and stall clocks, seconds.
SWEEP_PERIOD_S = 0.5


async def sweep_streams(
    streams: set[Stream], settings: BridgeEnvironment, metrics: BridgeMetrics
) -> None:
    """One task for all streams: end those whose client is idle or whose vLLM has stalled.

    Idle: the client sent nothing for `idle_timeout_s`. The clock stops while the bridge itself
    holds the client's frames for vLLM (vLLM has not accepted the session, or its write buffer
    is full): then the client is not idle, vLLM is slow. It runs on while the client's own write
    buffer is full, as then the client is not reading.

    Stalled vLLM (e.g. a stopped or hung process, whose socket stays open): after
    `upstream_stall_s / 2` without a frame from vLLM, the bridge sends a WebSocket ping; with
    still no frame `upstream_stall_s / 2` later, the stream ends with `upstream_closed` and
    close 1011. Not while the bridge has paused reading from vLLM because the client is not
    reading (the pong could not be read), and not when the sweep itself runs late: then the
    bridge's own event loop was held up, and its sockets are unread.
    """
    idle_s = need(settings.idle_timeout_s)
    stall_s = need(settings.upstream_stall_s)
    period = min(SWEEP_PERIOD_S, idle_s / 4, stall_s / 4)
    last = time.monotonic()
    while True:
        await asyncio.sleep(period)
        now = time.monotonic()
        late, last = now - last > 2 * period, now
        if late:
            # The bridge's own event loop was held up (a sweep runs every `period`): what its
            # sockets hold has not been read, so neither a silent client nor a silent vLLM can
            # be judged this time, and the clocks start again rather than blame either for the
            # bridge's own delay.
            for stream in streams:
                stream.last_rx = now
                if stream.upstream is not None:
                    stream.upstream.ping_sent_at = None
                    stream.upstream.last_rx = max(stream.upstream.last_rx, now - stall_s / 4)
            continue
        for stream in list(streams):
            if not stream.ending:
                try:
                    _check_stream(stream, now, idle_s, stall_s, metrics)
                except Exception as exc:  # a bug must not stop the sweep of every other stream
                    log.warning("ending a stream after an unexpected error in the sweep: %r", exc)
                    stream.end(
                        f"the bridge failed ({type(exc).__name__})",
                        realtime.PROCESSING_ERROR,
                        CloseCode.INTERNAL_ERROR,
                    )


def _check_stream(
    stream: Stream, now: float, idle_s: float, stall_s: float, metrics: BridgeMetrics
) -> None:
    """End `stream` if its client is idle or its vLLM has stalled (see `sweep_streams`)."""
    if stream.client.hold_reasons & (HOLD_PENDING | HOLD_UPSTREAM_FULL):
        stream.last_rx = now  # the bridge holds the client back: its idle clock stops
    elif stream.last_rx < now - idle_s:
        full = stream.client.hold_reasons & HOLD_CLIENT_FULL
        stream.end(
            f"no data from the client for {idle_s:g} s (IDLE_TIMEOUT_S)"
            + (" while it read none of its events" if full else "")
            + "; the session was ended",
            realtime.IDLE_TIMEOUT,
            CloseCode.NORMAL_CLOSURE,
            idle_timeout_s=idle_s,
        )
        return
    _check_upstream(stream, now, stall_s, metrics)


def _check_upstream(stream: Stream, now: float, stall_s: float, metrics: BridgeMetrics) -> None:
    upstream = stream.upstream
    if upstream is None or upstream.ws.state is not State.OPEN:
        return
    if not upstream.transport.is_reading():  # paused: the client is not reading
        upstream.ping_sent_at = None  # vLLM cannot be judged
        return
    if upstream.ping_sent_at is None:
        if now - upstream.last_rx >= stall_s / 2:
            upstream.ping_sent_at = now
            upstream.send_ping(b"bridge")
    elif upstream.last_rx >= upstream.ping_sent_at:
        upstream.ping_sent_at = None  # vLLM answered (the pong, or any frame)
    elif now - upstream.ping_sent_at >= stall_s / 2:
        metrics.upstream_error()
        log.warning(
            "vLLM sent nothing for %.1f s and did not answer a ping: ending the stream",
            now - upstream.last_rx,
        )
        stream.end(
            f"the model server did not answer for {stall_s:g} s (no data, no reply to a "
            "WebSocket ping); the session was ended",
            realtime.UPSTREAM_CLOSED,
            CloseCode.INTERNAL_ERROR,
            upstream_close_code=None,
        )
