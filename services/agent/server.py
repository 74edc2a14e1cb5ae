"""The bot's server: ``GET /health`` and one conversation (:class:`~agent.session.AgentSession`)
per WebSocket, at most ``AGENT_MAX_SESSIONS`` at a time (the wire protocol: :mod:`agent.protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from agent.metrics import ActiveSessionsReporter, MetricsSink
from agent.protocol import HEALTH_PATH, MAX_MESSAGE_BYTES, OUTPUT_SAMPLE_RATE_HZ
from agent.session import AgentSession, Services
from contracts.agent_env import AgentEnv
from contracts.agent_metrics import (
    ACTIVE_SESSIONS_INTERVAL_S,
    SESSIONS,
    SESSIONS_FAILED,
    SESSIONS_REFUSED,
)

logger = logging.getLogger("agent")

SESSION_PATHS = ("/", "/agent")
"""Where a page opens its conversation."""

DRAIN_S = 20.0
"""Seconds running conversations may go on after SIGTERM before they are cancelled: ECS sends
SIGKILL 30 s after SIGTERM by default (task definition ``stopTimeout``)."""

TRY_AGAIN_LATER = 1013
"""WebSocket close code for a bot that is full (RFC 6455 registry: "Try Again Later")."""


class LiveSessionsWatcher(Protocol):
    """What follows the number of live sessions (the bridge's TaskProtection has this method)."""

    def streams_changed(self, live: int) -> None: ...

    async def run(self) -> None: ...


class AgentServer:
    """Serves conversations.

    Args:
        env: the configuration.
        make_services: builds one session's services (:func:`services_factory`).
        metrics: the EMF sink.
        protection: ECS task scale-in protection (:func:`task_protection`), on while any session
            is live; None off ECS.
        active_interval_s: seconds between two ``ActiveSessions`` values.
    """

    def __init__(
        self,
        env: AgentEnv,
        make_services: Callable[[], Awaitable[Services]],
        metrics: MetricsSink,
        *,
        protection: LiveSessionsWatcher | None = None,
        active_interval_s: float = ACTIVE_SESSIONS_INTERVAL_S,
    ) -> None:
        self.env = env
        self.make_services = make_services
        self.metrics = metrics
        self.protection = protection
        self.active = ActiveSessionsReporter(metrics, active_interval_s)
        self.sessions: set[AgentSession] = set()
        self._starting = 0
        self.server: Server | None = None
        self._background: list[asyncio.Task[None]] = []

    @property
    def busy(self) -> int:
        return len(self.sessions) + self._starting

    def _changed(self) -> None:
        """The number of live sessions (starting ones included) changed."""
        self.active.changed(self.busy)
        if self.protection is not None:
            self.protection.streams_changed(self.busy)

    async def process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == HEALTH_PATH:
            return _json(
                connection,
                http.HTTPStatus.OK,
                {"status": "ok", "sessions": self.busy, "max_sessions": self.env.max_sessions},
            )
        if path not in SESSION_PATHS:
            return _json(
                connection,
                http.HTTPStatus.NOT_FOUND,
                {"error": f"no route {path}; open a WebSocket at / (GET {HEALTH_PATH} for health)"},
            )
        if self.busy >= self.env.max_sessions:
            self.metrics.count(SESSIONS_REFUSED, "")
            return _json(
                connection,
                http.HTTPStatus.SERVICE_UNAVAILABLE,
                {
                    "error": f"all {self.env.max_sessions} conversations of this bot are in use; "
                    "try again in a moment"
                },
            )
        return None

    async def handle(self, websocket: ServerConnection) -> None:
        if self.busy >= self.env.max_sessions:  # two handshakes raced for the last slot
            await websocket.close(TRY_AGAIN_LATER, "the bot is full")
            return
        self._starting += 1
        self._changed()
        session: AgentSession | None = None
        try:
            services = await self.make_services()
            session = AgentSession(
                websocket,
                services,
                self.metrics,
                max_session_s=self.env.max_session_s,
                idle_s=self.env.idle_s,
            )
            self._starting -= 1
            self.sessions.add(session)
            self.metrics.count(SESSIONS, session.session_id)
            logger.info(
                "session %s started (%d of %d)",
                session.session_id,
                self.busy,
                self.env.max_sessions,
            )
            await session.run()
            logger.info(
                "session %s ended: %s (interruptions %d)",
                session.session_id,
                session.end_reason,
                session.state.interruptions,
            )
        except Exception as error:
            logger.exception("session failed")
            self.metrics.count(SESSIONS_FAILED, session.session_id if session else "")
            with contextlib.suppress(Exception):
                await websocket.send(json.dumps({"type": "error", "message": str(error)}))
        finally:
            if session is None:
                self._starting -= 1
            else:
                self.sessions.discard(session)
            self._changed()
            await websocket.close()

    async def start(self) -> AgentServer:
        self.server = await serve(
            self.handle,
            self.env.host,
            self.env.port,
            process_request=self.process_request,
            max_size=MAX_MESSAGE_BYTES,
            compression=None,
        )
        self._background = [asyncio.ensure_future(self.active.run())]
        if self.protection is not None:
            self._background.append(asyncio.ensure_future(self.protection.run()))
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    async def stop(self, drain_s: float = DRAIN_S) -> None:
        """Refuse new conversations, let running ones go on for ``drain_s``, then end them."""
        if self.server is None:
            return
        self.server.close(close_connections=False)
        deadline = asyncio.get_running_loop().time() + drain_s
        while self.sessions and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        self.server.close(close_connections=True)
        await self.server.wait_closed()
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _json(connection: ServerConnection, status: http.HTTPStatus, body: dict[str, Any]) -> Response:
    response = connection.respond(status, json.dumps(body) + "\n")
    response.headers["Content-Type"] = "application/json"
    return response


def services_factory(env: AgentEnv) -> Callable[[], Awaitable[Services]]:
    """What builds one session's services from ``env``: Voxtral (SageMaker or the ECS target,
    its bearer token read from Secrets Manager per session, so a rotated token is picked up),
    the LLM, Sonic."""
    from agent.llm import BedrockConverseLLM, bedrock_client, make_llm
    from voice_client.frameworks.pipecat_voxtral import VoxtralSTTService
    from voice_client.frameworks.targets import SonicTarget, VoxtralTarget
    from voice_client.realtime.auth import BearerToken

    bedrock = None if env.llm_url else bedrock_client(env.region, env.bedrock_runtime_url)
    sonic = SonicTarget(
        env.sonic_endpoint, region=env.region, endpoint_url=env.sagemaker_runtime_url
    )

    async def token() -> BearerToken | None:
        if env.voxtral_token_secret_arn is None:
            return None
        import boto3

        def read() -> str:
            client = boto3.client("secretsmanager", region_name=env.region)
            return client.get_secret_value(SecretId=env.voxtral_token_secret_arn)["SecretString"]

        return BearerToken(await asyncio.to_thread(read), env.voxtral_token_secret_arn)

    async def make() -> Services:
        if env.voxtral_url is not None:
            voxtral = VoxtralTarget(url=env.voxtral_url, token=await token())
        else:
            voxtral = VoxtralTarget(
                endpoint_name=env.voxtral_endpoint,
                region=env.region,
                endpoint_url=env.sagemaker_runtime_http2_url,
            )
        if bedrock is not None:
            assert env.llm_model_id is not None
            llm = BedrockConverseLLM(model_id=env.llm_model_id, client=bedrock)
        else:
            llm = make_llm(
                model_id=env.llm_model_id, url=env.llm_url, region=env.region, bedrock_url=None
            )
        return Services(
            stt=VoxtralSTTService(target=voxtral),
            llm=llm,
            tts_kwargs={
                "target": sonic,
                "voice_id": env.sonic_voice,
                "language": env.language,
                "sample_rate": OUTPUT_SAMPLE_RATE_HZ,
            },
            system_prompt=env.system_prompt,
            greeting=env.greeting,
        )

    return make


#: Seconds without a live session before protection is released: a page reconnecting does not
#: make it flap (the bridge's default TASK_PROTECTION_GRACE_S).
TASK_PROTECTION_GRACE_S = 10.0


def task_protection(env: AgentEnv, metrics: MetricsSink) -> LiveSessionsWatcher | None:
    """ECS task scale-in protection while any session is live, released when none is: the bridge's
    :class:`bridge.task_protection.TaskProtection` (the image copies that module), on
    ``ECS_AGENT_URI`` with ``TASK_PROTECTION_MINUTES``; None off ECS (no agent URI)."""
    if env.ecs_agent_uri is None:
        return None
    from bridge.task_protection import TaskProtection

    return TaskProtection(
        env.ecs_agent_uri,
        metrics,
        expires_minutes=env.protection_minutes,
        grace_s=TASK_PROTECTION_GRACE_S,
    )
