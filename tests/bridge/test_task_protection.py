"""ECS task scale-in protection (`bridge.task_protection`) against a stand-in of the ECS agent's
endpoint on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from bridge.task_protection import STATE_PATH, TaskProtection
from contracts.bridge_env import BridgeEnvError, BridgeEnvironment
from tests.bridge.bridge_testkit import (
    LIVENESS_S,
    PCM_CHUNK,
    append,
    event,
    open_stream,
    recv_event,
    running_bridge,
)
from voice_devtools.local.fake_vllm import FakeVllm

#: The path prefix ECS_AGENT_URI carries (the agent's own form is http://169.254.170.2/api/<task
#: id>).
AGENT_PREFIX = "/api/task-0123"
ON = {"ProtectionEnabled": True, "ExpiresInMinutes": 10}
OFF = {"ProtectionEnabled": False}


class FakeAgent:
    """The ECS agent's task-protection endpoint on 127.0.0.1: records each PUT's JSON body and when
    it came.

    `status` (and a `{"error": ...}` body when not 200) and `hang` (never answer) shape the answers.
    """

    def __init__(self, status: int = 200, hang: bool = False) -> None:
        self.status = status
        self.hang = hang
        self.puts: list[dict[str, Any]] = []
        self.times: list[float] = []
        self._arrived = asyncio.Condition()
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{AGENT_PREFIX}"

    async def _state(self, request: web.Request) -> web.Response:
        body = await request.json()
        async with self._arrived:
            self.puts.append(body)
            self.times.append(time.monotonic())
            self._arrived.notify_all()
        if self.hang:
            await asyncio.sleep(3600)
        if self.status != 200:
            return web.json_response(
                {"error": {"Code": "AccessDeniedException", "Message": "denied"}},
                status=self.status,
            )
        return web.json_response(
            {
                "protection": {
                    "ProtectionEnabled": body["ProtectionEnabled"],
                    "TaskArn": "arn:aws:ecs:eu-west-1:111122223333:task/c/0123",
                }
            }
        )

    async def wait_for(self, count: int, timeout: float = 3.0) -> list[dict[str, Any]]:
        """The PUTs once at least `count` arrived (TimeoutError otherwise)."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: len(self.puts) >= count)
        return list(self.puts)

    async def __aenter__(self) -> FakeAgent:
        app = web.Application()
        app.router.add_put(AGENT_PREFIX + STATE_PATH, self._state)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop listening (idempotent)."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()


@contextlib.asynccontextmanager
async def bridge_on_ecs(
    agent_uri: str, *, grace_s: float = 0.3, renew_after_s: float | None = None, **overrides: Any
) -> AsyncIterator[tuple[Any, FakeVllm]]:
    """A bridge with ECS_AGENT_URI=`agent_uri` in front of a fake vLLM (a delta per append)."""
    async with (
        FakeVllm(generate=True) as vllm,
        running_bridge(
            vllm.port,
            ecs_agent_uri=agent_uri,
            task_protection_grace_s=grace_s,
            **overrides,
        ) as bridge,
    ):
        if renew_after_s is not None:
            bridge.protection.renew_after_s = renew_after_s
        yield bridge, vllm


async def live_stream(bridge: Any):
    """A client past session.created, session.update and a commit, with one append relayed (delta
    back)."""
    ws = await open_stream(bridge)
    assert (await recv_event(ws))["type"] == "session.created"
    await ws.send(event("session.update", model="anything"))
    await ws.send(event("input_audio_buffer.commit"))
    await ws.send(append(PCM_CHUNK * 5))  # 0.64 s: vLLM's first delta needs ~0.6 s of audio
    assert (await recv_event(ws))["type"] == "transcription.delta"
    return ws


