"""The fake vLLM's generation, as measured against vLLM 0.31.0's real server (tests/vllm runs the
same sessions against both; these fast checks keep each row true without starting vLLM)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import urllib.request

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voice_devtools.local.fake_vllm import PROMPT_TOKENS, FakeVllm, parse_final


def append(tokens: float) -> str:
    pcm = bytes(2 * int(tokens * 1280))
    return json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
    )


def event(kind: str, **fields) -> str:
    return json.dumps({"type": kind, **fields})


async def received(ws, seconds: float = 0.2) -> list[dict]:
    """What the fake sent within `seconds`."""
    events = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                events.append(json.loads(await ws.recv()))
    except (TimeoutError, ConnectionClosed):
        pass
    return events


def kinds(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_deltas_come_once_0_6_s_is_buffered_then_per_80_ms_and_ten_after_the_audio():
    async def scenario():
        async with FakeVllm(generate=True, deltas=("a", "")) as vllm, connect(vllm.url) as ws:
            await ws.recv()
            await ws.send(event("session.update", model=vllm.model))
            await ws.send(event("input_audio_buffer.commit"))
            for _ in range(7):
                await ws.send(append(1))
            before = await received(ws)  # 0.56 s: nothing yet
            await ws.send(append(1))
            first = await received(ws)  # 0.64 s: the first delta
            for _ in range(12):
                await ws.send(append(1))
            during = await received(ws)
            await ws.send(event("input_audio_buffer.commit", final=True))
            return before, first, during, await received(ws)

    before, first, during, after = asyncio.run(scenario())
    assert (before, kinds(first), kinds(during)) == (
        [],
        ["transcription.delta"],
        ["transcription.delta"] * 12,
    )
    assert kinds(after) == ["transcription.delta"] * 17 + ["transcription.done"]
    done = after[-1]
    assert done["text"] == "a" * 15  # "a" and "" round-robin over 30 deltas: empty deltas too
    assert done["usage"] == {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": 30,
        "total_tokens": 69,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def test_a_second_utterance_starts_from_zero_and_final_no_is_false():
    async def scenario():
        async with FakeVllm(generate=True, deltas=("x",)) as vllm, connect(vllm.url) as ws:
            await ws.recv()
            await ws.send(event("session.update", model=vllm.model))
            dones = []
            for _ in range(2):
                await ws.send(event("input_audio_buffer.commit"))
                await ws.send(append(10))
                await ws.send(event("input_audio_buffer.commit", final="no"))  # false: nothing ends
                assert "transcription.done" not in kinds(await received(ws))
                await ws.send(event("input_audio_buffer.commit", final="maybe"))
                (refused,) = [e for e in await received(ws) if e["type"] == "error"]
                assert refused["code"] == "processing_error" and "valid boolean" in refused["error"]
                await ws.send(event("input_audio_buffer.commit", final=True))
                dones += [e for e in await received(ws) if e["type"] == "transcription.done"]
            return dones

    first, second = asyncio.run(scenario())
    assert (
        first == second and first["text"] == "x" * 20 and first["usage"]["completion_tokens"] == 20
    )
    assert (parse_final("No"), parse_final("on"), parse_final(1), parse_final(False)) == (
        False,
        True,
        True,
        False,
    )
    with pytest.raises(ValueError, match="valid boolean"):
        parse_final(2)


def test_a_binary_frame_drops_the_connection_and_stop_closes_with_1012():
    async def scenario():
        async with FakeVllm() as vllm:
            async with connect(vllm.url) as ws:
                await ws.recv()
                await ws.send(b"\x00")
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(ws.recv(), 2)
                dropped = ws.close_code  # no close frame: 1006
            ws = await connect(vllm.url)
            await ws.recv()
            await vllm.stop()
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 2)
            return dropped, ws.close_code

    assert asyncio.run(scenario()) == (1006, 1012)


def test_a_generation_past_max_model_len_kills_the_engine_and_every_session():
    async def scenario():
        async with FakeVllm(generate=True, max_model_len=60) as vllm:
            other = await connect(vllm.url)
            await other.recv()
            ws = await connect(vllm.url)
            await ws.recv()
            await ws.send(event("session.update", model=vllm.model))
            await ws.send(event("input_audio_buffer.commit"))
            await ws.send(append(40))  # 33 deltas due, 21 fit (60 - 39)
            events = await received(ws, 1.0)
            await asyncio.wait_for(other.wait_closed(), 2)
            await asyncio.wait_for(vllm.dying, 5)  # the server stopped, as vLLM exits
            return events, ws.close_code, other.close_code, vllm.open_sessions()

    events, code, other_code, still_open = asyncio.run(scenario())
    assert kinds(events) == ["transcription.delta"] * 21 + ["error"]
    assert events[-1]["code"] == "processing_error" and "EngineCore" in events[-1]["error"]
    assert (code, other_code, still_open) == (1012, 1012, [])


def test_metrics_are_the_whole_prometheus_text_with_the_configured_cache():
    async def scenario():
        async with FakeVllm(num_gpu_blocks=669, block_size=16) as vllm:
            url = f"http://127.0.0.1:{vllm.port}/metrics"
            return await asyncio.to_thread(
                lambda: urllib.request.urlopen(url, timeout=5).read().decode()
            )

    text = asyncio.run(scenario())
    info = re.search(r"^vllm:cache_config_info\{([^}]*)\}", text, re.M).group(1)
    assert 'block_size="16"' in info and 'num_gpu_blocks="669"' in info
    assert "vllm:num_requests_running" in text and "vllm:websocket_connections_active" in text
    assert not re.search(r"@[A-Z_]+@", text)  # every placeholder filled
