"""Reading a call's Kinesis video stream: GetDataEndpoint, then GetMedia from a fragment, with boto3.

Rules (Kinesis Video Streams API reference) this module keeps:

- GetMedia goes to the endpoint GetDataEndpoint returns for ``APIName=GET_MEDIA`` ("You must first call the
  GetDataEndpoint API to get an endpoint"); the endpoint is per stream, so it is asked once per call.
- "A client can call GetMedia up to five times per second per stream" and more than three concurrent GetMedia
  connections per stream are refused (``ConnectionLimitExceededException``): one connection per call, reopened no
  faster than :data:`MIN_GET_MEDIA_INTERVAL_S`.
- StartSelector: ``FRAGMENT_NUMBER`` needs ``AfterFragmentNumber`` (1-128 digits, ``^[0-9]+$``);
  ``CONTINUATION_TOKEN`` needs ``ContinuationToken`` (1-128 of ``[a-zA-Z0-9_.-]``): :func:`start_selector` checks both.
- The payload read "will time out after 3 seconds if there are no ingested fragments available": a live call's
  quiet moments end a GetMedia; the reader reopens with the last continuation token.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

FRAGMENT_NUMBER_PATTERN = re.compile(r"^[0-9]{1,128}$")
CONTINUATION_TOKEN_PATTERN = re.compile(r"^[a-zA-Z0-9_.\-]{1,128}$")
MIN_GET_MEDIA_INTERVAL_S = 1.0
"""Seconds between two GetMedia calls on one stream: well inside the documented five per second."""
READER_THREADS = 128
"""Worker threads for GetMedia's blocking reads: one read waits per live call (up to GetMedia's 3 s quiet timeout),
so the threads must outnumber the calls a task holds (asyncio's default pool, cores + 4, would starve them)."""
READ_BYTES = 4096
"""Bytes read from GetMedia's payload at a time: botocore's body returns only once it has them (or at the end),
so this bounds the delay a read adds (4 KiB is 64 ms of a call's two 8 kHz PCM16 tracks)."""


def start_selector(*, after_fragment: str | None = None, continuation_token: str | None = None) -> dict[str, str]:
    """GetMedia's StartSelector: resume from a continuation token, else from a fragment number.

    Raises:
        ValueError: a value outside what the API accepts (named, with the rule), or neither given.
    """
    if continuation_token is not None:
        if not CONTINUATION_TOKEN_PATTERN.match(continuation_token):
            raise ValueError(f"continuation token {continuation_token!r} must be 1-128 of [a-zA-Z0-9_.-] "
                             "(GetMedia StartSelector.ContinuationToken)")
        return {"StartSelectorType": "CONTINUATION_TOKEN", "ContinuationToken": continuation_token}
    if after_fragment is None:
        raise ValueError("GetMedia needs a fragment number or a continuation token to start from")
    if not FRAGMENT_NUMBER_PATTERN.match(after_fragment):
        raise ValueError(f"fragment number {after_fragment!r} must be 1-128 decimal digits "
                         "(GetMedia StartSelector.AfterFragmentNumber)")
    return {"StartSelectorType": "FRAGMENT_NUMBER", "AfterFragmentNumber": after_fragment}


class KvsMedia:
    """GetMedia payloads of a stream, as byte pieces (boto3 in a worker thread; its streaming body is blocking).

    ``session`` is a boto3 Session; ``endpoint_url`` points the control plane (GetDataEndpoint) somewhere else
    (the local stand-in); GetMedia always goes where GetDataEndpoint says.
    """

    def __init__(self, session: Any, *, region: str | None = None, endpoint_url: str | None = None,
                 executor: ThreadPoolExecutor | None = None) -> None:
        self.session = session
        self.executor = executor or ThreadPoolExecutor(READER_THREADS, thread_name_prefix="get-media")
        self.region = region
        self.endpoint_url = endpoint_url
        self._media_clients: dict[str, Any] = {}
        self._lock = threading.Lock()  # boto3 sessions are not safe for creating clients from several threads

    def _media_client(self, stream_arn: str) -> Any:
        with self._lock:
            return self._media_client_locked(stream_arn)

    def _media_client_locked(self, stream_arn: str) -> Any:
        if stream_arn not in self._media_clients:
            control = self.session.client("kinesisvideo", region_name=self.region, endpoint_url=self.endpoint_url)
            endpoint = control.get_data_endpoint(StreamARN=stream_arn, APIName="GET_MEDIA")["DataEndpoint"]
            self._media_clients[stream_arn] = self.session.client("kinesis-video-media", region_name=self.region,
                                                                  endpoint_url=endpoint)
        return self._media_clients[stream_arn]

    async def get_media(self, stream_arn: str, selector: dict[str, str]) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        client = await loop.run_in_executor(self.executor, self._media_client, stream_arn)
        response = await loop.run_in_executor(
            self.executor, lambda: client.get_media(StreamARN=stream_arn, StartSelector=selector))
        body = response["Payload"]
        try:
            while True:
                piece = await loop.run_in_executor(self.executor, _read_some, body)
                if not piece:
                    return
                yield piece
        finally:
            await loop.run_in_executor(self.executor, body.close)


def _read_some(body: Any) -> bytes:
    try:
        return body.read(READ_BYTES)
    except Exception as error:  # the 3 s read timeout of a quiet stream, a reset: the reader reopens
        if "timed out" in str(error).lower() or "timeout" in type(error).__name__.lower():
            return b""
        raise
