"""A local SageMaker runtime: the front door the clients call, on ``https://localhost:<port>``, in
front of local containers (the bridge for Voxtral, the Sonic stand-in).

It serves, over HTTP/2 (and HTTP/1.1, which botocore uses) with TLS, the two runtime operations the
clients use:

- ``POST /endpoints/<name>/invocations-bidirectional-stream``
  (InvokeEndpointWithBidirectionalStream): see :mod:`voice_devtools.local.bidi`.
- ``POST /endpoints/<name>/invocations-response-stream`` (InvokeEndpointWithResponseStream): see
  :mod:`voice_devtools.local.response_stream`.

Every request must be SigV4-signed for the ``sagemaker`` signing name with the local credentials
(:mod:`voice_devtools.local.sigv4`); an unsigned request, a wrong signature, an unknown endpoint or
target variant, or a bad ``X-Amzn-SageMaker-Model-Invocation-Path`` / ``-Query-String`` gets the
error SageMaker returns (:mod:`voice_devtools.local.shapes`). HTTP/2 and TLS come from hypercorn (h2
underneath); the certificate is made at start with trustme, under a local certificate authority
whose file the clients trust (``AWS_CA_BUNDLE``).

Each endpoint has one container per ProductionVariant, given as ``NAME[/VARIANT]=URL``:
``ws://host:port`` for a container with bidirectional streaming (the label
``com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true``; its ``POST /invocations`` is
at ``http://host:port``), ``http://host:port`` for one without (the Sonic stand-in). A call without
``X-Amzn-SageMaker-Target-Variant`` goes to the endpoint's first variant.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from voice_devtools.local.bidi import (
    BidirectionalStream,
    StreamSettings,
    connect_container,
    container_url,
)
from voice_devtools.local.bounds import STREAM_RESET_EXTENSION
from voice_devtools.local.response_stream import relay_response_stream
from voice_devtools.local.shapes import (
    ACCOUNT_ID,
    EVENT_STREAM_CONTENT_TYPE,
    ServiceError,
    endpoint_not_found,
    validation_error,
)
from voice_devtools.local.sigv4 import (
    EventSignatureChain,
    LocalCredentials,
    SignatureError,
    verify_request,
)

logger = logging.getLogger(__name__)

ACCESS_LOGGER = "voice_devtools.local.access"
access_logger = logging.getLogger(ACCESS_LOGGER)
"""One INFO line per call (:meth:`CallRecord.line`); ``voicectl local-runtime`` prints it."""

DEFAULT_PORT = 8443
"""SageMaker serves bidirectional streams on 8443; locally one port serves both operations."""

DEFAULT_VARIANT = "AllTraffic"
"""The ProductionVariant name the stacks give each endpoint."""

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
"""EndpointName and VariantName: at most 63 characters, letters, digits and single or repeated
hyphens inside (SageMaker API Reference, CreateEndpoint / ProductionVariant)."""

INVOCATION_PATH_PATTERN = re.compile(r"^[A-Za-z0-9\-._]+(?:/[A-Za-z0-9\-._]+)*$")
INVOCATION_PATH_MAX = 100
QUERY_STRING_PATTERN = re.compile(
    r"^[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+"
    r"(?:&[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+)*$"
)
QUERY_STRING_MAX = 2048
"""Constraints SageMaker's API contract gives ``X-Amzn-SageMaker-Model-Invocation-Path`` (at most
100 characters, path segments of letters, digits, ``-._``) and
``X-Amzn-SageMaker-Model-Query-String`` (at most 2048 characters, ``key=value`` pairs joined by
``&``, values URL-encoded)."""

MAX_REQUEST_BODY_BYTES = 6 * 1024 * 1024
"""Bytes of an InvokeEndpointWithResponseStream request body: the service model's ``BodyBlob``
maximum (6291456, botocore's data for sagemaker-runtime 2017-05-13). A longer body is refused
(ValidationError) as soon as it passes the limit, before it is checked or kept whole."""

REQUEST_BODY_TIMEOUT_S = 60.0
"""Seconds the front door waits for the next piece of a request body it must read before the
signature can be checked; then the call is answered 408. nginx's client_body_timeout (between
two reads, 408)."""


_ROUTE = re.compile(
    r"^/endpoints/(?P<name>[^/]+)/(?P<operation>invocations-bidirectional-stream|"
    r"invocations-response-stream)$"
)
_BIDIRECTIONAL = "invocations-bidirectional-stream"
_OPERATIONS = {
    _BIDIRECTIONAL: "InvokeEndpointWithBidirectionalStream",
    "invocations-response-stream": "InvokeEndpointWithResponseStream",
}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


MAX_LOGGED_TEXT = 100
"""Characters of a caller's path or endpoint name written into an access line."""


