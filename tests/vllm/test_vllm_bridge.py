"""The bridge (services/bridge) in front of vLLM's real realtime server: its protocol and fault
handling that need no fault knobs. What the client gets through the bridge is what vLLM sends (the
same scripted sessions as the contract test), the bridge's own errors and limits come before vLLM's,
and vLLM frees a session the client dropped."""

from __future__ import annotations

import asyncio
import re

import pytest

from bridge.server import KV_CACHE_GROUPS, STREAM_PATH
from tests.bridge.bridge_testkit import running_bridge
from tests.vllm import realtime_script as script
from voice_devtools.local import real_vllm

pytestmark = pytest.mark.vllm


def bridge_url(bridge) -> str:
    return f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}"


def gauge(text: str, name: str) -> float:
    """The sum of a gauge's samples in a Prometheus text."""
    return sum(
        float(value)
        for value in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)
    )


async def vllm_idle(vllm, timeout: float = 30.0) -> dict[str, float]:
    """Wait until vLLM runs no request and holds no WebSocket; return those gauges."""
    names = (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:websocket_connections_active",
    )
    async with asyncio.timeout(timeout):
        while True:
            _, text = await asyncio.to_thread(vllm.get, "/metrics")
            values = {name: gauge(text, name) for name in names}
            if not any(values.values()):
                return values
            await asyncio.sleep(0.1)


def test_a_session_through_the_bridge_is_the_real_servers_session(vllm, run):
    async def scenario():
        direct = await script.lifecycle(vllm.url, vllm.model)
        async with running_bridge(vllm.port) as bridge:
            relayed = await script.lifecycle(
                bridge_url(bridge), "any-name"
            )  # the bridge names the served model
        return direct, relayed

    direct, relayed = run(scenario())
    assert relayed.entries == direct.entries
    done = relayed.done()
    assert done["text"] == "".join(relayed.deltas()) and done["usage"]["completion_tokens"] == len(
        relayed.deltas()
    )
    assert relayed.deltas() and any(relayed.deltas())  # the tiny model says something visible


def test_a_second_utterance_through_the_bridge_starts_from_zero(vllm, run):
    async def scenario():
        async with running_bridge(vllm.port) as bridge:
            return await script.second_utterance(bridge_url(bridge), "any-name")

    relayed = run(scenario())
    first, second = relayed.done(0), relayed.done(1)
    assert first["usage"] == second["usage"]
    assert second["text"] == "".join(relayed.deltas()[len(relayed.deltas()) // 2 :])


def test_every_in_band_error_reaches_the_client_and_the_stream_goes_on(vllm, run):
    async def scenario():
        direct = await script.errors(vllm.url, vllm.model)
        async with running_bridge(vllm.port) as bridge:
            relayed = await script.errors(
                bridge_url(bridge), "any-name", ("invalid_event", "model_not_found")
            )
        return direct, relayed

    direct, relayed = run(scenario())
    codes = [e["code"] for e in direct.events if e["type"] == "error"]
    assert codes == [code for _, code in script.ERRORS]  # vLLM's own codes, in order
    relayed_codes = [e["code"] for e in relayed.events if e["type"] == "error"]
    # The bridge names the served model in every session.update, so the two model errors cannot
    # happen behind it; every other code is vLLM's (the bridge answers some of them itself, with the
    # same code, before vLLM).
    assert relayed_codes == [
        code for code in codes if code not in ("invalid_event", "model_not_found")
    ]
    assert relayed.count("transcription.done") == 1  # the stream went on after every error


def test_a_client_that_drops_mid_generation_frees_vllms_session(vllm, run):
    async def scenario():
        async with running_bridge(vllm.port) as bridge:
            t = await script.open_session(bridge_url(bridge))
            await t.send(script.event("session.update", model="any-name"))
            await t.send(script.event("input_audio_buffer.commit"))
            await t.send(script.append(12))
            await t.until(script.count_is("transcription.delta", 1))
            t.ws.transport.abort()  # TCP gone, no close frame
            idle = await vllm_idle(vllm)
            async with asyncio.timeout(10):
                while bridge.active_streams:
                    await asyncio.sleep(0.05)
            return idle

    assert run(scenario()) == {
        "vllm:num_requests_running": 0,
        "vllm:num_requests_waiting": 0,
        "vllm:websocket_connections_active": 0,
    }


def test_a_client_that_closes_mid_generation_frees_vllms_session(vllm, run):
    async def scenario():
        async with running_bridge(vllm.port) as bridge:
            t = await script.open_session(bridge_url(bridge))
            await t.send(script.event("session.update", model="any-name"))
            await t.send(script.event("input_audio_buffer.commit"))
            await t.send(script.append(12))
            await t.until(script.count_is("transcription.delta", 1))
            await t.ws.close()
            return await vllm_idle(vllm)

    assert not any(run(scenario()).values())


def test_the_session_limit_ends_a_stream_before_vllms_max_model_len_and_vllm_lives_on(vllm, run):
    # (160 - 49) tokens x 0.9 = 99.9 tokens = 7.99 s of audio: nine appends of 10 tokens pass, the
    # tenth is refused.
    async def scenario():
        async with running_bridge(vllm.port, max_model_len=real_vllm.MAX_MODEL_LEN) as bridge:
            t = await script.open_session(bridge_url(bridge))
            await t.send(script.event("session.update", model="any-name"))
            await t.send(script.event("input_audio_buffer.commit"))
            for _ in range(10):
                await t.send(script.append(10))
            await t.closed()
        return t, await vllm_idle(vllm)

    t, idle = run(scenario())
    (limit,) = [e for e in t.events if e["type"] == "error"]
    assert limit["code"] == "session_limit" and limit["audio_s"] == pytest.approx(7.2)
    assert limit["limit_s"] == pytest.approx((real_vllm.MAX_MODEL_LEN - 49) * 0.9 / 12.5, abs=0.001)
    assert t.close_code == 1000 and t.count("transcription.done") == 0
    assert not any(idle.values())
    assert vllm.get("/health")[0] == 200  # vLLM's engine never saw a generation past max_model_len


def test_the_kv_cache_cap_is_read_from_the_real_metrics_in_vllms_block_size(vllm, run):
    # 83 blocks of 16 tokens per stream (one L4 at 45000 tokens, constructs_lib/facts/capacity.py)
    # on vLLM's CPU build: 2048 blocks of 128 tokens; ceil(83 x 16 / 128) + one per KV-cache group =
    # 13 blocks, 2048 // 13 = 157 streams.
    async def scenario():
        async with running_bridge(vllm.port, max_streams=500, kv_blocks_per_stream=83) as bridge:
            return (
                bridge.health.num_gpu_blocks,
                bridge.health.block_size,
                bridge.metrics.kv_cache_streams,
                bridge.stream_cap,
            )

    assert run(scenario()) == (2048, 128, 2048 // (-(-83 * 16 // 128) + KV_CACHE_GROUPS), 157)
