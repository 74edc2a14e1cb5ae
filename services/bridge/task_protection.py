"""ECS task scale-in protection while streams are live, through the ECS agent's task-protection
endpoint.

Amazon ECS developer guide, "Amazon ECS task scale-in protection endpoint"
(https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-scale-in-protection-endpoint.html):
the ECS agent sets `ECS_AGENT_URI` in every container of a task; `PUT
$ECS_AGENT_URI/task-protection/v1/state` with the JSON body `{"ProtectionEnabled": true,
"ExpiresInMinutes": N}` (N from 1 to 2880; 120 when left out) protects the task from scale-in by
service auto scaling and from being stopped by a deployment until N minutes have passed or
`{"ProtectionEnabled": false}` is sent. A success answers 200 with `{"protection": {...}}`; a
refusal answers with `{"failure": {...}}` or `{"error": {...}}` (and a 4xx/5xx status). The agent
acts with the task role, which needs `ecs:UpdateTaskProtection` on the task
(`constructs_lib/ecs_service.py` grants it).

What the bridge does (`TaskProtection`, one asyncio task of its own beside the relay):
- at the first live stream (admitted, counted in `Bridge.active_streams`), protection on for
  `TASK_PROTECTION_MINUTES` (default 10);
- while streams stay live, renewed when half of that has passed, so a live stream never outlasts it,
  while a bridge that hung stops protecting its task within those minutes;
- once no stream has been live for `TASK_PROTECTION_GRACE_S` (default 10 s), protection off. The
  grace is there so that a caller moving to a new stream (voicectl's rollover opens the next stream
  before the old one ends, but a reconnect after a drop does not) does not make protection flap,
  which would cost two agent requests per stream and could let a scale-in slip in between; 10 s is
  short against the minutes a scale-in or a deployment waits.

The relay only calls `streams_changed` (an integer compare and, on a change between none and some,
an event set): no request is made on the audio path. Every request has a timeout
(`REQUEST_TIMEOUT_S`); a failure (agent down, refused, slow) is logged, counted
(`TaskProtectionErrors`) and retried with backoff (`RETRY_DELAYS_S`), and never touches a stream.
HTTP client: aiohttp, which the image already has (aws-embedded-metrics depends on it), imported
only on ECS; it ignores HTTP(S)_PROXY unless asked (`trust_env=False`), as the agent is reached
directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger("bridge")

#: The endpoint's path below ECS_AGENT_URI.
STATE_PATH = "/task-protection/v1/state"
#: Longest wait for the agent's answer to one request, seconds (connect included).
REQUEST_TIMEOUT_S = 3.0
#: Seconds before retrying a failed request: the first, second, ... failure in a row; then the last
#: value.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
#: Share of ExpiresInMinutes after which protection is renewed while streams are live.
RENEW_FRACTION = 0.5


class ProtectionMetrics(Protocol):
    """What `TaskProtection` records (`metrics.BridgeMetrics`)."""

    def protection_changed(self, enabled: bool) -> None: ...
    def protection_error(self) -> None: ...


class TaskProtection:
    """Turns ECS task scale-in protection on while streams are live and off when idle (see the
    module docstring).

    Args:
        agent_uri: ECS_AGENT_URI (e.g. `http://169.254.170.2/api/<id>`).
        metrics: where the state and failures are recorded.
        expires_minutes: ExpiresInMinutes of each "on" request, 1 to 2880.
        grace_s: seconds without a live stream before protection is turned off.
        renew_after_s: seconds after a successful "on" request before the next (default:
            RENEW_FRACTION of `expires_minutes`).
        request_timeout_s: per request; retry_delays_s: backoff after failures, seconds.

    Attributes:
        url: the endpoint's URL. enabled: whether the agent last confirmed protection on.

    Use: `task = asyncio.ensure_future(protection.run())`; call `streams_changed(count)` whenever
    the number of live streams changes; cancel the task to stop (its HTTP session is closed).
    """

    def __init__(
        self,
        agent_uri: str,
        metrics: ProtectionMetrics,
        *,
        expires_minutes: int,
        grace_s: float,
        renew_after_s: float | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = agent_uri.rstrip("/") + STATE_PATH
        self.metrics = metrics
        self.expires_minutes = expires_minutes
        self.grace_s = grace_s
        self.renew_after_s = (
            expires_minutes * 60 * RENEW_FRACTION if renew_after_s is None else renew_after_s
        )
        self.request_timeout_s = request_timeout_s
        self.retry_delays_s = retry_delays_s
        self.enabled = False
        self._clock = clock
        self._live = 0
        self._wake = asyncio.Event()
        self._renew_at = 0.0
        self._idle_since: float | None = None
        self._failures = 0

    def streams_changed(self, live: int) -> None:
        """The bridge now has `live` live streams. Cheap: wakes the task only between none and
        some."""
        if (live > 0) != (self._live > 0):
            self._wake.set()
        self._live = live

    async def run(self) -> None:
        """Keep protection in step with the live streams until cancelled."""
        import aiohttp  # only on ECS; see the module docstring

        timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
            while True:
                self._wake.clear()
                try:
                    delay = await self._step(session)
                except (
                    Exception
                ) as exc:  # a bug here must not end the task (and never reaches a stream)
                    log.warning("ECS task scale-in protection: unexpected error: %r", exc)
                    delay = self._retry_delay()
                if delay is None:
                    await self._wake.wait()
                else:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(0.0, delay)):
                            await self._wake.wait()

    async def _step(self, session: Any) -> float | None:
        """Send what the live streams call for, if anything; return seconds until the next look
        (None: until the number of live streams changes between none and some)."""
        now = self._clock()
        if self._live > 0:
            self._idle_since = None
            if self.enabled and now < self._renew_at:
                return self._renew_at - now
            renewing = self.enabled
            if not await self._put(session, True):
                return self._retry_delay()
            self._renew_at = self._clock() + self.renew_after_s
            if not renewing:
                log.info(
                    "ECS task scale-in protection on for %d min (%d live stream%s)",
                    self.expires_minutes,
                    self._live,
                    "" if self._live == 1 else "s",
                )
            self._set(True)
            return self.renew_after_s
        if not self.enabled:
            return None
        if self._idle_since is None:
            self._idle_since = now
        remaining = self._idle_since + self.grace_s - now
        if remaining > 0:
            return remaining
        if not await self._put(session, False):
            return self._retry_delay()
        log.info("ECS task scale-in protection off (no live stream for %.0f s)", self.grace_s)
        self._idle_since = None
        self._set(False)
        return None

    def _set(self, enabled: bool) -> None:
        self.enabled = enabled
        self._failures = 0
        self.metrics.protection_changed(enabled)

    def _retry_delay(self) -> float:
        delay = self.retry_delays_s[min(self._failures, len(self.retry_delays_s) - 1)]
        self._failures += 1
        return delay

    def _failure_reason(self, exc: BaseException) -> str:
        """What went wrong with a request, for the log: a timeout says how long was waited
        (asyncio's and aiohttp's timeouts carry no message, or one without the limit); otherwise the
        exception's message, or its type's name when the message is empty."""
        message = str(exc)
        if isinstance(
            exc, TimeoutError
        ):  # aiohttp's ServerTimeoutError and ConnectionTimeoutError too
            return f"timed out after {self.request_timeout_s:g} s" + (
                f" ({message})" if message else ""
            )
        return message or type(exc).__name__

    async def _put(self, session: Any, enabled: bool) -> bool:
        """One PUT to the agent; True when it confirmed. Failures are logged and counted, never
        raised."""
        import aiohttp

        body: dict[str, Any] = {"ProtectionEnabled": enabled}
        if enabled:
            body["ExpiresInMinutes"] = self.expires_minutes
        what = "on" if enabled else "off"
        try:
            async with session.put(self.url, json=body) as response:
                status, text = response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.metrics.protection_error()
            log.warning(
                "ECS task scale-in protection: turning it %s failed: %s (retrying)",
                what,
                self._failure_reason(exc),
            )
            return False
        try:
            answer = json.loads(text) if text else {}
        except ValueError:
            answer = {}
        problem = answer.get("failure") or answer.get("error") if isinstance(answer, dict) else None
        if 200 <= status < 300 and not problem:
            return True
        self.metrics.protection_error()
        log.warning(
            "ECS task scale-in protection: the agent refused to turn it %s: HTTP %d %s (retrying)",
            what,
            status,
            json.dumps(problem) if problem else text[:200],
        )
        return False
