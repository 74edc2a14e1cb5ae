"""Talk with the voice agent in a local web page: :class:`TalkRelay` serves the page and relays
its WebSocket to the bot (``voicectl talk``, :mod:`voicectl.commands.talk`, runs it until Ctrl-C).

The page (``talk_page/index.html``) records the microphone (PCM16, 16 kHz), plays the agent's
answers (PCM16, 24 kHz) and shows both sides of the transcript and each turn's latency (the
bot's ``latency`` events: end of speech to the first agent audio). On ``interrupt`` (the user
spoke over the agent) it drops every queued answer frame at once. The wire protocol is the bot's
(agent/protocol.py).

The page talks only to its own origin: its WebSocket (``/relay``) reaches this process, which
opens one connection to the bot per page connection and copies messages both ways, so the
browser never needs the bot's origin (nor its TLS certificate or CORS). The mic page's gate
rules hold (:mod:`voice_client.mic_guard`): loopback bind, ``Host`` and ``Origin`` checked
on every request and handshake, GET only (nothing is uploaded or stored), two routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

from voice_client.errors import UsageError
from voice_client.mic_guard import LOOPBACK_NAMES, PageGuard, page_hosts

DEFAULT_PORT = 7870
"""The page's local port (the mic page's is 7860)."""

BIND = "127.0.0.1"
"""The page listens on loopback only."""

RELAY_PATH = "/relay"
"""The page's WebSocket, relayed to the bot."""

MAX_MESSAGE_BYTES = 64 * 1024 + 1024
"""Largest message relayed either way: the bot's ``MAX_MESSAGE_BYTES`` (agent/protocol.py)."""

CONNECT_TIMEOUT_S = 10.0
"""Longest wait for the bot's WebSocket handshake (a deployed bot behind a load balancer)."""


def page_html() -> bytes:
    """The page (``talk_page/index.html``), as served."""
    return resources.files("voice_client").joinpath("talk_page/index.html").read_bytes()


def check_url(url: str) -> str:
    """The bot's URL: ``ws://`` or ``wss://`` with a host.

    Raises:
        UsageError: any other URL, naming what is allowed.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise UsageError(
            f"--url must be the bot's WebSocket URL, ws://HOST:PORT/ or wss://HOST/ "
            f"(make local AGENT=1 prints it; a deployment's AgentUrl), got {url!r}"
        )
    return url


class TalkRelay:
    """The page's server: ``GET /`` is the page, ``/relay`` a WebSocket copied to the bot.

    Args:
        bot_url: the bot's ``ws://`` or ``wss://`` URL.
        port: the local port (0: any free one; :attr:`port` says which).
        log: prints one line for the terminal.
    """

    def __init__(
        self,
        bot_url: str,
        port: int = DEFAULT_PORT,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        self.bot_url = check_url(bot_url)
        self.requested_port = port
        self.log = log
        self.server: Any = None
        self.guard: PageGuard | None = None
        self.relayed = 0

    @property
    def port(self) -> int:
        return self.server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{BIND}:{self.port}/"

    def process_request(self, connection: Any, request: Any) -> Any:
        assert self.guard is not None
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.raw_items()
        ]
        path = request.path.split("?", 1)[0]
        upgrade = (request.headers.get("Upgrade") or "").lower() == "websocket"
        scope = {
            "type": "websocket" if upgrade else "http",
            "path": path,
            "method": "GET",
            "headers": headers,
        }
        refused = self.guard.refusal(scope)
        if refused is None and not upgrade and path != "/":
            refused = ("route", f"GET {path[:200]!r} is not a route of this page")
        if refused is not None:
            rule, reason = refused
            self.guard.refused[rule] = self.guard.refused.get(rule, 0) + 1
            self.log(f"refused a request: {reason}")
            status = http.HTTPStatus.NOT_FOUND if rule == "route" else http.HTTPStatus.FORBIDDEN
            return connection.respond(status, f"{status.phrase.lower()}\n")
        if upgrade:
            return None
        response = connection.respond(http.HTTPStatus.OK, "")
        body = page_html()
        response.body = body
        for name in ("Content-Type", "Content-Length"):  # respond() set them for plain text
            del response.headers[name]
        response.headers["Content-Type"] = "text/html; charset=utf-8"
        response.headers["Content-Length"] = str(len(body))
        response.headers["Cache-Control"] = "no-store"
        # The page loads nothing from elsewhere; its WebSocket goes to its own origin only.
        response.headers["Content-Security-Policy"] = (
            "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; media-src 'self'"
        )
        return response

    async def relay(self, page: Any) -> None:
        """One page connection: open the bot's, copy both ways until either side closes."""
        from websockets.asyncio.client import connect

        try:
            bot = await asyncio.wait_for(
                connect(self.bot_url, max_size=MAX_MESSAGE_BYTES, compression=None),
                CONNECT_TIMEOUT_S,
            )
        except Exception as error:  # refused (503: the bot is full), unreachable, bad TLS
            message = f"could not reach the agent at {self.bot_url}: {error}"
            self.log(message)
            with contextlib.suppress(Exception):
                await page.send(json.dumps({"type": "error", "message": message}))
                await page.send(json.dumps({"type": "end", "reason": "the agent is unreachable"}))
            await page.close()
            return
        self.relayed += 1

        async def copy(source: Any, sink: Any) -> None:
            with contextlib.suppress(Exception):  # ConnectionClosed: that side left
                async for message in source:
                    await sink.send(message)

        async with bot:
            tasks = [asyncio.ensure_future(copy(page, bot)), asyncio.ensure_future(copy(bot, page))]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await page.close()

    async def start(self) -> TalkRelay:
        from websockets.asyncio.server import serve

        self.server = await serve(
            self._handle,
            BIND,
            self.requested_port,
            process_request=self.process_request,
            max_size=MAX_MESSAGE_BYTES,
            compression=None,
        )
        self.guard = PageGuard(
            None,  # type: ignore[arg-type]
            hosts=page_hosts(self.port),
            websocket_paths={RELAY_PATH},
            log=self.log,
        )
        return self

    async def _handle(self, page: Any) -> None:
        await self.relay(page)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


__all__ = ["LOOPBACK_NAMES", "TalkRelay", "check_url", "page_html"]
