"""What one peer can hold in a local stand-in's server (hypercorn with h2), and the pieces that
bound it.

Anyone who reaches the port can open connections and streams before any signature is checked, so
each resource has a bound (:class:`ServerLimits`, defaults below, each with its source):
connections, streams per connection, header block size, how long a stream may wait for the peer's
flow-control window to open, how long an idle connection is kept, the TLS handshake and close.
A stream reset or refused releases its buffers, its application task and its queued request body;
a connection refused or closed for a protocol error writes one log line (``CONNECTION_LOGGER``)
and no traceback. docs/architecture.md has the local front door's place in the path.

hypercorn 0.18 and h2 4.4 (pinned in the lock files) do part of this themselves (the SETTINGS the
server sends, HPACK's decoded-size check, the idle timeout); the rest is done by subclasses of
their classes (:mod:`voice_devtools.local.bounded_hypercorn`) installed in this process
(:func:`install`), which rely on hypercorn's ``H2Protocol`` and ``TCPServer`` methods and h2's
``FrameBuffer`` as pinned (tests/e2e/local cover each behaviour).
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field, fields
from typing import Any

CONNECTION_LOGGER = "voice_devtools.local.connections"
connection_logger = logging.getLogger(CONNECTION_LOGGER)
"""One INFO line per connection refused or closed for what its peer did (no call's access line
covers those)."""

STREAM_RESET_EXTENSION = "voicectl.stream_reset"
"""ASGI scope extension the server sets on a stream it resets (``{"reason": ...}``), so that the
application's access line says why the call ended."""

MAX_CONNECTIONS = 64
"""Connections served at once; one more is closed at once (after its TLS handshake). Our choice:
the local front door serves the clients of one machine (each SDK client pools one connection).
nginx allows 512 per worker (worker_connections); hypercorn and Go's net/http set no bound."""

MAX_CONCURRENT_STREAMS = 100
"""Streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS). RFC 9113 section 6.5.2 recommends no
fewer than 100; hypercorn, h2 and Tomcat default to 100, nginx to 128, Go to 250. A peer that opens
more gets GOAWAY PROTOCOL_ERROR (h2 treats the stream error as a connection error, which RFC 9113
section 5.4.2 allows)."""

MAX_HEADER_LIST_SIZE = 64 * 1024
"""Bytes of one request's header list (SETTINGS_MAX_HEADER_LIST_SIZE, decoded, 32 bytes counted
per field) and of its encoded header block. hypercorn's and h2's default; nginx allows 32 KiB
(large_client_header_buffers 4 8k), Go 1 MiB (DefaultMaxHeaderBytes). SageMaker's documented
request headers take a few KiB at most. Over it: GOAWAY ENHANCE_YOUR_CALM (a header block cannot
be skipped without breaking HPACK's state, RFC 9113 section 4.3, so the connection ends)."""

STALLED_SEND_TIMEOUT_S = 20.0
"""Seconds a stream may hold data it cannot send because the peer's flow-control window is 0;
then it is reset (RST_STREAM CANCEL) and its buffers are freed. The same bound closes a connection
whose socket accepts no bytes. Tomcat's HTTP/2 streamWriteTimeout (20 s, stream reset); nginx's
send_timeout is 60 s (connection closed); hypercorn and Go set none by default."""

IDLE_CONNECTION_TIMEOUT_S = 75.0
"""Seconds a connection without streams is kept for the next call (the SDKs pool connections):
nginx's keepalive_timeout default. hypercorn's own default is 5 s."""

TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""Seconds a new connection gets to complete its TLS handshake; a loopback handshake takes
milliseconds. Our choice; hypercorn and nginx (ssl_handshake_timeout) allow 60 s."""

CLOSE_TIMEOUT_S = 5.0
"""Seconds a closing connection waits for the peer: its TLS close_notify, or its end after a
GOAWAY (input read and dropped meanwhile, so that the GOAWAY is not lost to a reset); then it is
dropped. nginx's lingering_timeout; asyncio waits 30 s for a TLS close."""

