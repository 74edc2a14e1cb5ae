"""``InvokeEndpointWithBidirectionalStream`` for the local front door: an AWS event stream each way
over one HTTP/2 request, relayed to the container's WebSocket as SageMaker's sidecar does.

SageMaker's side of the contract (SageMaker Developer Guide, "Custom Inference Code with Hosting
Services", section "Container Contract to Support Bidirectional Streaming Capabilities"):

- The container is reached at ``ws://<container>/invocations-bidirectional-stream``; the caller may
  replace the path with ``X-Amzn-SageMaker-Model-Invocation-Path`` and append a query string with
  ``X-Amzn-SageMaker-Model-Query-String``. The container must accept the WebSocket within 250 ms
  (SageMaker's container contract for bidirectional streaming, quoted in
  services/bridge/server.py).
- Each request ``PayloadPart`` becomes exactly one WebSocket data frame, its bytes unchanged: a text
  frame for ``DataType`` ``UTF8``, a binary frame for ``BINARY`` or no ``DataType``. Parts with
  ``CompletionState`` ``PARTIAL`` followed by a ``COMPLETE`` part become one fragmented message.
- Each data frame from the container becomes one response ``PayloadPart`` with ``DataType`` ``UTF8``
  (text) or ``BINARY`` and ``CompletionState`` ``PARTIAL`` for a fragment that is not the last of
  its message.
- A close frame from the container becomes a ``ModelStreamError`` carrying its status code
  (``ErrorCode``) and reason (``Message``). SageMaker pings the container every 60 s and closes the
  connection after 5 pings in a row go unanswered; it answers the container's pings.

Choices where the documentation is silent (marked "local choice" in the code): a container
connection that drops without a close frame, or that stops answering pings, ends the stream with
``ModelStreamError`` ``StreamBroken`` (the code InvokeEndpointWithResponseStream documents for a
broken connection to the model); a container that refuses or does not accept the WebSocket in time
is a ``ModelError`` (424) before the stream starts; an event whose signature does not verify, or
whose ``DataType`` or ``CompletionState`` is not an allowed value, ends the stream with an event
stream ``error`` message naming the problem. The end of the request stream (the signed empty
envelope, or the end of the HTTP/2 request body) closes the WebSocket with 1000; frames the
container sends before its close reply are still relayed. websockets ends a fragmented message it
sends with an empty final frame, so a fragmented message reaches the container with one more (empty)
frame than it had parts; the message itself is unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from voice_devtools.local.shapes import (
    BINARY,
    COMPLETE,
    PARTIAL,
    UTF8,
    error_event,
    exception_event,
    model_error,
    payload_part,
)
from voice_devtools.local.sigv4 import EventSignatureChain, SignatureError

logger = logging.getLogger(__name__)

DEFAULT_INVOCATION_PATH = "/invocations-bidirectional-stream"
"""Container path of the WebSocket when the caller gives no
``X-Amzn-SageMaker-Model-Invocation-Path``."""

ACCEPT_TIMEOUT_S = 0.25
"""The container must accept the WebSocket within 250 ms (TCP connect and upgrade)."""

PING_INTERVAL_S = 60.0
"""SageMaker pings the container once every 60 s."""

MAX_UNANSWERED_PINGS = 5
"""SageMaker closes the connection when 5 pings in a row get no pong."""

CLOSE_TIMEOUT_S = 2.0
"""Seconds the front door waits for the container's close reply before dropping the connection
(local choice)."""

REQUEST_DRAIN_TIMEOUT_S = 5.0
"""Seconds the front door waits for the caller to end its request stream before it ends the response
anyway (local choice)."""

STREAM_BROKEN = "StreamBroken"
"""``ModelStreamError.ErrorCode`` for a connection to the container lost without a close frame
(local choice, see the module docstring)."""

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class StreamSettings:
    """Timings of the container connection (seconds); tests shorten ``ping_interval_s``."""

    accept_timeout_s: float = ACCEPT_TIMEOUT_S
    ping_interval_s: float = PING_INTERVAL_S
    max_unanswered_pings: int = MAX_UNANSWERED_PINGS
    close_timeout_s: float = CLOSE_TIMEOUT_S

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be a positive number of seconds, got {value}"
            for name, value in (
                ("accept_timeout_s", self.accept_timeout_s),
                ("ping_interval_s", self.ping_interval_s),
                ("close_timeout_s", self.close_timeout_s),
            )
            if not value > 0
        ]
        if self.max_unanswered_pings < 1:
            problems.append(
                f"max_unanswered_pings must be at least 1, got {self.max_unanswered_pings}"
            )
        if problems:
            raise ValueError("; ".join(problems))


class ClientGone(Exception):
    """The caller disconnected before the request stream ended."""


class BadRequestStream(Exception):
    """The request stream broke the protocol; ``code`` and the message go into an event stream
    ``error`` message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def container_url(base: str, invocation_path: str | None, query_string: str | None) -> str:
    """The container's WebSocket URL: ``base`` (``ws://host:port``) plus the invocation path and
    query string."""
    path = "/" + invocation_path.lstrip("/") if invocation_path else DEFAULT_INVOCATION_PATH
    return f"{base.rstrip('/')}{path}" + (f"?{query_string}" if query_string else "")


