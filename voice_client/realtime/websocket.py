"""A :class:`~voice_client.realtime.transport.RealtimeTransport` over a plain WebSocket
(``--url``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from voice_client.realtime.auth import HTTP_UNAUTHORIZED, BearerToken, unauthorized_message
from voice_client.realtime.protocol import MAX_EVENT_BYTES, RealtimeError, decode_frame
from voice_client.realtime.transport import TransportClosed


class WebSocketTransport:
    """A :class:`RealtimeTransport` over a plain WebSocket (``--url``, a container's bridge on its
    own).

    Messages are sent as text frames, as SageMaker's sidecar does for payload parts with DataType
    ``UTF8``.
    """

    OPEN_TIMEOUT_S = 10.0
    """Seconds allowed for the TCP connect and WebSocket handshake."""

    MAX_MESSAGE_BYTES = MAX_EVENT_BYTES
    """Largest message accepted from the server: websockets refuses a larger one while it arrives
    (close code 1009, RFC 6455 section 7.4.1), before buffering it whole, and :meth:`receive_text`
    reports ``message_too_large``."""

    MESSAGE_TOO_BIG = 1009
    """WebSocket close code for a message too big to process (RFC 6455 section 7.4.1)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    @classmethod
    async def connect(cls, url: str, *, token: BearerToken | None = None) -> WebSocketTransport:
        """Open a WebSocket to ``url`` (``ws://HOST:PORT/invocations-bidirectional-stream``, or the
        ECS load balancer's ``wss://`` URL), sending ``Authorization: Bearer <token>`` on the
        upgrade when ``token`` is given.

        Raises:
            RealtimeError: the URL is invalid (``bad_url``), the bridge refused the token (HTTP 401,
                ``unauthorized``, naming where the token came from), or the server refused or did
                not answer (``connect_failed``, with what to check).
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

        headers = None if token is None else {"Authorization": f"Bearer {token.value}"}
        try:
            connection = await connect(
                url,
                open_timeout=cls.OPEN_TIMEOUT_S,
                max_size=cls.MAX_MESSAGE_BYTES,
                additional_headers=headers,
            )
        except (InvalidURI, ValueError) as error:
            raise RealtimeError(
                f"{url!r} is not a WebSocket URL; use ws://HOST:PORT/invocations-bidirectional-stream",
                code="bad_url",
            ) from error
        except InvalidStatus as error:
            if error.response.status_code == HTTP_UNAUTHORIZED:
                raise RealtimeError(unauthorized_message(url, token), code="unauthorized") from None
            raise cls._connect_failed(url, error) from error
        except (OSError, TimeoutError, InvalidHandshake) as error:
            raise cls._connect_failed(url, error) from error
        return cls(connection)

    @staticmethod
    def _connect_failed(url: str, error: BaseException) -> RealtimeError:
        parts = urlsplit(url)
        ping = f"{'https' if parts.scheme == 'wss' else 'http'}://{parts.netloc}/ping"
        return RealtimeError(
            f"cannot open a WebSocket to {url} ({error or type(error).__name__}); is the "
            f"container running and ready? `curl {ping}` must answer 200",
            code="connect_failed",
        )

    async def send_text(self, text: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._connection.send(text)
        except ConnectionClosed as error:
            raise TransportClosed(f"WebSocket closed ({error})") from error

    async def receive_text(self) -> str | None:
        from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK

        try:
            message = await self._connection.recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosedError as error:
            if error.sent is not None and error.sent.code == self.MESSAGE_TOO_BIG:
                raise RealtimeError(
                    "the WebSocket server sent a message larger than the "
                    f"{self.MAX_MESSAGE_BYTES:,} bytes the client accepts (MAX_EVENT_BYTES); "
                    "check what answers at that address",
                    code="message_too_large",
                ) from None
            raise TransportClosed(f"WebSocket closed ({error})") from error
        return (
            message if isinstance(message, str) else decode_frame(message, "the WebSocket server")
        )

    async def close(self) -> None:
        await self._connection.close()
