"""Reading a call's Kinesis video stream: GetDataEndpoint, then GetMedia from a fragment, with
boto3.

Rules (Kinesis Video Streams API reference and developer guide) this module keeps:

- GetMedia goes to the endpoint GetDataEndpoint returns for ``APIName=GET_MEDIA`` ("You must first
  call the GetDataEndpoint API to get an endpoint"). The quotas page: GetDataEndpoint is "called
  every 45 minutes to refresh the streaming token for most PutMedia/GetMedia use cases. Caching data
  endpoints is safe if the application reloads them on failure": an endpoint is kept
  :data:`ENDPOINT_TTL_S` at most, and forgotten on any GetMedia failure.
- "A client can call GetMedia up to five times per second per stream" and more than three concurrent
  GetMedia connections per stream are refused (``ConnectionLimitExceededException``): one connection
  per call, reopened no faster than :data:`MIN_GET_MEDIA_INTERVAL_S`.
- StartSelector: ``FRAGMENT_NUMBER`` needs ``AfterFragmentNumber`` (1-128 digits, ``^[0-9]+$``);
  ``CONTINUATION_TOKEN`` needs ``ContinuationToken`` (1-128 of ``[a-zA-Z0-9_.-]``):
  :func:`start_selector` checks both.
- The payload read "will time out after 3 seconds if there are no ingested fragments available":
  once the producer stops (the call ended), the payload ends after the last fragment.

Failures are raised as :class:`MediaError`, transient (throttled, at the connection limit, a reset
or cut stream: the reader reopens from its last whole fragment) or not (no such stream, not
authorized: the call fails).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

FRAGMENT_NUMBER_PATTERN = re.compile(r"[0-9]{1,128}")
CONTINUATION_TOKEN_PATTERN = re.compile(r"[a-zA-Z0-9_.\-]{1,128}")
MIN_GET_MEDIA_INTERVAL_S = 1.0
"""Seconds between two GetMedia calls on one stream: well inside the documented five per second."""
ENDPOINT_TTL_S = 45 * 60.0
"""Seconds a GetDataEndpoint answer is used (the quotas page: refreshed every 45 minutes)."""
READER_THREADS = 128
"""Worker threads for GetMedia's blocking reads: one read waits per live call, so the threads must
outnumber the calls a task holds (asyncio's default pool, cores + 4, would starve them)."""
READ_BYTES = 4096
"""Bytes read from GetMedia's payload at a time: botocore's body returns only once it has them (or
at the end), so this bounds the delay a read adds (4 KiB is 64 ms of a call's two 8 kHz PCM16
tracks)."""
TRANSIENT_ERROR_CODES = frozenset(
    {
        "ClientLimitExceededException",
        "ConnectionLimitExceededException",
        "ThrottlingException",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
    }
)
"""GetMedia/GetDataEndpoint error codes worth a retry (the API reference's throttling and limit
errors; 5xx)."""
MAX_ERROR_CHARS = 300
"""Characters kept of an error's text (it reaches a Call Failed reason)."""


class MediaError(Exception):
    """GetMedia or GetDataEndpoint failed; ``transient``: reopening from the last whole fragment may
    work."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message[:MAX_ERROR_CHARS])
        self.transient = transient


def start_selector(
    *, after_fragment: str | None = None, continuation_token: str | None = None
) -> dict[str, str]:
    """GetMedia's StartSelector: resume from a continuation token, else from a fragment number.

    Raises:
        ValueError: a value outside what the API accepts (named, with the rule), or neither given.
    """
    if continuation_token is not None:
        if not CONTINUATION_TOKEN_PATTERN.fullmatch(continuation_token):
            raise ValueError(
                f"continuation token {continuation_token[:130]!r} must be 1-128 of [a-zA-Z0-9_.-] "
                "(GetMedia StartSelector.ContinuationToken)"
            )
        return {"StartSelectorType": "CONTINUATION_TOKEN", "ContinuationToken": continuation_token}
    if after_fragment is None:
        raise ValueError("GetMedia needs a fragment number or a continuation token to start from")
    if not FRAGMENT_NUMBER_PATTERN.fullmatch(after_fragment):
        raise ValueError(
            f"fragment number {after_fragment[:130]!r} must be 1-128 decimal digits "
            "(GetMedia StartSelector.AfterFragmentNumber)"
        )
    return {"StartSelectorType": "FRAGMENT_NUMBER", "AfterFragmentNumber": after_fragment}


def classify(error: BaseException) -> MediaError:
    """A boto3/botocore/socket failure as a :class:`MediaError` (transient or not), its text
    bounded."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(error, MediaError):
        return error
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return MediaError(
            f"{code or 'ClientError'}: {error}",
            transient=code in TRANSIENT_ERROR_CODES or status >= 500,
        )
    if isinstance(error, (BotoCoreError, OSError, TimeoutError)):
        # ResponseStreamingError, ReadTimeoutError, EndpointConnectionError, ConnectionClosedError,
        # a reset socket
        return MediaError(f"{type(error).__name__}: {error}", transient=True)
    return MediaError(f"{type(error).__name__}: {error}", transient=False)


class KvsMedia:
    """GetMedia payloads of a stream, as byte pieces (boto3 in a worker thread; its streaming body
    is blocking).

    ``session`` is a boto3 Session; ``endpoint_url`` points the control plane (GetDataEndpoint)
    somewhere else (the local stand-in); GetMedia always goes where GetDataEndpoint says.
    """

    def __init__(
        self,
        session: Any,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        executor: ThreadPoolExecutor | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.executor = executor or ThreadPoolExecutor(
            READER_THREADS, thread_name_prefix="get-media"
        )
        self.region = region
        self.endpoint_url = endpoint_url
        self.clock = clock
        self.endpoint_requests = 0  # GetDataEndpoint calls made (what the tests read)
        self._media_clients: dict[str, tuple[float, Any]] = {}  # stream ARN -> (when asked, client)
        self._lock = (
            threading.Lock()
        )  # boto3 sessions are not safe for creating clients from several threads

    def _media_client(self, stream_arn: str) -> Any:
        with self._lock:
            cached = self._media_clients.get(stream_arn)
            if cached is not None and self.clock() - cached[0] < ENDPOINT_TTL_S:
                return cached[1]
            control = self.session.client(
                "kinesisvideo", region_name=self.region, endpoint_url=self.endpoint_url
            )
            self.endpoint_requests += 1
            endpoint = control.get_data_endpoint(StreamARN=stream_arn, APIName="GET_MEDIA")[
                "DataEndpoint"
            ]
            client = self.session.client(
                "kinesis-video-media", region_name=self.region, endpoint_url=endpoint
            )
            self._media_clients[stream_arn] = (self.clock(), client)
            return client

    def forget(self, stream_arn: str) -> None:
        """Drop the stream's endpoint: the next GetMedia asks GetDataEndpoint again (after a
        failure)."""
        with self._lock:
            self._media_clients.pop(stream_arn, None)

    async def get_media(self, stream_arn: str, selector: dict[str, str]) -> AsyncIterator[bytes]:
        """The payload in pieces; ends when GetMedia's payload ends. Raises :class:`MediaError`."""
        loop = asyncio.get_running_loop()
        try:
            client = await loop.run_in_executor(self.executor, self._media_client, stream_arn)
            response = await loop.run_in_executor(
                self.executor,
                lambda: client.get_media(StreamARN=stream_arn, StartSelector=selector),
            )
        except Exception as error:  # boto3's and the socket's, classified
            self.forget(stream_arn)
            raise classify(error) from error
        body = response["Payload"]
        try:
            while True:
                try:
                    piece = await loop.run_in_executor(self.executor, body.read, READ_BYTES)
                except (
                    Exception
                ) as error:  # a reset or cut stream mid-payload (ResponseStreamingError ...)
                    self.forget(stream_arn)
                    raise classify(error) from error
                if not piece:
                    return
                yield piece
        finally:
            # Closed in a worker thread, not awaited: a read blocked on a quiet connection holds the
            # body until it returns, and a call that ends or fails must not wait for it (its task is
            # being cancelled).
            closing = loop.run_in_executor(self.executor, body.close)
            closing.add_done_callback(lambda done: done.exception())
