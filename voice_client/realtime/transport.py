"""What the transcription needs from a stream: a bidirectional channel of JSON text messages.

:class:`voice_client.realtime.websocket.WebSocketTransport` talks to a container's bridge
directly (``--url``); :mod:`voice_client.sagemaker_stream` carries the same messages through
SageMaker's bidirectional streaming API. Each message maps to one WebSocket text frame at the
container.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol


class TransportClosed(Exception):
    """The stream ended unexpectedly (network drop, server went away); the session may be
    reopened."""


class RealtimeTransport(Protocol):
    """A bidirectional channel of text messages (one JSON event each)."""

    async def send_text(self, text: str) -> None:
        """Send one message. Raises :class:`TransportClosed` when the stream is gone."""

    async def receive_text(self) -> str | None:
        """Return the next message, or None once the peer closed the stream cleanly.

        Raises :class:`TransportClosed` on a drop and :class:`RealtimeError` on a reported stream
        failure.
        """

    async def close(self) -> None:
        """Close the stream (idempotent)."""


TransportOpener = Callable[[], Awaitable[RealtimeTransport]]
"""Opens a new stream to the endpoint (called for the first stream, each move to a new one and each
reopen)."""