async def connect_container(
    url: str, settings: StreamSettings, *, region: str, endpoint: str, variant: str
) -> Any:
    """Open the WebSocket to the container, as SageMaker does before it answers the call.

    Raises:
        ServiceError: ``ModelError`` (424) when the container refuses the connection, answers the
            upgrade with another status, or does not accept within ``settings.accept_timeout_s``.
    """
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidHandshake, InvalidStatus

    try:
        return await connect(
            url,
            open_timeout=settings.accept_timeout_s,
            ping_interval=None,
            max_size=None,
            compression=None,
            close_timeout=settings.close_timeout_s,
        )
    except TimeoutError:
        original = (
            f"The model container did not accept the WebSocket connection to {url} within "
            f"{settings.accept_timeout_s * 1000:.0f} ms."
        )
        raise model_error(
            region, endpoint, status=None, original=original, variant=variant
        ) from None
    except InvalidStatus as error:
        body = error.response.body.decode("utf-8", "replace")[:1024] if error.response.body else ""
        raise model_error(
            region,
            endpoint,
            status=error.response.status_code,
            variant=variant,
            original=body
            or f"the container answered the WebSocket upgrade to {url} with "
            f"HTTP {error.response.status_code}",
        ) from None
    except (OSError, InvalidHandshake) as error:
        original = (
            f"Could not open a WebSocket to the model container at {url}: "
            f"{error or type(error).__name__}."
        )
        raise model_error(
            region, endpoint, status=None, original=original, variant=variant
        ) from None


