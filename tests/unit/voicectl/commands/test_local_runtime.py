"""``voicectl local-runtime``: its defaults are the dev tools' own, what it refuses, and what it
prints for the clients (the runtime served and stopped: tests/e2e/local)."""

from __future__ import annotations

import argparse
import re

import pytest

from voicectl import cli
from voicectl.commands import local_runtime


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="voicectl")
    local_runtime.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["local-runtime", *argv])


def test_the_parsers_defaults_are_the_dev_tools_own():
    from voice_devtools.local.bidi import PING_INTERVAL_S
    from voice_devtools.local.runtime import DEFAULT_PORT

    assert (local_runtime.DEFAULT_PORT, local_runtime.PING_INTERVAL_S) == (
        DEFAULT_PORT,
        PING_INTERVAL_S,
    )
    args = parse(["--endpoint", "a=ws://127.0.0.1:1"])
    assert (args.port, args.ping_interval, args.host, args.region, args.names) == (
        8443,
        60.0,
        "localhost",
        "us-east-1",
        [],
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "voicectl local-runtime: --port must be 0 to 65535, got 70000\n"),
        (
            ["--name", "bad name"],
            "voicectl local-runtime: --name 'bad name': not a host name (letters, digits, "
            "hyphens and dots, labels of at most 63 characters) or an IP address\n",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(capsys, argv, message):
    assert cli.main(["local-runtime", "--endpoint", "a=ws://127.0.0.1:1", *argv]) == 2
    assert capsys.readouterr().err == message


def test_it_prints_what_a_client_needs(tmp_path, capsys):
    from voice_devtools.local import local_runtime as runtime_module
    from voice_devtools.local.serving import certificate_names

    with runtime_module.prepare(
        ["voxtral-realtime=ws://127.0.0.1:8080", "sonic-tts=http://127.0.0.1:8090"],
        port=0,
        host="127.0.0.1",
        ca_file=tmp_path / "ca.pem",
        names=["runtime.example"],
    ) as runtime:
        local_runtime.print_runtime(runtime, certificate_names(runtime.names))
        port = runtime.sockets[0].getsockname()[1]
        for sock in runtime.sockets:
            sock.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f"voicectl local-runtime: SageMaker runtime on https://127.0.0.1:{port} (HTTP/2 and "
        "HTTP/1.1 over TLS), Region us-east-1",
        "  endpoint voxtral-realtime / AllTraffic: ws://127.0.0.1:8080 (bidirectional streaming)",
        "  endpoint sonic-tts / AllTraffic: http://127.0.0.1:8090 (response streaming)",
        f"  CA certificate: {tmp_path / 'ca.pem'} (for: localhost, 127.0.0.1, ::1, "
        "runtime.example)",
    ]
    assert lines[4] == f"  client environment (source {tmp_path / 'env.sh'}):"
    assert lines[5] == f"    export AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME=https://127.0.0.1:{port}"
    assert re.fullmatch(r"    export AWS_ACCESS_KEY_ID=AKIALOCAL[0-9A-F]{12}", lines[8])
    assert lines[12:15] == [
        "  for a client that calls these names, resolve them to this machine (add to /etc/hosts):",
        "    127.0.0.1 runtime.example",
        "    ::1 runtime.example",
    ]
    assert lines[-1] == f"      remove: sudo security remove-trusted-cert -d {tmp_path / 'ca.pem'}"