_CONFIG_ATTRIBUTE = "voicectl_bounds"


@dataclass(frozen=True)
class ServerLimits:
    """The bounds of one server; the defaults are the constants above.

    Raises:
        ValueError: a bound that is not positive, naming it.
    """

    max_connections: int = MAX_CONNECTIONS
    max_concurrent_streams: int = MAX_CONCURRENT_STREAMS
    max_header_list_size: int = MAX_HEADER_LIST_SIZE
    stalled_send_timeout_s: float = STALLED_SEND_TIMEOUT_S
    idle_connection_timeout_s: float = IDLE_CONNECTION_TIMEOUT_S
    tls_handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S
    close_timeout_s: float = CLOSE_TIMEOUT_S

    def __post_init__(self) -> None:
        bad = [
            f"{item.name}={getattr(self, item.name)!r}"
            for item in fields(self)
            if not getattr(self, item.name) > 0
        ]
        if bad:
            raise ValueError(f"server limits must be positive numbers: {', '.join(bad)}")


@dataclass(frozen=True)
class Held:
    """What a server holds at one moment (:meth:`ServerBounds.held`)."""

    connections: int
    streams: int  # streams with an application task (hypercorn's stream table)
    buffers: int  # response buffers (one per stream not yet finished sending)
    buffered_bytes: int
    h2_streams: int  # streams h2 counts as open


@dataclass
class ServerBounds:
    """The limits of one server and what it holds (connections, the HTTP/2 protocols alive)."""

    limits: ServerLimits = field(default_factory=ServerLimits)
    connections: int = 0
    protocols: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)

    def apply(self, config: Any) -> None:
        """Set hypercorn's ``config`` to these limits (and attach them for the subclasses)."""
        config.h2_max_concurrent_streams = self.limits.max_concurrent_streams
        config.h2_max_header_list_size = self.limits.max_header_list_size
        config.keep_alive_timeout = self.limits.idle_connection_timeout_s
        config.ssl_handshake_timeout = self.limits.tls_handshake_timeout_s
        setattr(config, _CONFIG_ATTRIBUTE, self)

    def held(self) -> Held:
        """The streams and buffers the live HTTP/2 connections hold, and the connections open."""
        protocols = [protocol for protocol in list(self.protocols) if not protocol.closed]
        return Held(
            connections=self.connections,
            streams=sum(len(protocol.streams) for protocol in protocols),
            buffers=sum(len(protocol.stream_buffers) for protocol in protocols),
            buffered_bytes=sum(
                len(buffer.buffer)
                for protocol in protocols
                for buffer in protocol.stream_buffers.values()
            ),
            h2_streams=sum(protocol.connection.open_inbound_streams for protocol in protocols),
        )


def bounds_of(config: Any) -> ServerBounds:
    """The bounds attached to hypercorn's ``config`` (the defaults for a server started
    elsewhere)."""
    bounds = getattr(config, _CONFIG_ATTRIBUTE, None)
    if bounds is None:
        bounds = ServerBounds()
        setattr(config, _CONFIG_ATTRIBUTE, bounds)
    return bounds


def install() -> None:
    """Put the bounded HTTP/2 protocol and TCP server
    (:mod:`voice_devtools.local.bounded_hypercorn`) where hypercorn looks them up
    (``hypercorn.protocol.H2Protocol``, ``hypercorn.asyncio.run.TCPServer``); once per process."""
    import hypercorn.asyncio.run
    import hypercorn.protocol

    from voice_devtools.local.bounded_hypercorn import BoundedH2Protocol, BoundedTCPServer

    if not getattr(hypercorn.protocol.H2Protocol, "voicectl_bounded", False):
        hypercorn.protocol.H2Protocol = BoundedH2Protocol
    if not getattr(hypercorn.asyncio.run.TCPServer, "voicectl_bounded", False):
        hypercorn.asyncio.run.TCPServer = BoundedTCPServer