class BidirectionalStream:
    """One ``InvokeEndpointWithBidirectionalStream`` call, from an open container WebSocket to the
    end of the response.

    Args:
        websocket: the container connection (from :func:`connect_container`).
        receive, send: the ASGI channel of the HTTP/2 request (the response has been started by the
            caller).
        chain: checks each request envelope's signature.
        settings: ping interval and limits.
    """

    def __init__(
        self,
        websocket: Any,
        receive: Receive,
        send: Send,
        chain: EventSignatureChain,
        settings: StreamSettings,
    ) -> None:
        self._ws = websocket
        self._receive = receive
        self._send = send
        self._chain = chain
        self._settings = settings
        self._closing = (
            False  # the front door started the close: the container's close reply is no error
        )
        self._failure: tuple[str, str] | None = (
            None  # ModelStreamError (ErrorCode, Message) to send
        )
        self._request_ended = False  # the caller ended its half of the HTTP/2 stream (or went away)
        self._fragments: asyncio.Queue[tuple[bytes, bool]] | None = None
        self._fragmented_send: asyncio.Task[None] | None = None
        self.outcome: str | None = None  # how the stream ended when not cleanly, for the access log

    async def run(self) -> None:
        """Relay both ways until the stream ends, then end the response (with a ``ModelStreamError``
        if the container ended it)."""
        from websockets.exceptions import ConnectionClosed

        inbound = asyncio.create_task(self._client_to_container(), name="bidi-inbound")
        outbound = asyncio.create_task(self._container_to_client(), name="bidi-outbound")
        keepalive = asyncio.create_task(self._keepalive(), name="bidi-keepalive")
        trailer: bytes | None = None
        try:
            await asyncio.wait({inbound, outbound, keepalive}, return_when=asyncio.FIRST_COMPLETED)
            if inbound.done():
                error = inbound.exception()
                if isinstance(error, ClientGone):
                    self.outcome = "the caller went away"
                    await self._close_container(1001, "the caller went away")
                    return
                if isinstance(error, ConnectionClosed):
                    # The container went away while a part was being forwarded: the outbound side
                    # says how.
                    await asyncio.wait({outbound}, timeout=self._settings.close_timeout_s)
                elif error is not None:
                    code, message = (
                        (error.code, str(error))
                        if isinstance(error, SignatureError | BadRequestStream)
                        else ("InternalFailure", f"the request stream failed: {error!r}")
                    )
                    trailer = error_event(code, message)
                    self.outcome = f"error {code}"
                    await self._close_container(1008, message[:100])
                else:
                    # The end of the request stream: the close handshake has started; relay what the
                    # container sends until its close reply.
                    await asyncio.wait({outbound}, timeout=self._settings.close_timeout_s * 2)
            elif keepalive.done() and keepalive.exception() is None:
                unanswered = self._settings.max_unanswered_pings
                self._failure = (
                    STREAM_BROKEN,
                    f"The model container answered none of {unanswered} consecutive WebSocket "
                    f"pings (one every {self._settings.ping_interval_s:g} s); the connection to "
                    "it was closed.",
                )
                self._closing = True
                self._ws.transport.abort()
                await asyncio.wait({outbound}, timeout=self._settings.close_timeout_s)
            else:
                await asyncio.wait({outbound}, timeout=self._settings.close_timeout_s)
            if trailer is None and self._failure is not None:
                error_code, message = self._failure
                trailer = exception_event("ModelStreamError", message, error_code)
                self.outcome = f"ModelStreamError {error_code}"
            logger.debug(
                "stream ends: inbound %s, outbound %s, keepalive %s, failure %s, request ended %s",
                _state(inbound),
                _state(outbound),
                _state(keepalive),
                self._failure,
                self._request_ended,
            )
            if trailer is not None:
                with contextlib.suppress(Exception):  # the caller may be gone already
                    await self._emit(trailer)
            # The response ends only after the request stream: the SDK's HTTP/2 client (awscrt)
            # cannot end its request once the response has ended, and would report a failed write.
            await self._finish_request(inbound)
            await self._end_response()
        finally:
            for task in (inbound, outbound, keepalive, self._fragmented_send):
                if task is not None and not task.done():
                    task.cancel()
            for task in (inbound, outbound, keepalive, self._fragmented_send):
                if task is not None:
                    with contextlib.suppress(BaseException):
                        await task
            await self._close_container(1000, "")

    # ---- caller -> container --------------------------------------------------------------------
    async def _body(self) -> AsyncIterator[bytes]:
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._request_ended = True
                raise ClientGone()
            if body := message.get("body", b""):
                yield body
            if not message.get("more_body", False):
                self._request_ended = True
                return

    async def _finish_request(self, inbound: asyncio.Task[None]) -> None:
        """Stop forwarding and wait for the caller to end its half of the HTTP/2 stream (after the
        final envelope, or once it has read a ``ModelStreamError``), reading and dropping what it
        still sends; give up after :data:`REQUEST_DRAIN_TIMEOUT_S`."""
        if not inbound.done():
            inbound.cancel()
            with contextlib.suppress(BaseException):
                await inbound
        if self._request_ended:
            return
        with contextlib.suppress(TimeoutError, ClientGone):
            async with asyncio.timeout(REQUEST_DRAIN_TIMEOUT_S):
                async for _ in self._body():
                    pass

    async def _client_to_container(self) -> None:
        """Verify and forward each request event; at the end of the request stream start the close
        handshake."""
        from smithy_aws_event_stream.events import Event
        from smithy_aws_event_stream.exceptions import EventError
        from smithy_core.aio.types import AsyncBytesReader

        body = self._body()
        reader = AsyncBytesReader(body)
        while True:
            try:
                envelope = await Event.decode_async(reader)
            except (EventError, ValueError) as error:
                raise BadRequestStream(
                    "SerializationException",
                    f"the request stream is not a valid AWS event "
                    f"stream ({type(error).__name__}: {error})",
                ) from error
            if envelope is None:
                # the HTTP/2 request body ended without the final empty envelope: also the end of
                # input
                break
            self._chain.verify(envelope.message.headers, envelope.message.payload)
            if not envelope.message.payload:
                break  # the signed empty envelope: the end of the request stream
            try:
                event = Event.decode(io.BytesIO(envelope.message.payload))
            except (EventError, ValueError) as error:
                raise BadRequestStream(
                    "SerializationException",
                    f"a signed envelope does not hold an event ({type(error).__name__}: {error})",
                ) from error
            if event is None or event.message.headers.get(":event-type") != "PayloadPart":
                kind = None if event is None else event.message.headers.get(":event-type")
                raise BadRequestStream(
                    "InputValidationError",
                    f"the request stream may only carry PayloadPart events, got {kind!r}",
                )
            headers = event.message.headers
            data_type = headers.get("DataType", BINARY)
            completion = headers.get("CompletionState", COMPLETE)
            if data_type not in (UTF8, BINARY):
                raise BadRequestStream(
                    "InputValidationError",
                    f"PayloadPart DataType must be UTF8 or BINARY, got {data_type!r}",
                )
            if completion not in (PARTIAL, COMPLETE):
                raise BadRequestStream(
                    "InputValidationError",
                    f"PayloadPart CompletionState must be PARTIAL or COMPLETE, got {completion!r}",
                )
            await self._forward(
                event.message.payload, text=data_type == UTF8, last=completion == COMPLETE
            )
        self._closing = True
        await self._ws.close(1000)
        async for _ in (
            body
        ):  # nothing may follow the final envelope but the end of the HTTP/2 request (END_STREAM)
            pass

    async def _forward(self, data: bytes, *, text: bool, last: bool) -> None:
        """Send one part to the container: a whole message, or a fragment of one (the first part's
        type counts)."""
        if self._fragments is None:
            if last:
                await self._ws.send(data, text=text)
                return
            self._fragments = asyncio.Queue()
            self._fragmented_send = asyncio.create_task(
                self._ws.send(self._fragment_source(data), text=text)
            )
            return
        await self._fragments.put((data, last))
        if last:
            assert self._fragmented_send is not None
            await self._fragmented_send
            self._fragments = self._fragmented_send = None

    async def _fragment_source(self, first: bytes) -> AsyncIterator[bytes]:
        yield first
        assert self._fragments is not None
        while True:
            data, last = await self._fragments.get()
            yield data
            if last:
                return

    # ---- container -> caller --------------------------------------------------------------------
    async def _container_to_client(self) -> None:
        """Relay each frame (fragment) from the container as a PayloadPart until the container
        connection ends."""
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                held: bytes | None = None
                data_type = BINARY
                async for fragment in self._ws.recv_streaming():
                    if held is not None:
                        await self._emit(
                            payload_part(held, data_type=data_type, completion_state=PARTIAL)
                        )
                    data_type = UTF8 if isinstance(fragment, str) else BINARY
                    held = fragment.encode("utf-8") if isinstance(fragment, str) else fragment
                await self._emit(
                    payload_part(held or b"", data_type=data_type, completion_state=COMPLETE)
                )
        except ConnectionClosed as closed:
            if self._closing or self._failure is not None:
                return
            if closed.rcvd is not None and closed.rcvd_then_sent is not False:
                code, reason = closed.rcvd.code, closed.rcvd.reason
                self._failure = (
                    str(code),
                    reason
                    or f"The model container closed the stream (WebSocket close code {code}).",
                )
            else:
                self._failure = (
                    STREAM_BROKEN,
                    "The connection to the model container was lost without a close frame.",
                )

    async def _emit(self, event: bytes) -> None:
        await self._send({"type": "http.response.body", "body": event, "more_body": True})

    async def _end_response(self) -> None:
        with contextlib.suppress(Exception):  # the caller may be gone already
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    # ---- keepalive ------------------------------------------------------------------------------
    async def _keepalive(self) -> None:
        """Return once ``max_unanswered_pings`` pings in a row got no pong (a ping is answered if
        its pong, or a later one, arrives before the next ping is due)."""
        unanswered = 0
        pong: Awaitable[float] | None = None
        interval = self._settings.ping_interval_s
        while True:
            await asyncio.sleep(interval)
            if pong is not None:
                answered = isinstance(pong, asyncio.Future) and pong.done() and not pong.cancelled()
                unanswered = 0 if answered else unanswered + 1
                if unanswered >= self._settings.max_unanswered_pings:
                    return
            try:
                pong = await asyncio.wait_for(self._ws.ping(), interval)
            except TimeoutError:  # the container's socket is not draining: count it as unanswered
                pong = asyncio.get_running_loop().create_future()
            if isinstance(
                pong, asyncio.Future
            ):  # a connection closed meanwhile fails the waiter: nothing to report
                pong.add_done_callback(lambda future: future.cancelled() or future.exception())

    async def _close_container(self, code: int, reason: str) -> None:
        self._closing = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self._ws.close(code, reason), self._settings.close_timeout_s + 0.5
            )


def _state(task: asyncio.Task[Any]) -> str:
    if not task.done():
        return "running"
    if task.cancelled():
        return "cancelled"
    return "done" if task.exception() is None else f"failed ({task.exception()!r})"
