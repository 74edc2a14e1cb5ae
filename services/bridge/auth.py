"""The bearer token callers send on the stream's WebSocket upgrade when the bridge runs without
SageMaker.

On SageMaker the runtime authenticates callers (SigV4) before any byte reaches the container, so the
bridge checks nothing. On ECS (or any self-managed host) the load balancer passes the upgrade
request through as it is: with `BRIDGE_TOKEN` set (ECS injects a Secrets Manager secret's value into
the task's environment), the upgrade on the stream path (and its aliases) must carry `Authorization:
Bearer <token>` (RFC 6750, section 2.1). A missing, malformed or wrong header is answered 401 with
`WWW-Authenticate: Bearer` (RFC 6750, section 3) by the leg that read the request head, before the
WebSocket is accepted: no stream slot is taken and no vLLM connection is opened. `GET /ping` stays
open (load balancer and container health checks carry no token).

Constant time: the presented credentials and the expected token are each reduced to an HMAC-SHA256
under a key drawn at start-up, and the two 32-byte digests are compared with `hmac.compare_digest`.
The comparison's time then depends neither on where the first differing byte is nor on the presented
token's length (comparing the raw tokens with `compare_digest` would leak the length, which its
documentation says it does not hide); hashing costs the same per byte for every input. This runs
once per upgrade request, never per frame.

The token is never logged, and never part of the settings' repr
(`contracts.bridge_env.BridgeEnvironment`'s `bridge_token`). What a token may be is the contract's
rule (`contracts.bridge_env.token_problem`).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import logging
import math
import secrets
import time
from collections.abc import Callable

from websockets.datastructures import Headers

#: The scheme of RFC 6750 (case-insensitive, RFC 7235 section 2.1).
SCHEME = "bearer"


class Verdict(enum.Enum):
    """What an upgrade request's `Authorization` header came to (logged and counted; never the token
    itself)."""

    OK = "ok"
    MISSING = "missing"  # no Authorization header
    MALFORMED = "malformed"  # not one `Bearer <credentials>` header
    WRONG = "wrong"  # a bearer token, not the expected one


class BearerToken:
    """Checks the `Authorization` header of an upgrade request against one expected token.

    Args:
        token: the expected token (visible ASCII; `contracts.bridge_env.token_problem` says what
            is allowed).

    The expected token is kept only as its HMAC under a per-process random key (see the module
    docstring).
    """

    __slots__ = ("_expected", "_key")

    def __init__(self, token: str) -> None:
        self._key = secrets.token_bytes(32)
        self._expected = self._digest(token.encode("ascii"))

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"

    def _digest(self, value: bytes) -> bytes:
        return hmac.new(self._key, value, hashlib.sha256).digest()

    def check(self, headers: Headers) -> Verdict:
        """The verdict on `headers` (the upgrade request's): OK only for exactly one `Authorization:
        Bearer <token>` header whose token is the expected one; MALFORMED for a value holding
        anything but visible ASCII and spaces. Never raises for any header value websockets' parser
        lets through. The digests are compared even for a malformed header, so that every verdict
        costs one HMAC and one `hmac.compare_digest` of 32 bytes."""
        values = headers.get_all("Authorization")
        presented = b""
        verdict = Verdict.MISSING if not values else Verdict.MALFORMED
        # websockets' HTTP/1.1 parser (`websockets.http11.parse_headers`) decodes header values as
        # ISO-8859-1 and itself answers 400 to control bytes other than tab, and to DEL: a value can
        # still hold tab and 0x80-0xFF. RFC 6750's b64token is visible ASCII and its separator a
        # space; anything else (U+00A0 too, which `str.strip` would drop) is malformed. For ASCII
        # text, `isprintable` is exactly 0x20-0x7E.
        if len(values) == 1 and values[0].isascii() and values[0].isprintable():
            scheme, _, credentials = values[0].strip().partition(" ")
            credentials = credentials.strip()
            if scheme.lower() == SCHEME and credentials:
                presented = credentials.encode("ascii")
                verdict = Verdict.WRONG
        if (
            hmac.compare_digest(self._digest(presented), self._expected)
            and verdict is Verdict.WRONG
        ):
            return Verdict.OK
        return verdict


#: Seconds between two log lines about refused upgrades: each refusal is counted in the metric at
#: once (`metrics.BridgeMetrics.unauthorized`), but a caller guessing tokens must not flood the log
#: (one INFO line per refusal wrote 149,347 lines, 11.9 MB, in 60 s of guessing); the first refusal
#: of an interval is logged at once.
REFUSED_LOG_INTERVAL_S = 60.0


class RefusalLog:
    """Refused streams, logged at most once per `interval_s` with how many of each kind came since
    the last line.

    `refused` is called once per refused stream (a dictionary increment, no I/O unless a line is
    due); `flush_due` is called by the bridge's periodic metrics task, so that refusals after the
    last line are reported within an interval even when no further one arrives. `logger` receives
    INFO lines; `clock` is monotonic seconds. `subject` follows each kind in a line and `status`
    says how the refusal was answered (by default: the bearer token's verdicts, answered 401).
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = REFUSED_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        *,
        subject: str = "bearer token",
        status: str = "401",
    ) -> None:
        self._log, self._interval_s, self._clock = logger, interval_s, clock
        self._subject, self._status = subject, status
        self._pending: dict[str, int] = {}
        self._last_line_at = -math.inf

    def refused(self, kind: Verdict | str) -> None:
        """Count one refusal of `kind` (a verdict, or a short text); write a line if none was
        written in the last interval."""
        name = kind.value if isinstance(kind, Verdict) else kind
        self._pending[name] = self._pending.get(name, 0) + 1
        self.flush_due()

    def flush_due(self) -> None:
        """Write the pending count if there is one and the interval since the last line has
        passed."""
        now = self._clock()
        if not self._pending or now - self._last_line_at < self._interval_s:
            return
        total = sum(self._pending.values())
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self._pending.items()))
        subject = f" {self._subject}" if self._subject else ""
        if total == 1:
            self._log.info(
                "refused a stream: %s%s (%s)", next(iter(self._pending)), subject, self._status
            )
        else:
            self._log.info(
                "refused %d streams since the last such line (%s): %s%s; at most one "
                "line every %.0f s",
                total,
                self._status,
                kinds,
                subject,
                self._interval_s,
            )
        self._pending.clear()
        self._last_line_at = now
