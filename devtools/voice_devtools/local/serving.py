"""Serving the local stand-ins: listening sockets, the local certificate, and hypercorn (HTTP/1.1
and HTTP/2, with or without TLS) around an ASGI application."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voice_devtools.local.bounds import ServerBounds

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
"""Names the local certificate is valid for."""


@dataclass(frozen=True)
class TlsFiles:
    """The certificate authority the clients trust (``ca_file``) and the server's key and chain
    (``server_file``)."""

    ca_file: Path
    server_file: Path


CA_ORGANIZATION = "voicectl local-runtime"
"""The local certificate authority's organization (O=), by which a system trust store lists it."""


def certificate_names(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """:data:`LOCAL_NAMES` followed by ``extra`` (host names or addresses, e.g.
    ``runtime.sagemaker.us-east-1.amazonaws.com``), each once, in order."""
    return tuple(dict.fromkeys([*LOCAL_NAMES, *extra]))


def make_certificate(
    directory: Path, ca_file: Path | None = None, names: Iterable[str] = ()
) -> TlsFiles:
    """Make a fresh local certificate authority and a server certificate for :data:`LOCAL_NAMES` and
    ``names`` (trustme).

    Args:
        directory: where the server's key and chain are written (``server.pem``, mode 0600).
        ca_file: where the CA certificate is written (default ``directory/ca.pem``); overwritten.
        names: more names the certificate covers (``--name``).

    Raises:
        OSError: a file cannot be written.
    """
    import trustme

    ca = trustme.CA(
        organization_name=CA_ORGANIZATION, organization_unit_name="local SageMaker runtime"
    )
    server = ca.issue_cert(*certificate_names(names))
    directory.mkdir(parents=True, exist_ok=True)
    server_file = directory / "server.pem"
    server_file.touch(mode=0o600)
    server.private_key_and_cert_chain_pem.write_to_path(str(server_file))
    ca_file = ca_file or directory / "ca.pem"
    ca_file.parent.mkdir(parents=True, exist_ok=True)
    ca.cert_pem.write_to_path(str(ca_file))
    return TlsFiles(ca_file=ca_file, server_file=server_file)


def listen_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets for ``host`` and ``port`` (0 lets the OS choose). ``localhost`` gives
    127.0.0.1 and, where it can be bound, ::1 on the same port, so that a client resolving
    ``localhost`` to either reaches the server.

    Raises:
        OSError: the port is in use or the address cannot be bound.
    """
    addresses = ["127.0.0.1", "::1"] if host == "localhost" else [host]
    sockets: list[socket.socket] = []
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
        except OSError:
            sock.close()
            if (
                sockets and address == "::1"
            ):  # no IPv6 loopback on this machine: 127.0.0.1 is enough
                continue
            for opened in sockets:
                opened.close()
            raise
        sock.listen(128)
        sock.setblocking(False)
        port = sock.getsockname()[1]
        sockets.append(sock)
    return sockets


async def serve_asgi(
    app: Any,
    sockets: list[socket.socket],
    shutdown: asyncio.Event,
    *,
    tls: TlsFiles | None = None,
    graceful_timeout_s: float = 1.0,
    bounds: ServerBounds | None = None,
) -> None:
    """Serve the ASGI ``app`` with hypercorn on ``sockets`` until ``shutdown`` is set.

    With ``tls``: HTTP/2 or HTTP/1.1 over TLS, chosen by ALPN; without: plain HTTP/1.1 (and h2c).
    Open requests get ``graceful_timeout_s`` to finish after ``shutdown``. What a peer can hold
    is bounded by ``bounds`` (default: :class:`voice_devtools.local.bounds.ServerLimits`'s defaults;
    pass one to read what the server holds). The sockets are handed to hypercorn, which closes
    them.
    """
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    from voice_devtools.local import bounds as server_bounds

    server_bounds.install()
    config = Config()
    # hypercorn wraps each descriptor in its own socket object and closes it when it stops.
    config.bind = [f"fd://{sock.detach()}" for sock in sockets]
    if tls is not None:
        config.certfile = config.keyfile = str(tls.server_file)
        config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None
    config.graceful_timeout = graceful_timeout_s
    (bounds or server_bounds.ServerBounds()).apply(config)
    await serve(app, config, shutdown_trigger=shutdown.wait)
