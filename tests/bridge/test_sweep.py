"""services/bridge/sweep.py (the idle and stall clocks) through the bridge over real sockets on
127.0.0.1, in front of the fake vLLM: a client silent past IDLE_TIMEOUT_S is told `idle_timeout`, a
hung vLLM is told as `upstream_closed` (not as the client's idle timeout), and a quiet but alive
vLLM is left alone."""

from __future__ import annotations

import asyncio
import socket

from tests.bridge.bridge_testkit import (
    LIVENESS_S,
    append,
    closed_within,
    recv_event,
    running_bridge,
    started_stream,
)
from voice_devtools.local.fake_vllm import FakeVllm


# A client silent for longer than IDLE_TIMEOUT_S.
def test_silent_client_is_told_idle_timeout_and_vllm_session_ends(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, idle_timeout_s=0.4) as bridge:
            talker, talker_session = await started_stream(bridge, vllm, 0)
            silent, silent_session = await started_stream(bridge, vllm, 1)

            async def keep_talking() -> None:
                while True:
                    await talker.send(append())
                    await asyncio.sleep(0.1)

            # The talker keeps sending, every 0.1 s, until the checks are done: however long they
            # take on a loaded machine, it is never idle itself (the idle timeout is 0.4 s).
            talking = asyncio.create_task(keep_talking())
            try:
                error = await recv_event(silent)
                assert error["code"] == "idle_timeout"
                assert "0.4 s" in error["error"]
                assert await closed_within(silent, LIVENESS_S) == (1000, "idle_timeout")
                await silent_session.wait_closed(timeout=LIVENESS_S)
                # 8 appends, 0.1 s apart: the talker has talked for longer than the idle timeout.
                await talker_session.wait_for_event(
                    "input_audio_buffer.append", count=8, timeout=LIVENESS_S
                )
                # The talking client is untouched.
                assert not talker_session.closed.is_set()
                await talker_session.send_delta("still here")
                assert await recv_event(talker) == {
                    "type": "transcription.delta",
                    "delta": "still here",
                }
            finally:
                talking.cancel()

    run(scenario())


def test_hung_vllm_mid_stream_is_detected_and_the_client_told_upstream_closed_not_idle_timeout(run):
    # vLLM stops (SIGSTOP) while a client streams: the bridge's writes to vLLM back up, so the
    # bridge stops reading the client. The client is not idle; vLLM is stalled, and the client must
    # be told so.
    idle_s, stall_s = 0.5, 1.5

    async def keep_sending(ws) -> None:
        for _ in range(2000):  # bounded; blocks as soon as the bridge stops reading
            await ws.send(append())

    async def scenario():
        async with (
            FakeVllm() as vllm,
            running_bridge(vllm.port, idle_timeout_s=idle_s, upstream_stall_s=stall_s) as bridge_,
        ):
            ws, session = await started_stream(bridge_, vllm)
            (stream,) = bridge_._streams
            stream.upstream.transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
            )
            session.hang()
            sender = asyncio.create_task(keep_sending(ws))
            try:
                error = await recv_event(ws, timeout=stall_s + LIVENESS_S)
            finally:
                sender.cancel()
            assert error["code"] == "upstream_closed"
            assert f"{stall_s:g} s" in error["error"]
            code, _ = await closed_within(
                ws, LIVENESS_S
            )  # the client's side is still sending: close handshake
            assert code == 1011
            assert bridge_.metrics.upstream_errors == 1
            session.resume()  # SIGCONT: the fake sees that the bridge has dropped the connection
            await session.wait_closed(timeout=LIVENESS_S)
            assert bridge_.active_streams == 0

    run(scenario())


def test_quiet_but_alive_vllm_is_not_taken_for_a_hung_one(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, upstream_stall_s=0.4) as bridge_:
            ws, session = await started_stream(bridge_, vllm)
            vllm.silent = True  # answers no events, but its WebSocket layer answers pings
            for _ in range(12):  # 1.2 s, three times the stall limit
                await ws.send(append())
                await asyncio.sleep(0.1)
            await session.wait_for_event("input_audio_buffer.append", count=12)
            assert not session.closed.is_set()
            assert bridge_.metrics.upstream_errors == 0
            vllm.silent = False
            await session.send_delta("alive")
            assert await recv_event(ws) == {"type": "transcription.delta", "delta": "alive"}

    run(scenario())
