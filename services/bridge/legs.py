"""The bridge's two kinds of socket: each an `asyncio.Protocol` that drives websockets' Sans-I/O
protocol.

websockets documents its Sans-I/O layer for exactly this use, integrating the protocol with one's
own I/O (https://websockets.readthedocs.io/en/stable/howto/sansio.html): a
`websockets.server.ServerProtocol` or `websockets.client.ClientProtocol` is fed the bytes read
(`receive_data`, `receive_eof`), gives back the events parsed (`events_received`: the handshake
`Request`/`Response`, then `Frame`s) and the bytes to write (`data_to_send`, where `SEND_EOF` asks
for a half-close), sends frames (`send_text`, `send_ping`, `send_close`, `fail`), and says when the
TCP connection should end (`close_expected`). Nothing here subclasses a websockets class or calls a
name outside that documented API, so a websockets upgrade cannot break the relay's hooks; what the
bridge does with each read is its own code:

- `ClientLeg` (the caller's side; SageMaker's sidecar in production): reads the request head itself,
  answers `GET /ping`, other paths and non-GET requests (`plain_http`), and accepts the WebSocket at
  the stream path (or its alias for SageMaker's `ModelInvocationPath`, see `server`) unless the
  server answers the upgrade itself (401 without the bearer token, see `auth`). Then it feeds the
  client's bytes to the protocol in pieces, within a budget per turn of the event loop: every frame
  (data, continuation, ping, pong) and every byte counts, so that no client can keep the loop from
  the other streams and `/ping`. Fragments are joined in one buffer bounded by the message size
  limit, at most `MAX_FRAGMENTS` per message; pings and pongs are limited to
  `MAX_CONTROL_FRAMES_PER_S` (both close with 1008). While the bridge holds a client back (vLLM has
  not accepted the session, or a write buffer is full), its messages are kept in order until
  `HOLD_BYTES` of them are held, then parsing and reading stop: what a held client costs is weighed
  in bytes, not counted in frames. When the turn's budget is spent, parsing stops until the next
  turn.
- `UpstreamLeg` (vLLM's side, trusted, on loopback): the WebSocket client handshake and the relay of
  vLLM's messages; its write buffer's back-pressure holds the client.

Frames are forwarded inside these callbacks (no `recv()`/`send()` tasks), which keeps the relay's
CPU per frame and its latency tail low (see services/bridge/README.md, Benchmark).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Protocol

from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.uri import WebSocketURI

from . import plain_http

log = logging.getLogger("bridge")

#: Longest wait for a complete request head from a new connection, seconds (a slow or idle client's
#: socket is dropped after it; websockets' own servers use 10 s).
OPEN_TIMEOUT_S = 10.0
#: Longest wait for the client's side of a closing handshake, seconds; then the TCP connection is
#: dropped.
CLIENT_CLOSE_TIMEOUT_S = 2.0
#: Longest wait for vLLM's close frame when the bridge closes its socket, seconds; then the TCP
#: connection is dropped. Keeps "client gone -> vLLM socket closed" under 1 s even if vLLM hangs.
UPSTREAM_CLOSE_TIMEOUT_S = 0.5
#: After a plain HTTP answer, how long the bridge reads and discards what the caller still sends
#: before dropping the connection, seconds (closing with unread input would reset the connection,
#: which can destroy the answer before the caller reads it).
ANSWERED_LINGER_S = 2.0
#: Largest amount discarded after a plain HTTP answer, bytes; beyond it the connection is dropped.
MAX_DISCARD_BYTES = 8 * 1024 * 1024
#: Write buffer high-water mark per socket, bytes, about three appends. Above it, the other side is
#: held.
WRITE_LIMIT_BYTES = 16 * 1024
#: Frames (of any kind) the bridge parses from one client in one turn of the event loop; then it
#: pauses that client until the next turn. One read can carry thousands of small frames.
FRAME_BUDGET = 32
#: Client bytes the bridge parses in one turn of the event loop (one 4 MiB frame takes 64 turns):
#: with 8 clients pushing 4 MiB frames at once, a turn of every stream takes a few ms on a loaded
#: machine.
BYTE_BUDGET = 64 * 1024
#: Client bytes fed to the protocol at a time: one 4096-byte PCM16 append is about 5.5 KiB as a
#: frame.
FEED_BYTES = 8 * 1024
#: Bytes fed at a time, from then on, to a client one of whose pieces held more frames than a turn's
#: budget (frames of under 256 bytes on average), so that one piece holds at most ~40 frames (about
#: 0.2 ms of parsing at ~5 µs per frame) and the budget is looked at often. Streaming clients never
#: trip it (an append of 10 ms of audio is a ~450-byte frame); the piece a flood first arrives in
#: costs up to ~7 ms once.
SMALL_FEED_BYTES = 256
#: Bytes of client messages the bridge parses and keeps while it holds the client back (in order, to
#: be handled once released); then it stops parsing and reading (the transport may deliver one more
#: read, up to 256 KiB, kept unparsed). Control frames meanwhile are answered (pings, the closing
#: handshake).
HOLD_BYTES = 64 * 1024
#: Most frames one message may be split into (RFC 6455 fragments); more closes with 1008. A 4 MiB
#: message in 64 KiB fragments fits.
MAX_FRAGMENTS = 64
#: Most ping and pong frames a client may send per second; more closes with 1008. SageMaker pings
#: once every 60 s (SageMaker container contract, see `server`).
MAX_CONTROL_FRAMES_PER_S = 10

# Why the bridge holds a client's bytes instead of parsing them (bits of `ClientLeg.hold_reasons`).
#: vLLM has not accepted the session yet.
HOLD_PENDING = 1
#: vLLM's socket has more than `WRITE_LIMIT_BYTES` waiting to be sent.
HOLD_UPSTREAM_FULL = 2
#: The client's own socket has more than `WRITE_LIMIT_BYTES` waiting: it is not reading its events
#: (relayed or the bridge's own error events), so the bridge stops reading what it sends.
HOLD_CLIENT_FULL = 4
#: The frame or byte budget of this turn of the event loop is spent.
HOLD_BUDGET = 8
#: A large append is being checked and forwarded a slice per turn (`stream.Stream`).
HOLD_SLICES = 16

# Phases of a client connection.
_HEAD, _WEBSOCKET, _ANSWERED = range(3)


class StreamEnd(Protocol):
    """What a leg calls on the stream it belongs to (`stream.Stream`)."""

    upstream: UpstreamLeg | None
    client: ClientLeg

    def from_client(self, message: bytes) -> None: ...
    def from_upstream(self, message: bytes) -> None: ...
    def guarded(self, handler: Callable[[bytes], None], message: bytes) -> None: ...
    def client_lost(self) -> None: ...
    def upstream_lost(self) -> None: ...


class LegOwner(Protocol):
    """What a `ClientLeg` needs from the server (`server.Bridge`)."""

    max_frame_bytes: int
    legs: set[ClientLeg]

    def answer_get(self, path: str, headers: Headers) -> Response | None: ...
    def answer_non_get(self, head: bytes) -> Response: ...
    def stream_accepted(self, leg: ClientLeg) -> None: ...


def _write(transport: asyncio.Transport, writes: list[bytes]) -> None:
    """Write what a websockets protocol gave (`data_to_send`); `SEND_EOF` (empty bytes)
    half-closes."""
    for data in writes:
        if transport.is_closing():
            return
        if data:
            transport.write(data)
        elif transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()


class ClientLeg(asyncio.Protocol):
    """One connection from a caller: plain HTTP answers, or the client side of a relayed stream.

    Attributes:
        ws: the Sans-I/O protocol once the WebSocket is accepted (None before, and for plain HTTP).
        stream: the relayed stream (`stream.Stream`), set by the server while it relays.
        hold_reasons: `HOLD_*` bits; while not 0 the client's messages are held (see the module
            docstring).
        closed: resolves when the TCP connection is gone.
    """

    __slots__ = (
        "_control_count",
        "_control_window",
        "_discarded",
        "_fragment_count",
        "_fragments",
        "_head",
        "_held",
        "_held_bytes",
        "_phase",
        "_reading_paused",
        "_releasing",
        "_small_pieces",
        "_timer",
        "_turn_bytes",
        "_turn_frames",
        "_unparsed",
        "closed",
        "hold_reasons",
        "loop",
        "owner",
        "stream",
        "transport",
        "ws",
    )

    def __init__(self, owner: LegOwner) -> None:
        self.owner = owner
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.ws: ServerProtocol | None = None
        self.stream: StreamEnd | None = None
        # Frames can arrive in the same read as the upgrade request, before the server has decided
        # to relay or refuse the stream: hold them from the start.
        self.hold_reasons = HOLD_PENDING
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self._phase = _HEAD
        self._head: bytearray | None = bytearray()
        self._discarded = 0
        self._unparsed = (
            b""  # client bytes not fed to the protocol yet; reading is paused meanwhile
        )
        self._held: collections.deque[bytes] | None = None  # messages parsed while held, in order
        self._held_bytes = 0
        self._reading_paused = False
        self._releasing = False
        self._turn_frames = 0
        self._turn_bytes = 0
        self._small_pieces = False
        self._fragments: bytearray | None = None
        self._fragment_count = 0
        self._control_window = 0.0
        self._control_count = 0
        self._timer: asyncio.TimerHandle | None = None

    # ---- asyncio.Protocol callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=WRITE_LIMIT_BYTES)
        self.owner.legs.add(self)
        self._timer = self.loop.call_later(OPEN_TIMEOUT_S, self.transport.abort)

    def data_received(self, data: bytes) -> None:
        if self._phase == _WEBSOCKET:
            self._receive(data)
        elif self._phase == _HEAD:
            self._head_received(data)
        else:  # _ANSWERED: discard what follows an answer
            self._discarded += len(data)
            if self._discarded > MAX_DISCARD_BYTES:
                self.transport.abort()

    def eof_received(self) -> bool | None:
        if self.ws is not None and self._phase == _WEBSOCKET:
            self.ws.receive_eof()
            self._flush()
        return None  # close the transport: the bridge never writes after the peer's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.ws is not None:
            self.ws.receive_eof()  # idempotent: the protocol's state becomes CLOSED
        self._unparsed = b""
        self._held = None
        self._held_bytes = 0
        self._fragments = None
        self.owner.legs.discard(self)
        if not self.closed.done():
            self.closed.set_result(None)
        if self.stream is not None:
            self.stream.client_lost()

    def pause_writing(self) -> None:
        self.hold(HOLD_CLIENT_FULL)
        upstream = self.stream.upstream if self.stream is not None else None
        if upstream is not None and not upstream.transport.is_closing():
            upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        upstream = self.stream.upstream if self.stream is not None else None
        if upstream is not None and not upstream.transport.is_closing():
            upstream.transport.resume_reading()
        self.release(HOLD_CLIENT_FULL)

    # ---- sending --------------------------------------------------------------------------------
    def send_text(self, message: bytes) -> None:
        """Send one text frame now, if the WebSocket is open."""
        if self.ws is not None and self.ws.state is State.OPEN:
            self.ws.send_text(message)
            self._flush()

    def close(self, code: int, reason: str) -> None:
        """Start the closing handshake (`code`, `reason`); the TCP connection is dropped after
        `CLIENT_CLOSE_TIMEOUT_S` if the client does not answer. Reads on, dropping frames,
        meanwhile."""
        if self.ws is not None and self.ws.state is State.OPEN:
            self.ws.send_close(code, reason)
            self._flush()
            self.release(HOLD_PENDING | HOLD_UPSTREAM_FULL)  # read the client's close frame
        elif self.ws is None:
            self.transport.close()

    def _flush(self) -> None:
        ws = self.ws
        assert ws is not None
        _write(self.transport, ws.data_to_send())
        if self._timer is None and ws.close_expected():
            self._timer = self.loop.call_later(CLIENT_CLOSE_TIMEOUT_S, self.transport.abort)

    # ---- holding the client back ----------------------------------------------------------------
    def hold(self, reason: int) -> None:
        """Hold the client's messages (one of the `HOLD_*` bits) until `release(reason)`."""
        self.hold_reasons |= reason

    def release(self, reason: int) -> None:
        """Clear hold reasons; with none left, handle the held messages and the unparsed bytes
        (within the turn's budget) and read on."""
        self.hold_reasons &= ~reason
        if self.hold_reasons or self._releasing or self._phase != _WEBSOCKET:
            return
        self._releasing = True
        try:
            self._turn_frames = self._turn_bytes = (
                0  # every release runs in its own callback: a new turn
            )
            held = self._held
            while held and not self.hold_reasons:
                if self._turn_frames >= FRAME_BUDGET:
                    self._end_turn()
                    return
                message = held.popleft()
                self._held_bytes -= len(message)
                self._turn_frames += 1
                self._handle(message)
            if self._unparsed and not self.hold_reasons:
                data, self._unparsed = self._unparsed, b""
                self._feed(data)
            if self._reading_paused and not self._unparsed and not self.hold_reasons:
                self._reading_paused = False
                if not self.transport.is_closing():
                    self.transport.resume_reading()
        finally:
            self._releasing = False

    def _end_turn(self) -> None:
        """The turn's budget is spent: go on in the next turn of the event loop."""
        self.hold(HOLD_BUDGET)
        self.loop.call_soon(self.release, HOLD_BUDGET)

    def _pause_reading(self) -> None:
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    # ---- the WebSocket --------------------------------------------------------------------------
    def _receive(self, data: bytes) -> None:
        if self._unparsed:  # parsing has stopped; reading is paused (one more read may arrive)
            self._unparsed += data
            return
        if not self.hold_reasons & HOLD_BUDGET:
            self._turn_frames = self._turn_bytes = 0  # each read is a new turn of the event loop
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        """Feed `data` to the protocol a piece at a time while this turn's budget lasts and fewer
        than `HOLD_BYTES` of messages are held; keep the rest unparsed and stop reading."""
        ws = self.ws
        assert ws is not None
        size, offset = len(data), 0
        view = memoryview(data)
        while offset < size:
            if self.hold_reasons & HOLD_BUDGET or self._held_bytes >= HOLD_BYTES:
                break
            if self._turn_frames >= FRAME_BUDGET or self._turn_bytes >= BYTE_BUDGET:
                self._end_turn()
                break
            end = min(size, offset + (SMALL_FEED_BYTES if self._small_pieces else FEED_BYTES))
            piece = data if offset == 0 and end == size else bytes(view[offset:end])
            offset = end
            self._turn_bytes += len(piece)
            ws.receive_data(piece)
            events = ws.events_received()
            if len(events) > FRAME_BUDGET:
                self._small_pieces = (
                    True  # for good: no streaming client sends so many frames at once
                )
            for event in events:
                self._frame_received(event)  # type: ignore[arg-type]  # only frames once the WebSocket is open
            self._flush()
            if ws.state is not State.OPEN and self.stream is not None:
                # a close frame, or the protocol failed the connection (1002, 1009)
                self.stream.client_lost()
        if offset < size:
            self._unparsed = bytes(view[offset:])
            self._pause_reading()

    def _frame_received(self, frame: Frame) -> None:
        self._turn_frames += 1
        opcode = frame.opcode
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if frame.fin:
                self._deliver(bytes(frame.data))  # bytes already: the protocol parses into bytes
            else:
                self._fragments = bytearray(frame.data)
                self._fragment_count = 1
        elif opcode is Opcode.CONT:
            if self._fragments is None:
                # the protocol has failed the connection (a stray continuation); nothing to join
                return
            self._fragment_count += 1
            if self._fragment_count > MAX_FRAGMENTS:
                self._violation(f"more than {MAX_FRAGMENTS} fragments in one message")
                return
            self._fragments += (
                frame.data
            )  # bounded: the protocol enforces the message size limit (1009)
            if frame.fin:
                message, self._fragments = bytes(self._fragments), None
                self._deliver(message)
        elif opcode is Opcode.PING or opcode is Opcode.PONG:  # the protocol has queued the pong
            now = time.monotonic()
            if now - self._control_window >= 1.0:
                self._control_window, self._control_count = now, 0
            self._control_count += 1
            if self._control_count > MAX_CONTROL_FRAMES_PER_S:
                self._violation(
                    f"more than {MAX_CONTROL_FRAMES_PER_S} ping or pong frames in one second"
                )

    def _deliver(self, message: bytes) -> None:
        if self._turn_frames > FRAME_BUDGET and not self.hold_reasons & HOLD_BUDGET:
            # a piece held more frames than the budget had left: the rest wait their turn
            self._end_turn()
        if self.hold_reasons or self._held:  # held in order, weighed in bytes (see _feed)
            if self._held is None:
                self._held = collections.deque()  # made on first use: an empty deque is ~600 bytes
            self._held.append(message)
            self._held_bytes += len(message)
            return
        self._handle(message)

    def _handle(self, message: bytes) -> None:
        stream = self.stream
        if stream is not None:  # None: a refused stream, whose messages are read and dropped
            stream.guarded(stream.from_client, message)

    def _violation(self, reason: str) -> None:
        """Close the connection with 1008 (policy violation) for `reason` and end its stream."""
        log.warning("closing a client connection (1008): %s", reason)
        assert self.ws is not None
        if self.ws.state is State.OPEN:
            self.ws.fail(CloseCode.POLICY_VIOLATION, reason)
            self._flush()
        self._fragments = None
        if self.stream is not None:
            self.stream.client_lost()

    # ---- the request head -----------------------------------------------------------------------
    def _head_received(self, data: bytes) -> None:
        head = self._head
        assert head is not None
        head += data
        if not head.startswith(b"GET "):
            if len(head) < 4 and b"GET ".startswith(head):
                return  # too short to tell
            end = head.find(b"\r\n\r\n")
            if end >= 0:
                self._answer(self.owner.answer_non_get(bytes(head[:end])))
            elif len(head) > plain_http.MAX_HEAD_BYTES:
                self._answer_too_large()
            return
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > plain_http.MAX_HEAD_BYTES:
                self._answer_too_large()
            return
        request_bytes, rest = bytes(head[: end + 4]), bytes(head[end + 4 :])
        self._head = None
        ws = ServerProtocol(max_size=self.owner.max_frame_bytes)
        ws.receive_data(request_bytes)
        events = ws.events_received()
        if not events or not isinstance(
            events[0], Request
        ):  # websockets could not parse the request
            writes = ws.data_to_send()
            if any(writes):  # websockets answered it (414, 431)
                self._phase = _ANSWERED
                _write(self.transport, writes)
                self._linger()
            else:
                self._answer(
                    plain_http.json_response(
                        HTTPStatus.BAD_REQUEST,
                        {"error": "malformed HTTP request", "code": "bad_request"},
                    )
                )
            return
        request = events[0]
        response = self.owner.answer_get(request.path.split("?", 1)[0], request.headers)
        if response is None:  # the stream path: the WebSocket handshake
            response = ws.accept(request)
            ws.send_response(response)
            if response.status_code == 101:
                self.ws = ws
                self._phase = _WEBSOCKET
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                _write(self.transport, ws.data_to_send())
                self.owner.stream_accepted(self)
                if rest:
                    self._receive(rest)  # held (HOLD_PENDING) until vLLM accepts the session
                return
        else:
            ws.send_response(response)  # what follows the request (a stray CRLF, say) is dropped
        self._phase = _ANSWERED
        _write(self.transport, ws.data_to_send())
        self._linger()

    def _answer(self, response: Response) -> None:
        """Answer a request websockets does not parse, half-close, and discard what follows."""
        self._phase = _ANSWERED
        self._head = None
        writer = (
            ServerProtocol()
        )  # serialises the response and the half-close, through its documented API
        writer.send_response(response)
        _write(self.transport, writer.data_to_send())
        self._linger()

    def _answer_too_large(self) -> None:
        self._answer(
            plain_http.json_response(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                {
                    "error": f"request head larger than {plain_http.MAX_HEAD_BYTES} bytes",
                    "code": "bad_request",
                },
            )
        )

    def _linger(self) -> None:
        """Drop the connection `ANSWERED_LINGER_S` after an answer unless the caller closes it
        first."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(ANSWERED_LINGER_S, self.transport.abort)


class UpstreamLeg(asyncio.Protocol):
    """The vLLM side of one stream: the client handshake, then vLLM's messages go to
    `stream.from_upstream`.

    Attributes:
        ws: the Sans-I/O client protocol.
        opened: resolves when vLLM accepted the WebSocket; fails with websockets' handshake
            exception or `ConnectionError` when it did not.
        closed: resolves when the TCP connection is gone.
        last_rx: `time.monotonic()` of the last bytes from vLLM (see
            `sweep.sweep_streams`).
        ping_sent_at: when the bridge pinged a silent vLLM, else None.
    """

    __slots__ = (
        "_fragments",
        "_timer",
        "closed",
        "last_rx",
        "loop",
        "opened",
        "ping_sent_at",
        "stream",
        "transport",
        "ws",
    )

    def __init__(self, stream: StreamEnd, uri: WebSocketURI, max_size: int) -> None:
        self.stream = stream
        self.loop = asyncio.get_running_loop()
        self.ws = ClientProtocol(uri, max_size=max_size)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set in connection_made
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.last_rx = time.monotonic()
        self.ping_sent_at: float | None = None
        self._fragments: bytearray | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=WRITE_LIMIT_BYTES)
        self.ws.send_request(self.ws.connect())
        self._flush()

    def data_received(self, data: bytes) -> None:
        self.last_rx = time.monotonic()
        ws = self.ws
        ws.receive_data(data)
        for event in ws.events_received():
            if isinstance(event, Frame):
                self._frame_received(event)
            elif not self.opened.done():  # the handshake Response
                if ws.handshake_exc is None:
                    self.opened.set_result(None)
                else:
                    self.opened.set_exception(ws.handshake_exc)
        if not self.opened.done() and ws.handshake_exc is not None:  # not even an HTTP response
            self.opened.set_exception(ws.handshake_exc)
        self._flush()

    def _frame_received(self, frame: Frame) -> None:
        opcode = frame.opcode
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if frame.fin:
                self.stream.guarded(self.stream.from_upstream, bytes(frame.data))  # as above
            else:
                self._fragments = bytearray(frame.data)
        elif opcode is Opcode.CONT and self._fragments is not None:
            self._fragments += frame.data  # bounded by the message size limit
            if frame.fin:
                message, self._fragments = bytes(self._fragments), None
                self.stream.guarded(self.stream.from_upstream, message)
        # Pings are answered by the protocol; a pong (or any frame) has moved last_rx.

    def eof_received(self) -> bool | None:
        self.ws.receive_eof()
        self._flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.ws.receive_eof()
        self._fragments = None
        if not self.closed.done():
            self.closed.set_result(None)
        if not self.opened.done():
            self.opened.set_exception(
                ConnectionError(f"vLLM closed the connection during the handshake ({exc})")
            )
        else:
            self.stream.upstream_lost()

    def pause_writing(self) -> None:
        self.stream.client.hold(HOLD_UPSTREAM_FULL)

    def resume_writing(self) -> None:
        self.stream.client.release(HOLD_UPSTREAM_FULL)

    def send_text(self, message: bytes) -> None:
        """Send one text frame now, if the WebSocket is open."""
        if self.ws.state is State.OPEN:
            self.ws.send_text(message)
            self._flush()

    def send_fragment(self, data: bytes | memoryview, first: bool, fin: bool) -> None:
        """Send one fragment of a text message (`first`: it opens the message; `fin`: it ends
        it)."""
        if self.ws.state is State.OPEN:
            if first:
                self.ws.send_text(data, fin=fin)
            else:
                self.ws.send_continuation(data, fin=fin)
            self._flush()

    def send_ping(self, data: bytes) -> None:
        """Send a ping (its pong, or any frame, moves `last_rx`)."""
        if self.ws.state is State.OPEN:
            self.ws.send_ping(data)
            self._flush()

    def close(self) -> None:
        """Close with 1000; the TCP connection is dropped after `UPSTREAM_CLOSE_TIMEOUT_S` if vLLM
        does not answer."""
        if self.ws.state is State.OPEN:
            self.ws.send_close(CloseCode.NORMAL_CLOSURE)
            self._flush()
        elif self.ws.state is State.CONNECTING and self.transport is not None:
            self.transport.abort()

    def _flush(self) -> None:
        _write(self.transport, self.ws.data_to_send())
        if self._timer is None and self.ws.close_expected():
            self._timer = self.loop.call_later(UPSTREAM_CLOSE_TIMEOUT_S, self.transport.abort)
