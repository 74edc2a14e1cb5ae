"""SageMaker bidirectional streaming transport: realtime messages through
``InvokeEndpointWithBidirectionalStream``, and :func:`open_endpoint`, the opener of such streams
for :func:`voice_client.realtime.transcribe_stream`.

The SDK client (awscrt over HTTP/2, port 8443, SigV4, botocore's credentials) is built by
:mod:`voice_client.sagemaker_client`; SageMaker's and the SDK's errors become
:class:`~voice_client.realtime.RealtimeError` s in :mod:`voice_client.sagemaker_errors`. Here:

- Payload parts: each realtime message is one ``RequestPayloadPart`` with ``DataType="UTF8"``, which
  the SageMaker sidecar forwards as a WebSocket text frame (vLLM reads text frames only:
  ``websocket.receive_text()``). Response payload parts may carry ``CompletionState="PARTIAL"`` for
  a frame split in several parts; they are joined until a part that is not ``PARTIAL``.
- Bounded waits: every SDK operation on a stream (open, end, close) has a deadline, and a
  connection under a failed stream is taken out of the client's pool (:func:`_bounded`,
  :func:`_retire`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from voice_client.realtime import MAX_EVENT_BYTES, RealtimeError, TransportClosed, decode_frame
from voice_client.sagemaker_client import (
    BotocoreCredentialsResolver,
    ca_bundle_of,
    create_client,
    resolve_credentials,
)
from voice_client.sagemaker_errors import describe_error

PAYLOAD_DATA_TYPE = "UTF8"
"""``RequestPayloadPart.DataType`` for JSON text: delivered to the container as a WebSocket text
frame."""

PARTIAL = "PARTIAL"
"""``CompletionState`` of a payload part that does not end its frame."""

CLOSE_TIMEOUT_S = 5.0
"""Seconds allowed to close each direction of the stream before giving up on a clean close."""

OPEN_TIMEOUT_S = 30.0
"""Seconds allowed to open a stream (sign, connect, TLS, HTTP/2 and SageMaker's connection to the
container)."""

FAILED_END_TIMEOUT_S = 1.0
"""Seconds allowed to end the request body of a stream whose call failed (its response is over; a
peer that still reads takes the end at once, one that stopped reading never will)."""

ABANDON_GRACE_S = 0.1
"""Seconds an SDK operation that timed out gets to end after it is cancelled, before it is left
behind (see :func:`_bounded`)."""


_OPERATIONS: set[asyncio.Future[Any]] = set()
"""The operations :func:`_bounded` runs, held until they end: the event loop keeps only weak
references to tasks, so one left behind that waits on a future nothing else holds would be collected
mid-run ("Task was destroyed but it is pending!", its ``finally`` never run)."""


async def _bounded(awaitable: Awaitable[Any], timeout_s: float) -> Any:
    """Await an SDK operation for at most ``timeout_s`` seconds, in a task of its own; return its
    result.

    Not :func:`asyncio.wait_for`: since Python 3.12 it runs the operation in the caller's task and,
    at the deadline, cancels that task once. An operation that takes the cancellation and awaits
    again keeps the caller waiting with no timer left: smithy-aws-event-stream 0.3's
    ``AWSEventPublisher.close`` writes the end frame and, in a ``finally``, awaits the writer's
    close, which on a connection whose flow-control window a peer that stopped reading has used up
    never completes (seen: ``SageMakerStreamTransport.close`` of a refused, never-reset stream
    waited until pytest-timeout ended the test). Here the operation is cancelled at the deadline,
    given ``ABANDON_GRACE_S`` to end, cancelled once more (which ends a wait inside its ``finally``)
    and then left behind, held in ``_OPERATIONS`` until it ends: its failure is retrieved then (the
    connection under it is retired and closed). An operation that takes a cancellation and still
    ends with a result (an open stream, say) returns it, late, rather than leave it unclosed. A
    caller cancelled meanwhile cancels the operation too.

    Raises:
        TimeoutError: the operation did not finish within ``timeout_s``.
        Exception: what the operation raised.
    """
    task = asyncio.ensure_future(awaitable)
    task.add_done_callback(_retrieve)
    _OPERATIONS.add(task)
    task.add_done_callback(_OPERATIONS.discard)
    try:
        await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        return task.result()
    for _ in range(2):
        task.cancel()
        await asyncio.wait({task}, timeout=ABANDON_GRACE_S)
        if task.done():
            if not task.cancelled() and task.exception() is None:
                return task.result()
            break
    raise TimeoutError(f"the operation did not finish within {timeout_s} s")


RETIRED_CONNECTIONS: dict[int, list[Any]] = {}
"""id(SDK client) -> HTTP/2 connections taken out of its pool after a failed stream (see
:func:`_retire`), closed once none of the client's streams is open any more, or with the client
(:func:`open_endpoint`)."""

OPEN_STREAMS: dict[int, int] = {}
"""id(SDK client) -> streams of it not closed yet (a retired connection may still carry one of
them)."""


def _pool_of(client: Any) -> dict[Any, Any] | None:
    """The connection pool of an SDK client's awscrt HTTP client (smithy-http 0.6 private
    ``_connections``), if any."""
    http = getattr(
        getattr(client, "_config", None) or getattr(client, "config", None), "transport", None
    )
    pool = getattr(http, "_connections", None)
    return pool if isinstance(pool, dict) else None


def _connection_for(client: Any) -> Any:
    """The pooled connection of ``client``'s runtime URL (the one a stream just opened rides on), if
    known."""
    pool, url = _pool_of(client), _runtime_url(client)
    if not pool or not url:
        return None
    parts = urlsplit(url)
    for (scheme, host, _port), connection in pool.items():
        if scheme == parts.scheme and host == parts.hostname:
            return connection
    return None


@contextlib.asynccontextmanager
async def open_endpoint(
    endpoint_name: str,
    *,
    region: str | None = None,
    profile: str | None = None,
    endpoint_url: str | None = None,
    target_variant: str | None = None,
) -> AsyncIterator[Callable[[], Awaitable[SageMakerStreamTransport]]]:
    """Yield an opener of bidirectional streams to the SageMaker endpoint ``endpoint_name``, for
    :func:`voice_client.realtime.transcribe_stream`; the SDK client is closed on exit.

    The public way to reach a Voxtral endpoint from your own code (the README's example); ``voicectl
    transcribe`` and ``voicectl mic`` use it too. AWS credentials and the Region come from
    botocore's standard chain (environment, profiles, SSO, container and instance roles) and are
    resolved once, here, so that a missing identity fails at once (smithy-core would wait forever on
    a duplex stream, see :func:`resolve_credentials`).

    Args:
        endpoint_name: the SageMaker EndpointName (the stack output ``VoxtralEndpointName``).
        region: AWS Region; None = the profile's or ``AWS_REGION`` / ``AWS_DEFAULT_REGION``.
        profile: AWS profile name; None = the default chain.
        endpoint_url: the runtime's URL, ``https://HOST[:PORT]`` (a VPC interface endpoint with port
            8443, a local runtime); None = ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` or the
            profile's setting, else ``https://runtime.sagemaker.<region>.amazonaws.com:8443``.
            ``AWS_CA_BUNDLE`` (or the profile's ``ca_bundle``) names certificate authorities to
            trust.
        target_variant: the ProductionVariant to call; None = SageMaker's choice.

    Yields:
        An async callable; each call opens one new stream and returns its
        :class:`SageMakerStreamTransport`.

    Raises:
        voice_client.errors.UsageError: no Region can be determined, the profile does not exist, or
            the CA bundle is not a file.
        RealtimeError: no usable AWS credentials (code ``credentials``).
    """
    from voice_client.aws import aws_session
    from voice_client.errors import UsageError

    session = aws_session(profile, region)
    resolver = BotocoreCredentialsResolver(session)
    await resolve_credentials(resolver)
    ca_bundle = ca_bundle_of(session)
    if ca_bundle and not os.path.isfile(ca_bundle):  # noqa: ASYNC240 (one stat, before any stream)
        raise UsageError(
            f"the CA bundle {ca_bundle} (AWS_CA_BUNDLE or the profile's ca_bundle) is not a file"
        )
    client = await create_client(
        session.region_name,
        resolver,
        endpoint_uri=endpoint_url,
        ca_bundle=ca_bundle,
        profile=profile,
    )

    async def open_stream() -> SageMakerStreamTransport:
        return await SageMakerStreamTransport.open(
            client, endpoint_name, target_variant=target_variant
        )

    try:
        yield open_stream
    finally:
        await close_retired_connections(client)
        with contextlib.suppress(Exception):
            await _bounded(client.close(), CLOSE_TIMEOUT_S)


@dataclass
class SageMakerStreamTransport:
    """A :class:`~voice_client.realtime.RealtimeTransport` over one
    ``InvokeEndpointWithBidirectionalStream`` call."""

    stream: Any
    endpoint_name: str
    runtime_url: str | None = (
        None  # where the client calls (named in errors about an unreachable host)
    )
    _output: Any = None
    _closed: bool = False
    _failed: bool = False
    _reading: asyncio.Task[Any] | None = (
        None  # the response event being read (survives a cancelled receive_text)
    )
    _sender: asyncio.Task[Any] | None = None  # the task inside send_text, if any
    _send_aborted: bool = False  # _sender was cancelled by _response_failed, not by its owner
    client: Any = None  # the SDK client, whose pool holds the connection (see _retire)
    connection: Any = None  # the HTTP/2 connection this stream rides on, if known

    @classmethod
    async def open(
        cls, client: Any, endpoint_name: str, *, target_variant: str | None = None
    ) -> SageMakerStreamTransport:
        """Start a bidirectional stream to ``endpoint_name`` (optionally one ProductionVariant).

        Raises:
            RealtimeError: the call could not start (see :func:`describe_error`).
        """
        from aws_sdk_sagemaker_runtime_http2.models import (
            InvokeEndpointWithBidirectionalStreamInput,
        )

        request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=endpoint_name, target_variant=target_variant
        )
        try:
            # Bounded: smithy-core waits forever when signing fails before the request is sent (see
            # resolve_credentials), e.g. credentials that cannot be refreshed mid-run.
            stream = await _bounded(
                client.invoke_endpoint_with_bidirectional_stream(request), OPEN_TIMEOUT_S
            )
        except TimeoutError:
            raise RealtimeError(
                f"opening a stream to endpoint {endpoint_name!r} took more than "
                f"{OPEN_TIMEOUT_S:.0f} s; check the network, the credentials (`aws sts "
                "get-caller-identity`) and the endpoint's status",
                code="open_timeout",
            ) from None
        except Exception as error:
            _retire(
                client, _connection_for(client)
            )  # a call refused at once may have sent request data too
            raise describe_error(error, endpoint_name, _runtime_url(client)) from error
        OPEN_STREAMS[id(client)] = OPEN_STREAMS.get(id(client), 0) + 1
        return cls(
            stream=stream,
            endpoint_name=endpoint_name,
            runtime_url=_runtime_url(client),
            client=client,
            connection=_connection_for(client),
        )  # None while the request is not sent yet: see close()

    async def send_text(self, text: str) -> None:
        """Send ``text`` as one UTF8 payload part.

        Raises:
            TransportClosed: the request stream can no longer be written (network drop, closed
                stream, or the call failed on the response side).
        """
        from aws_sdk_sagemaker_runtime_http2.models import (
            RequestPayloadPart,
            RequestStreamEventPayloadPart,
        )

        event = RequestStreamEventPayloadPart(
            value=RequestPayloadPart(bytes_=text.encode("utf-8"), data_type=PAYLOAD_DATA_TYPE)
        )
        if self._failed:
            raise TransportClosed(self._failed_before_written())
        # A call that failed (a TLS handshake refused, the connection lost before the response)
        # leaves the request stream's writer waiting forever for a reader (smithy-core 0.9):
        # receive_text cancels this send once the response side has failed. The send is awaited in
        # place rather than in a task of its own: a send that does not have to wait then costs no
        # turn of the event loop, so a transcription's reader cannot overtake its sender (audio
        # already read goes out before the response that follows it is handled).
        self._sender = asyncio.current_task()
        try:
            await self.stream.input_stream.send(event)
        except asyncio.CancelledError:
            if not self._send_aborted or self._sender is None or self._sender.uncancel() > 0:
                raise  # cancelled by its owner as well: that cancellation wins
            raise TransportClosed(self._failed_before_written()) from None
        except OSError as error:  # AWSEventPublisher wraps write failures in OSError
            raise TransportClosed(
                f"the request stream to {self.endpoint_name!r} is closed "
                f"({error.__cause__ or error})"
            ) from error
        finally:
            self._sender = None
            self._send_aborted = False

    def _failed_before_written(self) -> str:
        return (
            f"the call to {self.endpoint_name!r} failed before the request stream could be written"
        )

    def _response_failed(self) -> None:
        """The response side failed: nothing more can be written, so stop a send that waits."""
        self._failed = True
        if self._sender is not None and not self._sender.done() and not self._send_aborted:
            self._send_aborted = True
            self._sender.cancel()

    async def _next_event(self) -> Any:
        """The next response stream event (None at its end), read in a task of its own.

        A caller cancelled while it waits (the transcription closing this stream) leaves the read
        running, and the next call, or :meth:`close`, takes its result: cancelling it would cancel
        awscrt's pending body-chunk future, which awscrt later resolves from its own thread, failing
        with ``InvalidStateError`` in a callback (``awscrt/aio/http.py``
        ``_resolve_pending_chunk_futures``).
        """
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read_event())
            self._reading.add_done_callback(_retrieve)
        reading = self._reading
        try:
            return await asyncio.shield(reading)
        finally:
            if reading.done():
                self._reading = None

    async def _read_event(self) -> Any:
        if self._output is None:
            _, self._output = await self.stream.await_output()
        return await self._output.receive()

    async def receive_text(self) -> str | None:
        """Return the next complete response frame as text, or None at the end of the response
        stream.

        Raises:
            TransportClosed: the response stream broke (network drop).
            RealtimeError: SageMaker reported ModelStreamError, InternalStreamFailure or a call
                error.
        """
        from aws_sdk_sagemaker_runtime_http2.models import ResponseStreamEventPayloadPart

        frame = bytearray()
        while True:
            try:
                event = await self._next_event()
            except OSError as error:  # AWSEventReceiver wraps read failures in OSError
                self._response_failed()
                raise TransportClosed(
                    f"the response stream from {self.endpoint_name!r} broke "
                    f"({error.__cause__ or error})"
                ) from error
            except asyncio.CancelledError:
                raise
            except Exception as error:
                # An error answer (ModelError, a refused signature, ...) or an error event ends the
                # call: the request stream cannot be ended cleanly any more (awscrt's writes stall
                # once the response has ended).
                self._response_failed()
                raise describe_error(error, self.endpoint_name, self.runtime_url) from error
            if event is None:
                if frame:
                    raise TransportClosed(
                        f"the response stream ended inside a frame ({len(frame)} bytes)"
                    )
                return None
            if not isinstance(event, ResponseStreamEventPayloadPart):
                continue  # an event type newer than this SDK: nothing to deliver
            frame += event.value.bytes_ or b""
            if (
                len(frame) > MAX_EVENT_BYTES
            ):  # bounded while the parts are joined, not only once the frame is whole
                self._response_failed()
                raise RealtimeError(
                    f"endpoint {self.endpoint_name!r} sent a frame of more than "
                    f"{MAX_EVENT_BYTES:,} bytes in PARTIAL parts, more than the client accepts "
                    "(MAX_EVENT_BYTES); check what answers at that address",
                    code="message_too_large",
                )
            if event.value.completion_state != PARTIAL:
                return decode_frame(bytes(frame), f"endpoint {self.endpoint_name!r}")

    async def close(self) -> None:
        """Close the request stream (a signed empty frame ends it), read the response stream to its
        end, and close it; idempotent.

        The response is read to its end first because the service ends it only after the request
        stream has ended: closing the response earlier resets the HTTP/2 stream while awscrt is
        still writing the end of the request, which it reports as a failed background write
        (``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED``).
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._failed:
                # End the request body as well, so that a peer that still reads sees the stream end;
                # a peer that stopped reading never takes it, and the connection is retired below in
                # any case.
                if self._sender is None:
                    with contextlib.suppress(Exception):
                        await _bounded(self.stream.input_stream.close(), FAILED_END_TIMEOUT_S)
                if (
                    self._output is not None
                ):  # a read left running has failed too (that is how _failed was set)
                    with contextlib.suppress(Exception):
                        await _bounded(self._output.close(), CLOSE_TIMEOUT_S)
                return
            # Bounded: closing writes the end frame, which waits on a stuck connection forever
            # otherwise.
            try:
                await _bounded(self.stream.input_stream.close(), CLOSE_TIMEOUT_S)
            except Exception:
                self._failed = (
                    True  # the end could not be written: the connection is stuck (retired below)
                )
            if self._output is not None or self._reading is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(
                        self._drain_output(), CLOSE_TIMEOUT_S if not self._failed else 0.1
                    )
                if self._output is not None:
                    with contextlib.suppress(Exception):
                        await _bounded(self._output.close(), CLOSE_TIMEOUT_S)
        finally:
            await self._release_connection()

    async def _release_connection(self) -> None:
        """Retire this stream's connection if the stream failed (see :func:`_retire`).

        The connection is looked up now if it was not known at open: smithy-core returns the duplex
        stream before its request is sent, so the pool may still have been empty then. All streams
        of a client share the pooled connection, so the one in the pool is this stream's (or a fresh
        one that replaced a closed connection)."""
        if self.client is None:
            return
        if self._failed:
            _retire(self.client, self.connection or _connection_for(self.client))
        key = id(self.client)
        OPEN_STREAMS[key] = OPEN_STREAMS.get(key, 1) - 1
        if OPEN_STREAMS[key] <= 0:
            del OPEN_STREAMS[key]
            await close_retired_connections(
                self.client
            )  # no stream of this client can be riding on them now

    async def _drain_output(self) -> None:
        while await self._next_event() is not None:
            pass


def _runtime_url(client: Any) -> str | None:
    """The runtime URL an ``AsyncSageMakerRuntimeHTTP2Client`` calls (its config's
    ``endpoint_uri``), if known."""
    url = getattr(
        getattr(client, "config", None) or getattr(client, "_config", None), "endpoint_uri", None
    )
    return str(url) if url else None


def _retire(client: Any, connection: Any) -> None:
    """Take ``connection`` out of ``client``'s pool after a failed stream, so that the next stream
    opens a fresh one.

    Every stream of an SDK client shares one pooled HTTP/2 connection (smithy-http 0.6
    ``AWSCRTHTTPClient`` keeps one per scheme, host and port) and so its flow-control window
    (RFC 9113 section 5.2: 65,535 bytes until the peer sends WINDOW_UPDATE). A failed call may leave
    request data behind that the peer neither read nor reset (a refused call with 2 s of audio
    queued is 64 KiB): it would keep the window used up, and every later stream on the connection
    would open but send nothing (the mic page wedged so after a bridge restart). The retired
    connection is closed with the client, not at once: closing it under a stream the peer holds open
    broke the next stream in our tests.
    """
    if connection is None or client is None:
        return
    pool = _pool_of(client) or {}
    for key, pooled in list(pool.items()):
        if pooled is connection:
            del pool[key]
            RETIRED_CONNECTIONS.setdefault(id(client), []).append(connection)


async def close_retired_connections(client: Any) -> None:
    """Close the connections :func:`_retire` took out of ``client``'s pool (bounded)."""
    for connection in RETIRED_CONNECTIONS.pop(id(client), []):
        with contextlib.suppress(Exception):
            await _bounded(connection.close(), CLOSE_TIMEOUT_S)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a read's failure as seen: a read whose caller went away (see ``_next_event``) ends
    unawaited."""
    if not task.cancelled():
        task.exception()
