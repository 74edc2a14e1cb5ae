"""``voicectl talk``: what it refuses before serving (a port outside 1-65535, a URL that is not the
bot's WebSocket, a port in use). The page and its relay: tests/unit/voice_client/test_talk.py."""

from __future__ import annotations

import argparse
import socket

import pytest

from voicectl.cli import UsageError
from voicectl.commands import talk


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="voicectl")
    talk.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["talk", *argv])


def test_the_defaults_are_the_relays():
    args = parse(["--url", "ws://127.0.0.1:8100/"])
    assert (args.url, args.port, args.func) == ("ws://127.0.0.1:8100/", 7870, talk.run)


@pytest.mark.parametrize("port", ["0", "65536"])
def test_a_port_outside_1_to_65535_is_a_usage_error(port):
    with pytest.raises(UsageError) as refused:
        talk.run(parse(["--url", "ws://127.0.0.1:8100/", "--port", port]))
    assert str(refused.value) == f"--port must be a TCP port from 1 to 65535, got {port}"


def test_a_url_that_is_not_the_bots_websocket_is_a_usage_error():
    with pytest.raises(UsageError, match=r"ws://HOST:PORT/ or wss://HOST/ .* got 'http://bot/'"):
        talk.run(parse(["--url", "http://bot/"]))


def test_a_port_in_use_is_a_usage_error_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError) as refused:
            talk.run(parse(["--url", "ws://127.0.0.1:8100/", "--port", str(port)]))
    assert str(refused.value).startswith(f"cannot listen on 127.0.0.1:{port} (")
    assert str(refused.value).endswith(
        "); another program uses the port: pass --port with a free one"
    )