async def until(condition: Any, timeout: float = 2.0) -> None:
    """Wait until `condition()` is true (the agent's answer reaches the bridge after the PUT is
    recorded)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def test_on_at_the_first_stream_kept_while_any_is_live_off_after_the_last_and_its_grace(
    run, caplog
):
    async def scenario():
        async with FakeAgent() as agent, bridge_on_ecs(agent.uri, grace_s=0.3) as (bridge, _):
            await asyncio.sleep(0.2)
            assert agent.puts == []  # nothing while idle at start
            first = await live_stream(bridge)
            assert await agent.wait_for(1) == [ON]
            await until(lambda: bridge.protection.enabled)
            assert bridge.metrics.task_protected
            second = await live_stream(bridge)
            await first.close()
            await asyncio.sleep(0.6)  # longer than the grace: one stream is still live
            assert agent.puts == [ON]
            await second.close()
            closed_at = time.monotonic()
            assert await agent.wait_for(2) == [ON, OFF]
            assert (
                agent.times[1] - closed_at >= 0.25
            )  # not before the grace (0.3 s, less the close's own time)
            await until(lambda: not bridge.protection.enabled)
            assert not bridge.metrics.task_protected
            line = _flushed(bridge)
            assert (line["TaskProtected"], line["TaskProtectionErrors"]) == (1, 0)

    run(scenario())
    assert "ECS task scale-in protection on for 10 min (1 live stream)" in caplog.messages


def test_a_new_stream_within_the_grace_keeps_protection_on_without_a_request(run):
    async def scenario():
        async with FakeAgent() as agent, bridge_on_ecs(agent.uri, grace_s=0.5) as (bridge, _):
            for _ in range(3):  # churn: each stream ends and the next starts within the grace
                ws = await live_stream(bridge)
                await ws.close()
                await asyncio.sleep(0.1)
            assert agent.puts == [ON]
            assert await agent.wait_for(2) == [ON, OFF]

    run(scenario())


def test_protection_is_renewed_while_a_stream_stays_live(run):
    async def scenario():
        async with FakeAgent() as agent, bridge_on_ecs(agent.uri, renew_after_s=0.2) as (bridge, _):
            ws = await live_stream(bridge)
            puts = await agent.wait_for(4, timeout=3)
            assert puts[:4] == [ON, ON, ON, ON]
            gaps = [
                later - earlier
                for earlier, later in zip(agent.times, agent.times[1:4], strict=False)
            ]
            assert all(0.15 <= gap < 1.0 for gap in gaps), gaps
            await ws.send(append())  # the stream is unaffected
            assert (await recv_event(ws))["type"] == "transcription.delta"
            await ws.close()
            assert (await agent.wait_for(len(agent.puts) + 1))[-1] == OFF

    run(scenario())


@pytest.mark.parametrize("agent_state", ["down", "refusing", "hanging"])
def test_an_agent_that_is_down_refuses_or_hangs_never_hurts_a_stream(run, caplog, agent_state):
    async def scenario():
        async with FakeAgent(status=403, hang=agent_state == "hanging") as agent:
            uri = agent.uri
            if agent_state == "down":
                await agent.__aexit__()  # nothing listens on the port any more
            async with bridge_on_ecs(uri) as (bridge, _):
                bridge.protection.retry_delays_s = (0.05,)
                ws = await live_stream(bridge)
                if (
                    agent_state == "hanging"
                ):  # the agent's request stays outstanding all through the appends
                    bridge.protection.request_timeout_s = 600.0
                for _ in range(5):  # appends and their deltas go on while the agent fails or hangs
                    await ws.send(append())
                    assert (await recv_event(ws, timeout=LIVENESS_S))[
                        "type"
                    ] == "transcription.delta"
                    await asyncio.sleep(0.05)
                if agent_state != "hanging":
                    assert bridge.metrics.protection_errors >= 2  # retried
                    assert not bridge.protection.enabled
                else:
                    assert (
                        len(agent.puts) == 1
                    )  # the request is still outstanding: the stream never waited on it
                await ws.close()

    run(scenario())
    if agent_state != "hanging":
        assert "ECS task scale-in protection: " in caplog.text and "(retrying)" in caplog.text
    if agent_state == "refusing":
        assert "the agent refused to turn it on: HTTP 403" in caplog.text


def test_a_request_that_hangs_times_out_and_is_retried(caplog):
    async def scenario():
        async with FakeAgent(hang=True) as agent:
            metrics = _Recorder()
            protection = TaskProtection(
                agent.uri,
                metrics,
                expires_minutes=5,
                grace_s=0,
                request_timeout_s=0.2,
                retry_delays_s=(0.1,),
            )
            task = asyncio.ensure_future(protection.run())
            protection.streams_changed(1)
            await agent.wait_for(2, timeout=2)
            assert agent.puts[:2] == [{"ProtectionEnabled": True, "ExpiresInMinutes": 5}] * 2
            assert metrics.errors >= 1 and metrics.changes == []
            agent.hang = False
            await until(lambda: metrics.changes == [True])
            protection.streams_changed(0)
            await until(lambda: metrics.changes == [True, False])
            assert agent.puts[-1] == OFF
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert failures and all(
        line == "ECS task scale-in protection: turning it on failed: timed out after 0.2 s "
        "(retrying)"
        for line in failures
    ), failures


class _SilentFailure:
    """An aiohttp session stand-in whose request raises an aiohttp error with an empty message."""

    def put(self, url: str, json: Any) -> Any:
        import aiohttp

        raise aiohttp.ClientError()


def test_a_failure_without_a_message_is_logged_with_its_type(caplog):
    protection = TaskProtection(
        "http://127.0.0.1:9/api/x", metrics := _Recorder(), expires_minutes=5, grace_s=0
    )
    assert asyncio.run(protection._put(_SilentFailure(), False)) is False
    assert metrics.errors == 1
    assert (
        "ECS task scale-in protection: turning it off failed: ClientError (retrying)"
        in caplog.messages
    )


def test_without_ecs_agent_uri_nothing_is_requested_and_no_protection_metrics_are_written(run):
    async def scenario():
        async with FakeVllm(generate=True) as vllm, running_bridge(vllm.port) as bridge:
            assert bridge.protection is None
            ws = await live_stream(bridge)
            await ws.close()
            line = _flushed(bridge)
            assert "TaskProtected" not in line and "TaskProtectionErrors" not in line

    run(scenario())


def test_protection_settings_are_read_and_checked():
    settings = BridgeEnvironment.from_env(
        {
            "ECS_AGENT_URI": "http://169.254.170.2/api/abc",
            "TASK_PROTECTION_MINUTES": "30",
            "TASK_PROTECTION_GRACE_S": "5",
        }
    )
    assert (
        settings.ecs_agent_uri,
        settings.task_protection_minutes,
        settings.task_protection_grace_s,
    ) == ("http://169.254.170.2/api/abc", 30, 5.0)
    assert BridgeEnvironment.from_env({}).ecs_agent_uri is None
    assert (
        TaskProtection(
            "http://169.254.170.2/api/abc/", _Recorder(), expires_minutes=10, grace_s=1
        ).url
        == "http://169.254.170.2/api/abc/task-protection/v1/state"
    )
    for env, message in (
        ({"TASK_PROTECTION_MINUTES": "0"}, "TASK_PROTECTION_MINUTES='0' must be at least 1"),
        ({"TASK_PROTECTION_MINUTES": "2881"}, "TASK_PROTECTION_MINUTES=2881 must be at most 2880"),
        (
            {"ECS_AGENT_URI": "169.254.170.2/api"},
            "ECS_AGENT_URI='169.254.170.2/api' must be an http:// URL",
        ),
    ):
        with pytest.raises(BridgeEnvError) as info:
            BridgeEnvironment.from_env(env)
        assert str(info.value).startswith(message)


class _Recorder:
    def __init__(self) -> None:
        self.changes: list[bool] = []
        self.errors = 0

    def protection_changed(self, enabled: bool) -> None:
        self.changes.append(enabled)

    def protection_error(self) -> None:
        self.errors += 1


def _flushed(bridge: Any) -> dict[str, Any]:
    """The EMF line the bridge's metrics write now, parsed (stdout captured)."""
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        bridge.metrics.flush()
    (line,) = [json.loads(text) for text in out.getvalue().splitlines() if text.startswith("{")]
    return line
