"""The mic page's front gate: every HTTP request and WebSocket handshake is checked before Gradio
sees it.

Whoever can make the browser talk to the page's port can stream audio through the endpoint with the
user's AWS credentials, so the gate holds three rules, each refusing with 403 (a WebSocket
handshake: HTTP 403 too, ASGI's close before accept) and one terminal line per distinct refusal (at
most :data:`MAX_LOGGED_REFUSALS`):

1. **Host**: the request's ``Host`` is one of the names the page is served at (:func:`page_hosts`:
   ``127.0.0.1``, ``localhost`` and ``[::1]`` with the page's port, plus the ``--share`` link's
   host). A DNS-rebinding page (``evil.example`` re-pointed at 127.0.0.1) sends ``Host:
   evil.example:PORT``, so it is refused even though its ``Origin`` matches its ``Host``.
2. **Origin**: a request with an ``Origin`` comes from the page itself: the Origin is ``http://``
   (``https://`` for the share link) plus that accepted Host. A cross-site form post or ``fetch(...,
   {mode: "no-cors"})`` needs no CORS preflight but always carries its site's Origin.
   ``Sec-Fetch-Site: cross-site`` is refused as well, except for a top-level navigation (a link to
   the page), which Chromium and Firefox send without an Origin.
3. **Route**: only what the page needs (:data:`PAGE_ROUTES`, seen in Chromium loading the page and
   recording): the page, its assets, its theme and the recording WebSocket. Gradio's other routes
   (``/gradio_api/upload``, which stores any file in Gradio's temporary directory;
   ``/gradio_api/queue/join``; ``/gradio_api/file=``; its API information) answer 404 without
   reaching Gradio, so nothing a request sends is written to disk.

Refs: the Fetch standard (``Origin`` on every CORS-mode and POST request, ``Sec-Fetch-*`` metadata);
RFC 6455 section 10.2 (servers check ``Origin``); freenet/freenet-core#3034 (the same rebinding
pattern).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""Names of this machine's loopback interface as a browser puts them in ``Host`` (IPv6 in brackets,
RFC 3986)."""

PAGE_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("http", re.compile(r"/")),
    ("http", re.compile(r"/assets/[A-Za-z0-9._-]+")),
    ("http", re.compile(r"/static/[A-Za-z0-9._/-]+")),
    ("http", re.compile(r"/(gradio_api/)?theme\.css")),
    ("http", re.compile(r"/favicon\.ico")),
    (
        "http",
        re.compile(r"/gradio_api/startup-events"),
    ),  # called by Gradio's launch() itself, from this process
)
"""(ASGI scope type, path) of every request the page makes besides its recording WebSocket (added by
:class:`PageGuard`), as Chromium loading the page and recording showed them (gradio 6.31,
``ssr_mode=False``: the page's config is inlined in ``/``); HTTP routes take only GET and HEAD
(:data:`SAFE_METHODS`)."""

SAFE_METHODS = frozenset({"GET", "HEAD"})

MAX_LOGGED_REFUSALS = 20
"""Distinct refusals printed on the terminal; after that they are only counted (a hostile page may
send thousands, each with another name)."""

Scope = dict[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]
]


def page_hosts(port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values the page accepts: each loopback name with ``port``, plus ``extra`` as
    given (lower case)."""
    return frozenset(
        {f"{name}:{port}" for name in LOOPBACK_NAMES} | {host.lower() for host in extra}
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class PageGuard:
    """ASGI middleware in front of the Gradio app enforcing the module's three rules.

    Args:
        app: the ASGI application behind the gate.
        hosts: accepted ``Host`` values (:func:`page_hosts`); :attr:`hosts` may be replaced later
            (the share link's host is known only once Gradio made it).
        websocket_paths: the WebSocket routes the page opens.
        https_hosts: hosts reached over https (the share link), whose Origin is ``https://HOST``.
        log: prints one line for the terminal.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: frozenset[str],
        websocket_paths: Iterable[str],
        https_hosts: frozenset[str] = frozenset(),
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.https_hosts = https_hosts
        self._websocket_paths = frozenset(websocket_paths)
        self._log = log
        self._logged: set[str] = set()
        self.refused: dict[str, int] = {}
        """Refusals by rule (``host``, ``origin``, ``route``), for tests and the exit line."""

    def refusal(self, scope: Scope) -> tuple[str, str] | None:
        """``(rule, reason)`` when ``scope`` is refused, else None."""
        host = (_header(scope, b"host") or "").lower()
        if host not in self.hosts:
            return "host", (
                f"Host {host!r} is not a name of this page ({', '.join(sorted(self.hosts))}): a "
                "page on another site pointed its own name at this machine (DNS rebinding)"
            )
        origin = _header(scope, b"origin")
        if origin is not None:
            scheme = "https" if host in self.https_hosts else "http"
            parts = urlsplit(origin)
            if origin == "null" or (parts.scheme, parts.netloc.lower()) != (scheme, host):
                return "origin", f"Origin {origin!r} is not this page ({scheme}://{host})"
        if (
            _header(scope, b"sec-fetch-site") == "cross-site"
            and _header(scope, b"sec-fetch-mode") != "navigate"
        ):
            return "origin", (
                "the browser marked the request as coming from another site (Sec-Fetch-Site: "
                "cross-site)"
            )
        path = scope.get("path", "")
        if scope["type"] == "websocket":
            allowed = path in self._websocket_paths
        else:
            allowed = scope.get("method") in SAFE_METHODS and any(
                kind == "http" and pattern.fullmatch(path) for kind, pattern in PAGE_ROUTES
            )
        if not allowed:
            return (
                "route",
                f"{scope.get('method', 'WebSocket')} {path[:200]!r} is not a route of this page",
            )
        return None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refused = self.refusal(scope)
        if refused is None:
            return await self.app(scope, receive, send)
        rule, reason = refused
        self.refused[rule] = self.refused.get(rule, 0) + 1
        if reason not in self._logged and len(self._logged) < MAX_LOGGED_REFUSALS:
            self._logged.add(reason)
            last = len(self._logged) == MAX_LOGGED_REFUSALS
            self._log(
                f"refused a request: {reason}"
                + ("; further refusals are not printed" if last else "")
            )
        if scope["type"] == "websocket":
            await send(
                {"type": "websocket.close", "code": 1008}
            )  # before accept: the server answers HTTP 403
            return
        status = 404 if rule == "route" else 403
        body = (
            b"not found\n"
            if rule == "route"
            else b"forbidden: this page answers only itself, at http://127.0.0.1:PORT\n"
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
