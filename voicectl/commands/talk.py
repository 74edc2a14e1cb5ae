"""``voicectl talk --url ws://HOST:8080/``: talk with the voice agent in a local web page.

    voicectl talk --url ws://127.0.0.1:8100/        # make local AGENT=1's bot
    voicectl talk --url wss://agent.example.com/    # a deployed AgentUrl

The page and its relay to the bot: :mod:`voice_client.talk`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from voice_client.errors import UsageError
from voice_client.talk import BIND, DEFAULT_PORT, TalkRelay, check_url


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``talk`` subcommand."""
    parser = subparsers.add_parser(
        "talk",
        help="talk with the voice agent in a local web page",
        description="Serve a local page (http://127.0.0.1:PORT/) that records your microphone, "
        "plays the voice agent's answers and shows both sides and each turn's "
        "latency; the "
        "page's WebSocket is relayed to the bot by this process.",
    )
    parser.add_argument(
        "--url",
        required=True,
        metavar="WS_URL",
        help="the bot's WebSocket: ws://127.0.0.1:8100/ (make local AGENT=1) or a "
        "deployment's AgentUrl (wss://...)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"local port (default: {DEFAULT_PORT})"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl talk``: serve the page until Ctrl-C."""
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port must be a TCP port from 1 to 65535, got {args.port}")
    check_url(args.url)

    async def serve() -> None:
        try:
            relay = await TalkRelay(args.url, args.port).start()
        except OSError as error:
            raise UsageError(
                f"cannot listen on {BIND}:{args.port} ({error}); another program uses "
                "the port: pass --port with a free one"
            ) from error
        print(
            f"open {relay.url} in your browser (also http://localhost:{relay.port}/); "
            f"talking to {args.url}; Ctrl-C stops",
            file=sys.stderr,
        )
        try:
            await asyncio.Future()
        finally:
            await relay.stop()

    asyncio.run(serve())
    return 0
