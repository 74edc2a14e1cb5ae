"""``voicectl local-runtime``: a local SageMaker runtime in front of local containers, so the
clients' real AWS code path (SigV4, HTTP/2, event streams) runs without AWS.

    voicectl local-runtime --endpoint voxtral-realtime=ws://127.0.0.1:8080 \\
        --endpoint sonic-tts=http://127.0.0.1:8090 \\
        [--port 8443] [--host localhost] [--region us-east-1] [--ca-file FILE] [--ping-interval 60]

It prints the runtime's URL, its CA file and the environment the clients need. The runtime itself:
:mod:`voice_devtools.local.local_runtime`, from the dev tools, imported when the command runs
(without them the command says how to install them: :mod:`voicectl.commands.dev_tools`).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from voicectl.commands.dev_tools import dev_tools_installed, dev_tools_required

if TYPE_CHECKING:
    from voice_devtools.local.local_runtime import PreparedRuntime

DEFAULT_PORT = 8443
"""The runtime's default port: ``voice_devtools.local.runtime.DEFAULT_PORT`` (SageMaker serves
bidirectional streams on 8443), held here so that the parser is built without the dev tools (a test
keeps the two equal)."""

PING_INTERVAL_S = 60.0
"""Seconds between WebSocket pings to a container by default:
``voice_devtools.local.bidi.PING_INTERVAL_S`` (SageMaker's), held here as :data:`DEFAULT_PORT`
is."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``local-runtime`` subcommand."""
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
        required=dev_tools_installed(),
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


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl local-runtime``; serves until SIGINT or SIGTERM, then returns 0."""
    with dev_tools_required():
        from voice_devtools.local import local_runtime
        from voice_devtools.local.serving import certificate_names

    with local_runtime.prepare(
        args.endpoint,
        port=args.port,
        host=args.host,
        region=args.region,
        ca_file=Path(args.ca_file) if args.ca_file else None,
        names=args.names,
        ping_interval_s=args.ping_interval,
    ) as runtime:
        print_runtime(runtime, certificate_names(runtime.names))
        local_runtime.configure_logging()
        asyncio.run(
            local_runtime.serve_until_signal(
                runtime, on_ready=lambda: print("  ready; Ctrl-C stops", flush=True)
            )
        )
    print("voicectl local-runtime: stopped", file=sys.stderr)
    return 0


def print_runtime(runtime: PreparedRuntime, certified: tuple[str, ...]) -> None:
    """What a client needs, on stdout: the URL, the endpoints, the CA file and the names it covers
    (``certified``), the environment, the hosts-file lines and how to trust the CA system-wide."""
    from voice_devtools.local.local_runtime import hosts_lines, system_trust_commands

    print(
        f"voicectl local-runtime: SageMaker runtime on {runtime.url} (HTTP/2 and HTTP/1.1 over "
        f"TLS), Region {runtime.region}",
        flush=True,
    )
    for endpoint in runtime.endpoints:
        kind = "bidirectional streaming" if endpoint.bidirectional else "response streaming"
        print(f"  endpoint {endpoint.name} / {endpoint.variant}: {endpoint.container} ({kind})")
    print(f"  CA certificate: {runtime.tls.ca_file} (for: {', '.join(certified)})")
    print(f"  client environment (source {runtime.env_file}):")
    for name, value in runtime.environment.items():
        print(f"    export {name}={shlex.quote(value)}")
    if lines := hosts_lines(runtime.names):
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
    for system, add, remove in system_trust_commands(runtime.tls.ca_file):
        print(f"    {system}: {' && '.join(add)}")
        print(f"      remove: {' && '.join(remove)}")
