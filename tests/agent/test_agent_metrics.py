"""The bot's metrics against the contract the stack reads (contracts.agent_metrics), and its ECS
task scale-in protection against a loopback stand-in of the ECS agent's endpoint."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest
from websockets.asyncio.client import connect

from agent.metrics import ActiveSessionsReporter, MetricsSink
from agent.server import AgentServer, task_protection
from contracts import agent_metrics
from contracts.agent_env import AgentEnv
from tests.bridge.test_task_protection import FakeAgent

#: Upper bound on one scenario, seconds.
SCENARIO_TIMEOUT_S = 20.0
#: The metrics the stack's scaling and alarms read (tests/app/test_agent_stack.py asserts the same).
STACK_READS = {
    "ActiveSessions",
    "SessionsFailed",
    "VoiceToVoiceMs",
    "SttErrors",
    "LlmErrors",
    "TtsErrors",
}


def env(**overrides: Any) -> AgentEnv:
    values: dict[str, Any] = {
        "sonic_endpoint": "sonic-tts",
        "sonic_voice": "voice-1",
        "voxtral_url": "ws://127.0.0.1:1/x",
        "llm_url": "http://127.0.0.1:1/v1",
        "llm_model_id": "m",
        "host": "127.0.0.1",
        "port": 0,
        "max_sessions": 2,
    }
    return AgentEnv(**{**values, **overrides})


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def emitted(out: io.StringIO) -> dict[str, list[Any]]:
    """Metric name -> values written, checked against each line's EMF directive."""
    found: dict[str, list[Any]] = {}
    for line in lines(out):
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "VoiceAgent"
        assert directive["Dimensions"] == [["Deployment"]]
        assert line["Deployment"] == "test"
        for metric in directive["Metrics"]:
            assert metric["Unit"] == agent_metrics.METRICS[metric["Name"]]
            found.setdefault(metric["Name"], []).append(line[metric["Name"]])
    return found


def sink() -> tuple[MetricsSink, io.StringIO]:
    out = io.StringIO()
    return MetricsSink({"Deployment": "test"}, out=out, clock=lambda: 1_700_000_000.0), out


def test_a_name_outside_the_contract_is_refused():
    metrics, out = sink()
    with pytest.raises(ValueError, match=r"\['FailedSessions'\] are not in contracts"):
        metrics.count("FailedSessions", "s1")
    assert out.getvalue() == ""


def test_active_sessions_is_the_peak_of_each_interval_and_zero_when_idle():
    metrics, out = sink()
    reporter = ActiveSessionsReporter(metrics, 60.0)
    for live in (1, 2, 3, 2, 1):
        reporter.changed(live)
    assert reporter.report() == 3  # a session shorter than the interval still counts
    assert reporter.report() == 1  # the one still live
    reporter.changed(0)
    assert reporter.report() == 1  # it was live in this interval
    assert reporter.report() == 0  # every task writes every minute, idle ones too
    assert emitted(out) == {"ActiveSessions": [3, 1, 1, 0]}


def test_the_bot_writes_every_metric_the_stack_reads():
    """Each path of the bot that writes one of the stack's metrics, through its own code."""
    from pipecat.frames.frames import ErrorFrame

    from agent.session import AgentSession, Services, Turn

    metrics, out = sink()
    ActiveSessionsReporter(metrics, 60.0).report()
    metrics.count(agent_metrics.SESSIONS_FAILED, "s1")
    stt, llm, tts = object(), object(), object()
    services = Services(
        stt=stt,
        llm=llm,  # type: ignore[arg-type]
        tts_kwargs={},
        system_prompt="p",
    )
    session = AgentSession(object(), services, metrics, max_session_s=60, idle_s=10)
    session.tts = tts  # type: ignore[assignment]
    for processor in (stt, llm, tts, object()):
        session.stage_error(ErrorFrame(error="boom", processor=processor))  # type: ignore[arg-type]
    turn = Turn(
        1,
        speech_end=10.0,
        final_at=10.2,
        llm_started=10.25,
        llm_first_token=10.5,
        tts_started=10.55,
        sonic_first_audio=10.7,
        first_audio_sent=10.75,
    )
    session.state.report(turn)
    found = emitted(out)
    assert set(found) >= STACK_READS
    assert (found["SttErrors"], found["LlmErrors"], found["TtsErrors"]) == ([1], [1], [1])
    assert found["VoiceToVoiceMs"] == [750.0]
    assert (
        found["TimeToFinalTranscriptMs"],
        found["LlmFirstTokenMs"],
        found["SonicFirstAudioMs"],
    ) == ([200.0], [250.0], [150.0])
    errors = [line for line in lines(out) if "SttErrors" in line]
    assert errors[0]["Error"] == "boom" and errors[0]["SessionId"] == session.session_id


async def _protected_session_scenario() -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """One session held open at its start (its services are being built), then failing."""
    metrics, out = sink()
    release = asyncio.Event()
    building = asyncio.Event()

    async def make_services() -> Any:
        building.set()
        await release.wait()
        raise RuntimeError("no Voxtral")

    async with FakeAgent() as ecs_agent:
        bot_env = env(ecs_agent_uri=ecs_agent.uri, task_protection_minutes=31)
        protection = task_protection(bot_env, metrics)
        assert protection is not None
        protection.grace_s = 0.05  # type: ignore[attr-defined]
        server = await AgentServer(
            bot_env, make_services, metrics, protection=protection, active_interval_s=3600
        ).start()
        try:
            async with connect(f"ws://127.0.0.1:{server.port}/") as page:
                await asyncio.wait_for(building.wait(), 5)
                assert await ecs_agent.wait_for(1) == [
                    {"ProtectionEnabled": True, "ExpiresInMinutes": 31}
                ]
                release.set()
                error = json.loads(await asyncio.wait_for(page.recv(), 5))
                assert error == {"type": "error", "message": "no Voxtral"}
            puts = await ecs_agent.wait_for(2)
            server.active.report()
        finally:
            await server.stop(drain_s=0)
    return puts, emitted(out)


def test_a_live_session_protects_the_task_and_its_end_releases_it():
    puts, found = asyncio.run(asyncio.wait_for(_protected_session_scenario(), SCENARIO_TIMEOUT_S))
    assert puts == [
        {"ProtectionEnabled": True, "ExpiresInMinutes": 31},
        {"ProtectionEnabled": False},
    ]
    assert found["SessionsFailed"] == [1]
    assert found["ActiveSessions"] == [1]  # the failed session was live in the interval


def test_no_protection_off_ecs():
    metrics, _ = sink()
    assert task_protection(env(), metrics) is None


def test_task_protection_minutes_from_the_environment():
    base = {
        "AGENT_SONIC_ENDPOINT": "s",
        "AGENT_SONIC_VOICE": "v",
        "AGENT_VOXTRAL_URL": "ws://x",
        "AGENT_LLM_URL": "http://l/v1",
    }
    read = AgentEnv.from_env(
        {**base, "TASK_PROTECTION_MINUTES": "31", "ECS_AGENT_URI": "http://169.254.170.2/api/t"}
    )
    assert (read.protection_minutes, read.ecs_agent_uri) == (31, "http://169.254.170.2/api/t")
    assert AgentEnv.from_env(base).protection_minutes == 10
    with pytest.raises(ValueError, match="TASK_PROTECTION_MINUTES=0 must be 1 to 2880"):
        AgentEnv.from_env({**base, "TASK_PROTECTION_MINUTES": "0"})
