"""hypercorn's HTTP/2 protocol and TCP server, and h2's frame buffer, subclassed with the bounds
of :class:`~voice_devtools.local.bounds.ServerLimits` (:func:`voice_devtools.local.bounds.install`
puts them where hypercorn looks them up; this module imports hypercorn and h2, so only a server
loads it).

They rely on hypercorn's ``H2Protocol`` and ``TCPServer`` methods and h2's ``FrameBuffer`` as pinned
in the lock files (hypercorn 0.18, h2 4.4; tests/e2e/local cover each behaviour).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import priority
from h2.errors import ErrorCodes
from h2.events import DataReceived
from h2.exceptions import DenialOfServiceError, ProtocolError, StreamClosedError
from h2.frame_buffer import FrameBuffer
from h2.stream import StreamState
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.events import Closed, RawData, Updated
from hypercorn.protocol.h2 import H2Protocol
from hyperframe.frame import HeadersFrame, PushPromiseFrame

from voice_devtools.local.bounds import STREAM_RESET_EXTENSION, bounds_of, connection_logger


class HeaderBoundedFrameBuffer(FrameBuffer):
    """h2's frame buffer of a server connection, refusing a header block whose encoded bytes pass
    ``limit`` as they arrive (h2 alone keeps up to 64 CONTINUATION frames, then checks the decoded
    size)."""

    def __init__(self, limit: int) -> None:
        super().__init__(server=True)
        self.header_limit = limit

    def _update_header_buffer(self, frame: Any) -> Any:
        result = super()._update_header_buffer(frame)
        size = sum(len(pending.data) for pending in self._headers_buffer)
        if isinstance(result, HeadersFrame | PushPromiseFrame):
            size = max(size, len(result.data))
        if size > self.header_limit:
            raise DenialOfServiceError(
                f"a header block of over {self.header_limit} bytes (MAX_HEADER_LIST_SIZE)"
            )
        return result


class BoundedH2Protocol(H2Protocol):
    """hypercorn's HTTP/2 protocol with the bounds of
    :class:`~voice_devtools.local.bounds.ServerLimits`, and two fixes:
    a stream whose response ended before its request is reset (NO_ERROR, RFC 9113 section
    8.1: the caller learns of a refusal at once), and request data for a stream the
    application is done with is dropped (hypercorn raised ``KeyError`` on it, ending the
    connection)."""

    voicectl_bounded = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bounds = bounds_of(self.config)
        limit = self.bounds.limits.max_header_list_size
        self.connection.incoming_buffer = HeaderBoundedFrameBuffer(limit)
        self.connection.decoder.max_header_list_size = limit
        self._stalls: dict[int, asyncio.TimerHandle] = {}
        self._linger: asyncio.Task[None] | None = None  # set once GOAWAY is sent
        self._lingering = False  # the linger is still waiting for the peer to close
        self.bounds.protocols.add(self)

    # ---- input ------------------------------------------------------------------------
    async def handle(self, event: Any) -> None:
        if isinstance(event, RawData):
            if self._linger is not None:
                return  # GOAWAY sent: read and drop until the peer closes (CLOSE_TIMEOUT_S)
            try:
                events = self.connection.receive_data(event.data)
            except ProtocolError as error:
                await self._refuse(error)
            else:
                await self._handle_events(events)
            return
        if isinstance(event, Closed):
            await self._release_all()
        await super().handle(event)

    async def _refuse(self, error: ProtocolError) -> None:
        """h2 ended the connection (its GOAWAY is queued): log it, send it, and close once
        the peer has read it."""
        code = ErrorCodes(getattr(error, "error_code", ErrorCodes.PROTOCOL_ERROR))
        connection_logger.info(
            "closed the HTTP/2 connection from %s with GOAWAY %s: %s",
            _peer(self.client),
            code.name,
            error,
        )
        await self._flush()
        self._lingering = True
        self._linger = asyncio.ensure_future(self._close_later())

    async def _close_later(self) -> None:
        await asyncio.sleep(self.bounds.limits.close_timeout_s)
        self._lingering = False
        await self.send(Closed())

    async def _handle_events(self, events: list[Any]) -> None:
        # One event at a time: a stream opened earlier in the same batch exists by the time
        # its data is handled, and one the application finished meanwhile is known gone.
        for event in events:
            if isinstance(event, DataReceived) and event.stream_id not in self.streams:
                # The application is done with this stream: give the credit back, drop it.
                self.connection.acknowledge_received_data(
                    event.flow_controlled_length, event.stream_id
                )
                await self._flush()
                continue
            await super()._handle_events([event])

    # ---- output -----------------------------------------------------------------------
    async def _send_data(self, stream_id: int) -> None:
        """Send what fits in the peer's window (hypercorn's own, with a clock on a stream
        that holds data while the window is 0, and the NO_ERROR reset)."""
        buffer = self.stream_buffers.get(stream_id)
        if buffer is None:  # released meanwhile
            self._forget(stream_id)
            return
        try:
            window = self.connection.local_flow_control_window(stream_id)
            size = max(0, min(window, self.connection.max_outbound_frame_size))
            data = await buffer.pop(size)
            if data:
                self._progressed(stream_id)
                self.connection.send_data(stream_id, data)
                await self._flush()
            else:
                self.priority.block(stream_id)
                if buffer.buffer:
                    self._stalled(stream_id)
            if buffer.complete:
                self.connection.end_stream(stream_id)
                await self._flush()
                self._forget(stream_id)
                await self._reset_if_request_open(stream_id)
        except (StreamClosedError, KeyError, ProtocolError):
            # The stream or the connection closed while this waited: drop what is left.
            await buffer.close()
            self._forget(stream_id)

    async def _reset_if_request_open(self, stream_id: int) -> None:
        """The response is complete: if the request is not, end the stream (RFC 9113
        section 8.1, RST_STREAM NO_ERROR) so the caller stops sending now."""
        stream = self.connection.streams.get(stream_id)
        if stream is not None and stream.state_machine.state is StreamState.HALF_CLOSED_LOCAL:
            self.connection.reset_stream(stream_id, ErrorCodes.NO_ERROR)
            await self._flush()

    def _forget(self, stream_id: int) -> None:
        self.stream_buffers.pop(stream_id, None)
        self._progressed(stream_id)
        with contextlib.suppress(priority.MissingStreamError):
            self.priority.remove_stream(stream_id)

    # ---- the stalled-send clock ---------------------------------------------------------
    def _stalled(self, stream_id: int) -> None:
        if stream_id not in self._stalls and not self.closed:
            self._stalls[stream_id] = asyncio.get_running_loop().call_later(
                self.bounds.limits.stalled_send_timeout_s, self._stall_expired, stream_id
            )

    def _progressed(self, stream_id: int) -> None:
        handle = self._stalls.pop(stream_id, None)
        if handle is not None:
            handle.cancel()

    def _stall_expired(self, stream_id: int) -> None:
        self._stalls.pop(stream_id, None)
        with contextlib.suppress(RuntimeError):  # the connection's task group has ended
            self.task_group.spawn(self._reset_stalled, stream_id)

    async def _reset_stalled(self, stream_id: int) -> None:
        if self.closed or stream_id not in self.stream_buffers:
            return
        timeout = self.bounds.limits.stalled_send_timeout_s
        reason = f"reset (CANCEL): the caller's flow-control window stayed at 0 for {timeout:g} s"
        scope = getattr(self.streams.get(stream_id), "scope", None)
        if isinstance(scope, dict):  # the call's access line says it
            scope.setdefault("extensions", {})[STREAM_RESET_EXTENSION] = {"reason": reason}
        else:
            connection_logger.info("stream %d from %s %s", stream_id, _peer(self.client), reason)
        with contextlib.suppress(StreamClosedError, ProtocolError):
            self.connection.reset_stream(stream_id, ErrorCodes.CANCEL)
        await self._release(stream_id)
        await self._flush()

    # ---- releasing --------------------------------------------------------------------
    async def _release(self, stream_id: int) -> None:
        """Free what a stream holds: its response buffer (waking the application's send),
        its queued request body, its place in the stream table (the application is told
        ``http.disconnect``)."""
        buffer = self.stream_buffers.get(stream_id)
        if buffer is not None:
            await buffer.close()
        self._forget(stream_id)
        stream = self.streams.get(stream_id)
        if stream is not None:
            _drop_queued_input(stream)
            await self._close_stream(stream_id)

    async def _release_all(self) -> None:
        """The connection ends: free every stream's buffers before hypercorn closes the
        streams (an application blocked on a full window would otherwise wait forever)."""
        for handle in self._stalls.values():
            handle.cancel()
        self._stalls.clear()
        if self._linger is not None and self._lingering:  # the peer closed first
            self._lingering = False
            self._linger.cancel()
        for buffer in list(self.stream_buffers.values()):
            await buffer.close()
        for stream in list(self.streams.values()):
            _drop_queued_input(stream)


class BoundedTCPServer(TCPServer):
    """hypercorn's connection handler, with :data:`~voice_devtools.local.bounds.MAX_CONNECTIONS`,
    a deadline on writes the peer does not read
    (:data:`~voice_devtools.local.bounds.STALLED_SEND_TIMEOUT_S`) and a bounded, quiet close
    (:data:`~voice_devtools.local.bounds.CLOSE_TIMEOUT_S`; hypercorn let asyncio's TLS close
    time out after 30 s with a traceback)."""

    voicectl_bounded = True

    async def run(self) -> None:
        bounds = bounds_of(self.config)
        if bounds.connections >= bounds.limits.max_connections:
            connection_logger.info(
                "refused a connection from %s: %d connections are open (at most %d)",
                _peer(self.writer.get_extra_info("peername")),
                bounds.connections,
                bounds.limits.max_connections,
            )
            self.writer.transport.abort()
            return
        bounds.connections += 1
        try:
            await super().run()
        finally:
            bounds.connections -= 1

    async def _read_data(self) -> None:
        await super()._read_data()
        # The peer is gone: no idle clock for the streams still ending (hypercorn started
        # one when each finished, holding the closed connection for keep_alive_timeout).
        self.ended = True
        await self.idle_task.stop()

    async def protocol_send(self, event: Any) -> None:
        if isinstance(event, Updated) and getattr(self, "ended", False):
            return
        if not isinstance(event, RawData):
            await super().protocol_send(event)
            return
        timeout = bounds_of(self.config).limits.stalled_send_timeout_s
        async with self.send_lock:
            try:
                self.writer.write(event.data)
                async with asyncio.timeout(timeout):
                    await self.writer.drain()
                return
            except TimeoutError:
                connection_logger.info(
                    "closed the connection from %s: it read nothing for %g s",
                    _peer(self.writer.get_extra_info("peername")),
                    timeout,
                )
                self.writer.transport.abort()
            except (ConnectionError, RuntimeError):
                pass
        await self.protocol.handle(Closed())

    async def _close(self) -> None:
        with contextlib.suppress(NotImplementedError, OSError, RuntimeError):
            self.writer.write_eof()  # not for TLS
        try:
            self.writer.close()
            async with asyncio.timeout(bounds_of(self.config).limits.close_timeout_s):
                await self.writer.wait_closed()
        except TimeoutError:
            self.writer.transport.abort()
        except (OSError, RuntimeError, asyncio.CancelledError):
            pass  # already closed
        finally:
            await self.idle_task.stop()


def _drop_queued_input(stream: Any) -> None:
    """Empty the queue of ASGI messages a stream's application has not read (hypercorn's
    ``app_put`` is that queue's ``put``), so that the ``http.disconnect`` put next cannot block
    and a blocked put of request data is released."""
    queue = getattr(getattr(stream, "app_put", None), "__self__", None)
    if isinstance(queue, asyncio.Queue):
        while not queue.empty():
            queue.get_nowait()


def _peer(client: Any) -> str:
    """``host:port`` of a peer address, for the log lines (``-`` when unknown)."""
    return f"{client[0]}:{client[1]}" if client else "-"