def _printable(text: str) -> str:
    """``text`` as one short line: control and non-ASCII characters escaped, cut at
    :data:`MAX_LOGGED_TEXT`."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    escaped = "".join(char if char.isprintable() else f"\\x{ord(char):02x}" for char in escaped)
    return escaped if len(escaped) <= MAX_LOGGED_TEXT else escaped[:MAX_LOGGED_TEXT] + "..."


@dataclass
class CallRecord:
    """One call as its access line tells it: operation, endpoint and variant, status, how it
    ended."""

    operation: str
    endpoint: str | None = None
    variant: str | None = None
    status: int | None = None
    outcome: str | None = None  # the error's code, or how a stream ended when not cleanly
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @classmethod
    def of(cls, scope: Scope) -> CallRecord:
        route = _ROUTE.match(scope["path"])
        if route is None or scope["method"] != "POST":
            return cls(operation=f"{_printable(scope['method'])} {_printable(scope['path'])}")
        return cls(operation=_OPERATIONS[route["operation"]], endpoint=_printable(route["name"]))

    def line(self, duration_s: float, client: tuple[str, int] | None) -> str:
        """E.g. ``InvokeEndpointWithBidirectionalStream voxtral-realtime/AllTraffic 200 3.214 s from
        127.0.0.1:50312 request 1b4e... (ModelStreamError 1011)``."""
        target = f"{self.endpoint}/{self.variant or '-'}" if self.endpoint else "-"
        caller = f"{client[0]}:{client[1]}" if client else "-"
        status = "-" if self.status is None else self.status
        text = (
            f"{self.operation} {target} {status} {duration_s:.3f} s from {caller} "
            f"request {self.request_id}"
        )
        return text + (f" ({self.outcome})" if self.outcome else "")


@dataclass(frozen=True)
class LocalEndpoint:
    """One ProductionVariant of a local endpoint and the container behind it.

    Attributes:
        name: EndpointName.
        variant: VariantName.
        container: ``ws://host:port`` (bidirectional streaming container) or ``http://host:port``.
    """

    name: str
    variant: str
    container: str

    @classmethod
    def parse(cls, spec: str) -> LocalEndpoint:
        """Parse ``NAME[/VARIANT]=URL`` (e.g. ``voxtral-realtime=ws://127.0.0.1:8080``).

        Raises:
            ValueError: naming what is wrong and the expected form.
        """
        form = "NAME[/VARIANT]=ws://HOST:PORT or NAME[/VARIANT]=http://HOST:PORT"
        target, sep, url = spec.partition("=")
        if not sep:
            raise ValueError(f"endpoint {spec!r} has no '=': use {form}")
        name, _, variant = target.partition("/")
        variant = variant or DEFAULT_VARIANT
        for label, value in (("endpoint name", name), ("variant name", variant)):
            if not NAME_PATTERN.match(value):
                raise ValueError(
                    f"{label} {value!r} in {spec!r} is not valid: 1 to 63 letters, digits and "
                    "hyphens, starting and ending with a letter or digit"
                )
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if (
            parts.scheme not in ("ws", "http")
            or not parts.hostname
            or port is None
            or parts.path not in ("", "/")
        ):
            raise ValueError(
                f"container URL {url!r} in {spec!r} is not valid: use {form} (a port, no path)"
            )
        return cls(name=name, variant=variant, container=f"{parts.scheme}://{parts.netloc}")

    @property
    def bidirectional(self) -> bool:
        """Whether the container supports bidirectional streaming (given as ``ws://``)."""
        return self.container.startswith("ws://")

    @property
    def http_base(self) -> str:
        """The container's HTTP address (``/ping``, ``/invocations``)."""
        return "http://" + self.container.split("://", 1)[1]


def parse_endpoints(specs: Iterable[str]) -> list[LocalEndpoint]:
    """Parse every ``NAME[/VARIANT]=URL``; a variant named twice for one endpoint is an error.

    Raises:
        ValueError: one message listing every bad spec.
    """
    endpoints, problems = [], []
    for spec in specs:
        try:
            endpoint = LocalEndpoint.parse(spec)
        except ValueError as error:
            problems.append(str(error))
            continue
        if any((e.name, e.variant) == (endpoint.name, endpoint.variant) for e in endpoints):
            problems.append(f"endpoint {endpoint.name} variant {endpoint.variant} is given twice")
        endpoints.append(endpoint)
    if problems:
        raise ValueError("; ".join(problems))
    if not endpoints:
        raise ValueError("give at least one endpoint, e.g. voxtral-realtime=ws://127.0.0.1:8080")
    return endpoints


def _constraint_error(field_name: str, value: str, constraint: str) -> ServiceError:
    """AWS's message for a parameter that fails a modeled constraint."""
    return validation_error(
        f"1 validation error detected: Value '{value}' at '{field_name}' failed to satisfy "
        f"constraint: {constraint}",
        bidirectional=True,
    )


@dataclass
class LocalRuntime:
    """The ASGI application of the front door.

    Args:
        endpoints: the endpoints and their containers.
        credentials: the access key requests must be signed with.
        region: the Region the signatures must be scoped to.
        settings: timings of the bidirectional streams' container connections.
        body_timeout_s: seconds to wait for each piece of a request body
            (:data:`REQUEST_BODY_TIMEOUT_S`).
    """

    endpoints: list[LocalEndpoint]
    credentials: LocalCredentials
    region: str = "us-east-1"
    settings: StreamSettings = field(default_factory=StreamSettings)
    body_timeout_s: float = REQUEST_BODY_TIMEOUT_S
    _session: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        # WebSocket requests are not part of SageMaker runtime's API: returning closes them.

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._session is not None:
                    await self._session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def endpoint(
        self, name: str, target_variant: str | None, *, bidirectional: bool
    ) -> LocalEndpoint:
        """The variant a call goes to.

        Raises:
            ServiceError: the endpoint name is malformed or unknown, or it has no such variant (the
                message names the ones it has; its wording is ours, SageMaker's is not documented).
        """
        if not NAME_PATTERN.match(name):
            raise validation_error(
                f"1 validation error detected: Value '{name}' at 'endpointName' failed to satisfy "
                f"constraint: Member must satisfy regular expression pattern: "
                f"{NAME_PATTERN.pattern}",
                bidirectional=bidirectional,
            )
        variants = [endpoint for endpoint in self.endpoints if endpoint.name == name]
        if not variants:
            raise endpoint_not_found(name, bidirectional=bidirectional)
        if target_variant is None:
            return variants[0]
        for endpoint in variants:
            if endpoint.variant == target_variant:
                return endpoint
        have = ", ".join(endpoint.variant for endpoint in variants)
        raise validation_error(
            f"Target variant {target_variant} not found on endpoint {name} of account {ACCOUNT_ID}"
            f" (its variants: {have}).",
            bidirectional=bidirectional,
        )

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = CallRecord.of(scope)
        began = time.monotonic()
        try:
            await self._answer(scope, receive, send, call)
        except asyncio.CancelledError:
            call.outcome = call.outcome or "cancelled"
            raise
        except Exception as error:
            call.outcome = f"failed: {error!r}"[:MAX_LOGGED_TEXT]
            raise
        finally:
            reset = scope.get("extensions", {}).get(STREAM_RESET_EXTENSION)
            if reset:  # the server reset the stream (voice_devtools.local.bounds)
                call.outcome = "; ".join(filter(None, (call.outcome, reset["reason"])))
            access_logger.info("%s", call.line(time.monotonic() - began, scope.get("client")))

    async def _answer(self, scope: Scope, receive: Receive, send: Send, call: CallRecord) -> None:
        started = False
        body_read = False

        async def send_tracked(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started, call.status = True, message["status"]
            await send(message)

        async def receive_tracked() -> dict[str, Any]:
            nonlocal body_read
            message = await receive()
            body_read = (
                body_read
                or message["type"] == "http.disconnect"
                or not message.get("more_body", False)
            )
            return message

        try:
            await self._dispatch(scope, receive_tracked, send_tracked, call)
            return
        except SignatureError as signature_error:
            error = ServiceError(
                signature_error.status,
                signature_error.code,
                str(signature_error),
                message_key="message",
            )
        except ServiceError as service_error:
            error = service_error
        call.outcome = error.code
        if started:  # cannot happen: the relays raise only before they answer
            logger.warning("error after the response started: %s", error)
            return
        # Over HTTP/2 the stream is then reset at once if the caller is still sending
        # (voice_devtools.local.bounds): it learns of the refusal now, not when its request stream
        # ends, and later data for it is dropped. Over HTTP/1.1 (boto3's InvokeEndpoint, keep-alive)
        # the unread body is read first, up to MAX_DRAINED_BODY_BYTES: answered with its body
        # unread, hypercorn closes the TLS connection under the caller's next request (ssl.SSLError
        # APPLICATION_DATA_AFTER_CLOSE_NOTIFY, tracebacks in the log).
        if scope.get("http_version") != "2" and not body_read:
            drained = 0
            with contextlib.suppress(TimeoutError):  # a caller that stops sending is answered now
                while not body_read and drained <= MAX_DRAINED_BODY_BYTES:
                    async with asyncio.timeout(self.body_timeout_s):
                        drained += len((await receive_tracked()).get("body", b""))
        await _respond(send_tracked, error)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send, call: CallRecord) -> None:
        route = _ROUTE.match(scope["path"])
        if route is None or scope["method"] != "POST":
            raise ServiceError(
                404,
                "UnknownOperationException",
                f"{scope['method']} {scope['path']} is not an "
                "operation of SageMaker runtime (this local runtime serves POST /endpoints/<name>/"
                "invocations-bidirectional-stream and .../invocations-response-stream)",
                message_key="message",
            )
        bidirectional = route["operation"] == _BIDIRECTIONAL
        headers = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]
        ]
        lower = {name.lower(): value for name, value in headers}
        body = None if bidirectional else await _read_body(receive, self.body_timeout_s)
        host = lower.get("host") or "{}:{}".format(*scope["server"])
        signed = verify_request(
            method="POST",
            host=host,
            raw_path=scope["raw_path"].decode("latin-1"),
            query=scope["query_string"].decode("latin-1"),
            headers=headers,
            body=body,
            credentials=self.credentials,
            region=self.region,
        )
        endpoint = self.endpoint(
            route["name"], lower.get("x-amzn-sagemaker-target-variant"), bidirectional=bidirectional
        )
        call.variant = endpoint.variant
        if bidirectional:
            chain = EventSignatureChain(signed, self.credentials, self.region)
            call.outcome = await self._bidirectional(
                endpoint, lower, receive, send, chain, call.request_id
            )
        else:
            assert body is not None
            call.outcome = await relay_response_stream(
                session=await self._http_session(),
                container=endpoint.http_base,
                body=body,
                headers=lower,
                send=send,
                region=self.region,
                endpoint=endpoint.name,
                variant=endpoint.variant,
                request_id=call.request_id,
                receive=receive,
            )

    async def _bidirectional(
        self,
        endpoint: LocalEndpoint,
        headers: dict[str, str],
        receive: Receive,
        send: Send,
        chain: EventSignatureChain,
        request_id: str,
    ) -> str | None:
        """Open the container's WebSocket, answer 200 and relay until the stream ends; return how
        it ended when not cleanly (:attr:`BidirectionalStream.outcome`)."""
        if not endpoint.bidirectional:
            raise validation_error(
                f"Endpoint {endpoint.name} of account {ACCOUNT_ID} does not support "
                f"bidirectional streaming: the container of variant {endpoint.variant} lacks the "
                "image label com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true "
                "(locally: it was given as http://, not ws://).",
                bidirectional=True,
            )
        path = headers.get("x-amzn-sagemaker-model-invocation-path")
        query = headers.get("x-amzn-sagemaker-model-query-string")
        if path is not None and (
            len(path) > INVOCATION_PATH_MAX or not INVOCATION_PATH_PATTERN.match(path)
        ):
            raise _constraint_error(
                "modelInvocationPath",
                path,
                f"Member must have length less than or equal to "
                f"{INVOCATION_PATH_MAX} and satisfy regular expression pattern: "
                f"{INVOCATION_PATH_PATTERN.pattern}",
            )
        if query is not None and (
            len(query) > QUERY_STRING_MAX or not QUERY_STRING_PATTERN.match(query)
        ):
            raise _constraint_error(
                "modelQueryString",
                query,
                f"Member must have length less than or equal to "
                f"{QUERY_STRING_MAX} and satisfy regular expression pattern: "
                f"{QUERY_STRING_PATTERN.pattern}",
            )
        url = container_url(endpoint.container, path, query)
        websocket = await connect_container(
            url, self.settings, region=self.region, endpoint=endpoint.name, variant=endpoint.variant
        )
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", EVENT_STREAM_CONTENT_TYPE.encode()),
                        (b"x-amzn-invoked-production-variant", endpoint.variant.encode()),
                        (b"x-amzn-requestid", request_id.encode()),
                    ],
                }
            )
        except BaseException:
            await websocket.close(1001)
            raise
        stream = BidirectionalStream(websocket, receive, send, chain, self.settings)
        await stream.run()
        return stream.outcome

    async def _http_session(self) -> Any:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    async def close(self) -> None:
        """Close the HTTP client session (when the app runs without ASGI lifespan events)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


MAX_DRAINED_BODY_BYTES = 8 * 1024 * 1024
"""Bytes of an HTTP/1.1 request body read (and dropped) before a refusal is answered, so the
connection can serve the caller's next request; a larger body is answered unread (the connection
then closes, as any server may)."""


async def _read_body(receive: Receive, timeout_s: float) -> bytes:
    """The whole request body (what came before a disconnect).

    Raises:
        ServiceError: 400 past :data:`MAX_REQUEST_BODY_BYTES`; 408 when no piece arrives for
            ``timeout_s``.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            async with asyncio.timeout(timeout_s):
                message = await receive()
        except TimeoutError:
            raise ServiceError(
                408,
                "RequestTimeoutException",
                f"No request body data arrived for {timeout_s:g} s; the call was ended.",
                message_key="message",
            ) from None
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_REQUEST_BODY_BYTES:
            raise validation_error(
                f"1 validation error detected: Value at 'body' failed to "
                f"satisfy constraint: Member must have length less than or "
                f"equal to {MAX_REQUEST_BODY_BYTES}",
                bidirectional=False,
            )
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _respond(send: Send, error: ServiceError) -> None:
    status, headers, body = error.response()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
