"""A local SageMaker runtime in front of local containers, so the clients' real AWS code path
(SigV4, HTTP/2, event streams) runs without AWS: :func:`prepare` listens, makes the certificate and
writes the clients' environment; :func:`serve_until_signal` serves until SIGINT or SIGTERM.
``voicectl local-runtime`` (:mod:`voicectl.commands.local_runtime`) runs both and prints what a
client needs; ``make local`` starts it together with the bridge, the fake vLLM and the Sonic
stand-in.

It listens on ``https://localhost:<port>`` with a certificate made at start, accepts requests
signed with ``VOICECTL_LOCAL_ACCESS_KEY_ID`` / ``VOICECTL_LOCAL_SECRET_ACCESS_KEY`` (made up when
unset) and writes the environment the clients need (those credentials as ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``) to ``env.sh`` beside the CA file. What it serves:
:mod:`voice_devtools.local.runtime`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from voice_client.errors import UsageError

if TYPE_CHECKING:
    from voice_devtools.local.runtime import LocalEndpoint, LocalRuntime
    from voice_devtools.local.serving import TlsFiles

ACCESS_KEY_VARIABLE = "VOICECTL_LOCAL_ACCESS_KEY_ID"
SECRET_KEY_VARIABLE = "VOICECTL_LOCAL_SECRET_ACCESS_KEY"
"""The local credentials the front door accepts, when given (else made up at start); not the
standard AWS variables, so that a shell's real credentials are never taken, printed or written to
env.sh."""


def client_environment(
    url: str, ca_file: Path, access_key_id: str, secret_access_key: str, region: str
) -> dict[str, str]:
    """The environment under which ``transcribe``, ``mic`` and ``speak`` call the local runtime at
    ``url``."""
    return {
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": url,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": url,
        "AWS_CA_BUNDLE": str(ca_file),
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret_access_key,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,  # botocore reads this one
    }


def environment_script(environment: dict[str, str]) -> str:
    """A POSIX shell script that exports ``environment`` (and drops a profile that would take
    precedence)."""
    lines = [
        "# source this file: the clients then call the local SageMaker runtime",
        "unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN",
    ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in environment.items()]
    return "\n".join(lines) + "\n"


HOSTNAME_PATTERN = re.compile(
    r"^(?=.{1,253}$)(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$"
)
"""A DNS host name (RFC 1123: labels of letters, digits and inner hyphens, at most 63 characters,
253 in all)."""

SYSTEM_CA_NAME = "voicectl-local-runtime"
"""File name (without extension) of the local CA in a system trust store: the same at every start,
so that adding it again replaces the previous one."""


def validate_names(names: list[str]) -> list[str]:
    """The ``--name`` values, checked: host names (RFC 1123) or IP addresses.

    Raises:
        UsageError: naming each bad value and what is allowed.
    """
    import ipaddress

    bad = []
    for name in names:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            if not HOSTNAME_PATTERN.match(name):
                bad.append(name)
    if bad:
        raise UsageError(
            f"--name {', '.join(map(repr, bad))}: not a host name (letters, digits, hyphens and "
            "dots, labels of at most 63 characters) or an IP address"
        )
    return names


def hosts_lines(names: list[str]) -> list[str]:
    """The hosts-file (``/etc/hosts``) lines that resolve each host name of ``names`` to this
    machine (IPv4 and IPv6 loopback); IP addresses need none."""
    import ipaddress

    lines = []
    for name in names:
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(name)
            continue
        lines += [f"127.0.0.1 {name}", f"::1 {name}"]
    return lines


def system_trust_commands(ca_file: Path) -> list[tuple[str, list[str], list[str]]]:
    """How to make clients built on awscrt trust ``ca_file``: (system, commands to add it, commands
    to remove it).

    awscrt (aws-c-io, on Linux through s2n-tls) ignores ``AWS_CA_BUNDLE`` and ``SSL_CERT_FILE``:
    unless the client overrides it, it trusts the system's store, the first of
    ``/etc/ssl/certs/ca-certificates.crt`` (Debian, Ubuntu), ``/etc/pki/tls/certs/ca-bundle.crt``
    (RHEL, Amazon Linux) and a few more that exists, with the directory ``/etc/ssl/certs`` or
    ``/etc/pki/tls/certs`` (aws-c-io ``pki_utils``), and on macOS the keychains. Those are made by
    each system's own tool from the anchors it is given.
    """
    ca = shlex.quote(str(ca_file))
    debian = f"/usr/local/share/ca-certificates/{SYSTEM_CA_NAME}.crt"
    rhel = f"/etc/pki/ca-trust/source/anchors/{SYSTEM_CA_NAME}.pem"
    keychain = "/Library/Keychains/System.keychain"
    return [
        (
            "Debian, Ubuntu",
            [f"sudo cp {ca} {debian}", "sudo update-ca-certificates"],
            [f"sudo rm {debian}", "sudo update-ca-certificates --fresh"],
        ),
        (
            "RHEL, Amazon Linux, Fedora",
            [f"sudo cp {ca} {rhel}", "sudo update-ca-trust"],
            [f"sudo rm {rhel}", "sudo update-ca-trust"],
        ),
        (
            "macOS",
            [f"sudo security add-trusted-cert -d -r trustRoot -k {keychain} {ca}"],
            [f"sudo security remove-trusted-cert -d {ca}"],
        ),
    ]


LOG_FORMAT = "%(asctime)s [%(process)d] [%(levelname)s] %(message)s"
LOG_DATE_FORMAT = "[%Y-%m-%d %H:%M:%S %z]"
"""hypercorn's own log line format, so that the front door's log reads as one."""


def configure_logging() -> None:
    """Write the front door's INFO lines (one per call:
    ``voice_devtools.local.runtime.ACCESS_LOGGER``; refused connections) to stdout, once per
    process."""
    local = logging.getLogger("voice_devtools.local")
    if not any(getattr(handler, "voicectl_local", False) for handler in local.handlers):
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
        handler.voicectl_local = True  # type: ignore[attr-defined]
        local.addHandler(handler)
    local.setLevel(logging.INFO)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600, also when ``path``
    existed)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


@dataclass
class PreparedRuntime:
    """A front door ready to serve (:func:`prepare`).

    Attributes:
        url: the runtime's URL the clients call (``https://localhost:PORT``).
        region: the Region the signatures must be scoped to.
        endpoints: the endpoints and their containers.
        tls: the CA file the clients trust and the server's key and chain.
        names: the names the certificate covers beyond the local ones (``names`` and a ``host``
            that is not a wildcard).
        environment: the clients' environment (:func:`client_environment`).
        env_file: the shell script exporting it (mode 0600: it holds the local secret key).
        app: the front door's ASGI application.
        sockets: the listening sockets.
    """

    url: str
    region: str
    endpoints: list[LocalEndpoint]
    tls: TlsFiles
    names: list[str]
    environment: dict[str, str]
    env_file: Path
    app: LocalRuntime
    sockets: list[socket.socket]


@contextlib.contextmanager
def prepare(
    endpoint_specs: list[str],
    *,
    port: int,
    host: str = "localhost",
    region: str = "us-east-1",
    ca_file: Path | None = None,
    names: Iterable[str] = (),
    ping_interval_s: float | None = None,
) -> Iterator[PreparedRuntime]:
    """Check the arguments, listen on ``host``:``port``, make the certificate and write the clients'
    environment; yield the runtime ready to serve, and remove its temporary files on exit.

    Args:
        endpoint_specs: ``NAME[/VARIANT]=URL`` for each endpoint
            (:func:`voice_devtools.local.runtime.parse_endpoints`).
        port: 0 to 65535 (0: any free one).
        host: the address to listen on (``localhost``: 127.0.0.1 and ::1).
        region: the Region the signatures must be scoped to.
        ca_file: where the CA certificate is written (None: a temporary directory, removed on
            exit); ``env.sh`` is written beside it.
        names: more names the certificate covers (host names or IP addresses).
        ping_interval_s: seconds between WebSocket pings to a container (None: SageMaker's).

    Raises:
        UsageError: a bad endpoint, port, name or ping interval, or the port cannot be bound.
    """
    from voice_devtools.local.bidi import PING_INTERVAL_S, StreamSettings
    from voice_devtools.local.runtime import LocalRuntime, parse_endpoints
    from voice_devtools.local.serving import listen_sockets, make_certificate
    from voice_devtools.local.sigv4 import LocalCredentials

    try:
        endpoints = parse_endpoints(endpoint_specs)
        settings = StreamSettings(
            ping_interval_s=PING_INTERVAL_S if ping_interval_s is None else ping_interval_s
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {port}")
    names = validate_names(list(names))
    if host not in ("localhost", "0.0.0.0", "::"):  # what the caller asked to listen on
        names.append(host)  # env.sh's URL names it: the certificate must cover it
    # Never the caller's own AWS credentials: they would be printed and written to env.sh.
    key_id = os.environ.get(ACCESS_KEY_VARIABLE) or "AKIALOCAL" + secrets.token_hex(6).upper()
    secret = os.environ.get(SECRET_KEY_VARIABLE) or secrets.token_urlsafe(30)
    try:
        sockets = listen_sockets(host, port)
    except OSError as error:
        raise UsageError(
            f"cannot listen on {host}:{port} ({error.strerror or error}); is another "
            "local runtime running? Choose another --port"
        ) from error
    state = Path(tempfile.mkdtemp(prefix="voicectl-local-runtime-"))
    try:
        tls = make_certificate(state, ca_file.resolve() if ca_file else None, names)
        bound = sockets[0].getsockname()[1]
        url = f"https://{'localhost' if host == 'localhost' else host}:{bound}"
        environment = client_environment(url, tls.ca_file, key_id, secret, region)
        env_file = tls.ca_file.parent / "env.sh"
        write_private(env_file, environment_script(environment))  # it holds the local secret key
        app = LocalRuntime(
            endpoints=endpoints,
            credentials=LocalCredentials(key_id, secret),
            region=region,
            settings=settings,
        )
        yield PreparedRuntime(
            url, region, endpoints, tls, names, environment, env_file, app, sockets
        )
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def serve_until_signal(
    runtime: PreparedRuntime, on_ready: Callable[[], None] = lambda: None
) -> None:
    """Serve ``runtime`` until SIGINT or SIGTERM; ``on_ready`` is called once the signals are
    handled (a Ctrl-C before then ends the process as interrupted, not stopped)."""
    from voice_devtools.local.serving import serve_asgi

    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, shutdown.set)
    # Only now: a Ctrl-C before the handlers exist would end the process as interrupted, not
    # stopped.
    on_ready()
    await serve_asgi(runtime.app, runtime.sockets, shutdown, tls=runtime.tls)
