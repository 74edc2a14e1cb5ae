"""``InvokeEndpointWithResponseStream`` for the local front door: the request body goes to the
container's ``POST /invocations``; each piece of the container's streamed response comes back as one
``PayloadPart`` event.

SageMaker's side (SageMaker API Reference, InvokeEndpointWithResponseStream; Developer Guide, "How
Containers Serve Requests"): ``Content-Type`` and ``X-Amzn-SageMaker-Accept`` reach the container as
``Content-Type`` and ``Accept``, and ``X-Amzn-SageMaker-Custom-Attributes`` as is; a container
status other than 200 is a ``ModelError`` (424) carrying that status and body; the response is
``application/vnd.amazon.eventstream`` with the container's content type in
``X-Amzn-SageMaker-Content-Type``; SageMaker may split or pack the container's bytes into parts any
way (here: one part per read from the container connection); a connection to the model broken
mid-response ends the stream with ``ModelStreamError`` ``StreamBroken`` (the API reference lists
``StreamBroken`` and ``ModelInvocationTimeExceeded``). A caller that closes its response stream ends
the call to the container too (unconfirmed for SageMaker: its documentation is silent; a voice agent
interrupted mid-sentence relies on it to free the container's slot).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from voice_devtools.local.shapes import (
    EVENT_STREAM_CONTENT_TYPE,
    exception_event,
    model_error,
    payload_part,
)

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

INVOCATIONS_PATH = "/invocations"
"""The container's inference path (SageMaker's container contract)."""

SILENCE_TIMEOUT_S = 60.0
"""Seconds the container may stay silent, before its first byte or between two reads
(InvokeEndpoint: "A customer's model containers must respond to requests within 60 seconds"); then
the call fails."""

MAX_ERROR_BODY_BYTES = 4096
"""Bytes of a container's error body kept as ``OriginalMessage``."""


async def relay_response_stream(
    *,
    session: Any,
    container: str,
    body: bytes,
    headers: dict[str, str],
    send: Send,
    region: str,
    endpoint: str,
    variant: str,
    request_id: str,
    receive: Receive | None = None,
) -> str | None:
    """Call the container and stream its answer to the caller as event stream ``PayloadPart``
    events.

    Returns:
        None when the whole answer was relayed, else how the call ended (for the access log):
        the caller went away, or ``ModelStreamError StreamBroken``.

    Args:
        session: an ``aiohttp.ClientSession``.
        container: the container's base URL (``http://host:port``).
        body: the caller's request body.
        headers: the caller's request headers (lower-case names).
        send: the ASGI send channel of the caller's request (nothing sent yet).
        region, endpoint, variant, request_id: for the response headers and error messages.
        receive: the ASGI receive channel of the caller's request (its body read): its
            ``http.disconnect`` ends the relay and closes the container's connection.

    Raises:
        ServiceError: ``ModelError`` when the container cannot be reached or answers with a status
            other than 200 (nothing has been sent to the caller then).
    """
    import aiohttp

    forwarded = {"Content-Type": headers.get("content-type", "application/octet-stream")}
    if accept := headers.get("x-amzn-sagemaker-accept"):
        forwarded["Accept"] = accept
    if attributes := headers.get("x-amzn-sagemaker-custom-attributes"):
        forwarded["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    url = f"{container.rstrip('/')}{INVOCATIONS_PATH}"
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=SILENCE_TIMEOUT_S)
    async with contextlib.AsyncExitStack() as stack:
        try:
            response = await stack.enter_async_context(
                session.post(url, data=body, headers=forwarded, timeout=timeout)
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise model_error(
                region,
                endpoint,
                status=None,
                variant=variant,
                original=f"Could not call the model container at {url}: "
                f"{error or type(error).__name__}.",
            ) from None
        if response.status != 200:
            original = (await response.content.read(MAX_ERROR_BODY_BYTES)).decode(
                "utf-8", "replace"
            )
            raise model_error(
                region, endpoint, status=response.status, original=original, variant=variant
            )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", EVENT_STREAM_CONTENT_TYPE.encode()),
                    (b"x-amzn-invoked-production-variant", variant.encode()),
                    (
                        b"x-amzn-sagemaker-content-type",
                        response.headers.get("Content-Type", "").encode(),
                    ),
                    (b"x-amzn-requestid", request_id.encode()),
                ],
            }
        )
        relay = asyncio.ensure_future(_relay(response, send))
        watch = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
        try:
            await asyncio.wait(
                {relay} if watch is None else {relay, watch}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (relay, watch):
                if task is not None and not task.done():
                    task.cancel()
            await asyncio.gather(
                relay, *([watch] if watch is not None else []), return_exceptions=True
            )
        if not relay.cancelled() and relay.exception() is not None:
            raise relay.exception()  # type: ignore[misc]
        return "the caller went away" if relay.cancelled() else relay.result()


async def _relay(response: Any, send: Send) -> str | None:
    """Relay the container's answer; return None, or ``ModelStreamError StreamBroken`` when its
    connection broke."""
    import aiohttp

    trailer, outcome = b"", None
    try:
        async for data in response.content.iter_any():
            await send(
                {"type": "http.response.body", "body": payload_part(data), "more_body": True}
            )
    except (aiohttp.ClientError, TimeoutError) as error:
        trailer = exception_event(
            "ModelStreamError",
            f"The connection to the model container broke while it "
            f"was streaming its response ({type(error).__name__}).",
            "StreamBroken",
        )
        outcome = "ModelStreamError StreamBroken"
    await send({"type": "http.response.body", "body": trailer, "more_body": False})
    return outcome


async def _disconnected(receive: Receive) -> None:
    """Return once the caller has gone (``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass
