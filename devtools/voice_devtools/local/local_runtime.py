"""``voicectl local-runtime``: a local SageMaker runtime in front of local containers, so the
clients' real AWS code path (SigV4, HTTP/2, event streams) runs without AWS.

    voicectl local-runtime --endpoint voxtral-realtime=ws://127.0.0.1:8080 --endpoint sonic-tts=http://127.0.0.1:8090
        [--port 8443] [--host localhost] [--region us-east-1] [--ca-file FILE] [--ping-interval 60]

It listens on ``https://localhost:<port>`` with a certificate made at start (its CA file path is
printed), accepts requests signed with ``VOICECTL_LOCAL_ACCESS_KEY_ID`` /
``VOICECTL_LOCAL_SECRET_ACCESS_KEY`` (made up when unset) and prints the environment the clients
need (those credentials as ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``). What it serves:
:mod:`voice_devtools.local.runtime`. ``make local`` starts it together with the bridge, the fake
vLLM and the Sonic stand-in.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import TYPE_CHECKING

from voicectl.cli import UsageError

if TYPE_CHECKING:
    from voice_devtools.local.runtime import LocalRuntime
    from voice_devtools.local.serving import TlsFiles

ACCESS_KEY_VARIABLE = "VOICECTL_LOCAL_ACCESS_KEY_ID"
SECRET_KEY_VARIABLE = "VOICECTL_LOCAL_SECRET_ACCESS_KEY"
"""The local credentials the front door accepts, when given (else made up at start); not the
standard AWS variables, so that a shell's real credentials are never taken, printed or written to
env.sh."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``local-runtime`` subcommand."""
    from voice_devtools.local.bidi import PING_INTERVAL_S
    from voice_devtools.local.runtime import DEFAULT_PORT

    parser = subparsers.add_parser(
        "local-runtime",
        help="serve a local SageMaker runtime (HTTPS, HTTP/2, SigV4) in front of local containers",
        description=(
            "Serve SageMaker runtime's InvokeEndpointWithBidirectionalStream and "
            "InvokeEndpointWithResponseStream on https://localhost:PORT, in front of local "
            "containers, so that transcribe, mic and speak run their real AWS code path without "
            "AWS. Prints the CA file and the environment the clients need."
        ),
    )
    parser.add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="NAME[/VARIANT]=URL",
        help="an endpoint (ProductionVariant, default AllTraffic) and its container: "
        "ws://HOST:PORT for a bidirectional streaming container (the bridge), http://HOST:PORT "
        "for one without (the Sonic stand-in); repeat for each",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default: {DEFAULT_PORT}; 0: any free)",
    )
    parser.add_argument(
        "--host",
        default="localhost",
        help="address to listen on (default: localhost, i.e. 127.0.0.1 and ::1)",
    )
    parser.add_argument(
        "--region",
        default="us-east-1",
        help="Region the signatures must be scoped to (default: us-east-1)",
    )
    parser.add_argument(
        "--ca-file",
        metavar="FILE",
        help="write the CA certificate here (default: a new temporary directory, removed at exit)",
    )
    parser.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="HOSTNAME",
        dest="names",
        help="one more name the certificate covers, e.g. runtime.sagemaker.us-east-1.amazonaws.com "
        "for a client that hard-codes SageMaker's hostname (it must then resolve to this "
        "machine: the hosts-file line is printed); repeat for each",
    )
    parser.add_argument(
        "--ping-interval",
        type=float,
        default=PING_INTERVAL_S,
        metavar="SECONDS",
        help=f"seconds between WebSocket pings to a container (default: {PING_INTERVAL_S:g}, as "
        "SageMaker; the stream ends after 5 unanswered)",
    )
    parser.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl local-runtime``; serves until SIGINT or SIGTERM, then returns 0."""
    from voice_devtools.local.bidi import StreamSettings
    from voice_devtools.local.runtime import LocalRuntime, parse_endpoints
    from voice_devtools.local.serving import certificate_names, listen_sockets, make_certificate
    from voice_devtools.local.sigv4 import LocalCredentials

    try:
        endpoints = parse_endpoints(args.endpoint)
        settings = StreamSettings(ping_interval_s=args.ping_interval)
    except ValueError as error:
        raise UsageError(str(error)) from error
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {args.port}")
    names = validate_names(list(getattr(args, "names", [])))
    if args.host not in ("localhost", "0.0.0.0", "::"):  # what the caller asked to listen on
        names.append(args.host)  # env.sh's URL names it: the certificate must cover it
    # Never the caller's own AWS credentials: they would be printed and written to env.sh.
    key_id = os.environ.get(ACCESS_KEY_VARIABLE) or "AKIALOCAL" + secrets.token_hex(6).upper()
    secret = os.environ.get(SECRET_KEY_VARIABLE) or secrets.token_urlsafe(30)
    try:
        sockets = listen_sockets(args.host, args.port)
    except OSError as error:
        raise UsageError(
            f"cannot listen on {args.host}:{args.port} ({error.strerror or error}); is another "
            "local runtime running? Choose another --port"
        ) from error
    state = Path(tempfile.mkdtemp(prefix="voicectl-local-runtime-"))
    try:
        tls = make_certificate(state, Path(args.ca_file).resolve() if args.ca_file else None, names)
        port = sockets[0].getsockname()[1]
        url = f"https://{'localhost' if args.host == 'localhost' else args.host}:{port}"
        environment = client_environment(url, tls.ca_file, key_id, secret, args.region)
        env_file = tls.ca_file.parent / "env.sh"
        write_private(env_file, environment_script(environment))  # it holds the local secret key
        print(
            f"voicectl local-runtime: SageMaker runtime on {url} (HTTP/2 and HTTP/1.1 over TLS), "
            f"Region {args.region}",
            flush=True,
        )
        for endpoint in endpoints:
            kind = "bidirectional streaming" if endpoint.bidirectional else "response streaming"
            print(f"  endpoint {endpoint.name} / {endpoint.variant}: {endpoint.container} ({kind})")
        print(f"  CA certificate: {tls.ca_file} (for: {', '.join(certificate_names(names))})")
        print(f"  client environment (source {env_file}):")
        for name, value in environment.items():
            print(f"    export {name}={shlex.quote(value)}")
        if lines := hosts_lines(names):
            print(
                "  for a client that calls these names, resolve them to this machine (add to "
                "/etc/hosts):"
            )
            for line in lines:
                print(f"    {line}")
        print(
            "  for a client on awscrt (it ignores AWS_CA_BUNDLE and SSL_CERT_FILE), trust the CA "
            "system-wide:"
        )
        for system, add, remove in system_trust_commands(tls.ca_file):
            print(f"    {system}: {' && '.join(add)}")
            print(f"      remove: {' && '.join(remove)}")
        app = LocalRuntime(
            endpoints=endpoints,
            credentials=LocalCredentials(key_id, secret),
            region=args.region,
            settings=settings,
        )
        configure_logging()
        asyncio.run(_serve_until_signal(app, sockets, tls))
    finally:
        shutil.rmtree(state, ignore_errors=True)
    print("voicectl local-runtime: stopped", file=sys.stderr)
    return 0


async def _serve_until_signal(
    app: LocalRuntime, sockets: list[socket.socket], tls: TlsFiles
) -> None:
    from voice_devtools.local.serving import serve_asgi

    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, shutdown.set)
    # Only now: a Ctrl-C before the handlers exist would end the process as "interrupted" (exit
    # 130), not "stopped".
    print("  ready; Ctrl-C stops", flush=True)
    await serve_asgi(app, sockets, shutdown, tls=tls)
