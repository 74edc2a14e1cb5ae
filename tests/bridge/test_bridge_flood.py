"""A client that floods the bridge must not take the event loop, memory or `/ping` from everyone else.

Real sockets on 127.0.0.1; the flooding client writes raw masked WebSocket frames to its transport.
"""

from __future__ import annotations

import asyncio
import json
import socket

from websockets.asyncio.client import connect
from websockets.frames import Frame, Opcode

from bridge import server
from bridge.health import http_get
from bridge.server import FRAME_BUDGET, STREAM_PATH, WRITE_LIMIT_BYTES
from tests.bridge.bridge_testkit import ping_status, recv_event, running_bridge, started_stream
from voicectl.local.fake_vllm import FakeVllm


def frames(payload: bytes, count: int) -> bytes:
    """`count` masked client text frames carrying `payload`, back to back (one TCP write)."""
    return b"".join(Frame(Opcode.TEXT, payload).serialize(mask=True) for _ in range(count))


def test_malformed_flood_from_a_client_that_does_not_read_is_held_back_and_ping_still_answers(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            # A small receive buffer on the client's socket, so that the bridge's replies back up quickly.
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", bridge.port))
            sock.setblocking(False)
            ws = await connect(f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}", sock=sock, compression=None)
            assert (await recv_event(ws))["type"] == "session.created"
            await ws.send(json.dumps({"type": "session.update", "model": vllm.model}))
            session = await vllm.wait_for_session()
            await session.wait_for_event("session.update")
            (stream,) = bridge._streams
            # And a small send buffer on the bridge's side (as over a slow network): kernel buffers hold
            # little, so what the bridge does with its own replies shows.
            bridge_socket = stream.client.transport.get_extra_info("socket")
            bridge_socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            ws.transport.pause_reading()  # the client reads nothing from now on
            flood = frames(b"[", 20_000)  # 120 KB of frames that are not JSON: each gets an error event
            ws.transport.write(flood)
            # Wait (bounded) until the bridge's replies have filled the client's buffers.
            async with asyncio.timeout(10):
                while stream.client.transport.get_write_buffer_size() < WRITE_LIMIT_BYTES:
                    await asyncio.sleep(0.02)
            for _ in range(3):
                await asyncio.sleep(0.1)
                # The bridge stopped reading the client: its unsent replies stay near the write limit ...
                assert stream.client.transport.get_write_buffer_size() < 2 * WRITE_LIMIT_BYTES
                # ... and the event loop is free: /ping answers, with vLLM's health.
                status, _ = await http_get("127.0.0.1", bridge.port, "/ping", 1.0)
                assert status == 200
            assert session.event_types() == ["session.update"]  # nothing malformed reached vLLM
            ws.transport.resume_reading()
            for _ in range(3):  # the replies are in order and intact
                error = await recv_event(ws, timeout=2.0)
                assert (error["type"], error["code"]) == ("error", "invalid_json")
            ws.transport.abort()

    run(scenario())


def test_a_burst_of_frames_is_handled_a_budget_at_a_time_so_other_work_interleaves(run, monkeypatch):
    count = 400
    handled_at_tick: list[int] = []
    tick = 0
    real_from_client = server._Stream.from_client

    def from_client(self, message: bytes) -> None:
        handled_at_tick.append(tick)
        real_from_client(self, message)

    monkeypatch.setattr(server._Stream, "from_client", from_client)

    async def scenario():
        nonlocal tick
        async with FakeVllm(record_audio=True) as vllm, running_bridge(vllm.port) as bridge:
            ws, session = await started_stream(bridge, vllm)
            handled_at_tick.clear()
            burst = frames(b'{"type":"input_audio_buffer.append","audio":"AAA="}', count)  # 2 PCM16 bytes each
            ws.transport.write(burst)  # one TCP write of 22 KB: one or a few reads on the bridge's side
            async with asyncio.timeout(5):
                while len(handled_at_tick) < count:
                    tick += 1  # one turn of the event loop per tick
                    await asyncio.sleep(0)
            per_tick: dict[int, int] = {}
            for t in handled_at_tick:
                per_tick[t] = per_tick.get(t, 0) + 1
            assert max(per_tick.values()) <= FRAME_BUDGET
            await session.wait_for_event("input_audio_buffer.append", count=count)
            assert bytes(session.audio) == b"\x00\x00" * count
            assert await ping_status(bridge) == 200

    run(scenario())


def test_ping_has_hysteresis_one_failed_probe_does_not_flip_it(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            assert await ping_status(bridge) == 200
            vllm.health_status = 503
            for _ in range(2):  # a momentarily failing or slow probe
                assert await bridge.health.probe_once() is False
                assert await ping_status(bridge) == 200
            assert await bridge.health.probe_once() is False  # the third failure in a row
            assert await ping_status(bridge) == 503
            vllm.health_status = 200
            assert await bridge.health.probe_once() is True  # one good answer is enough to serve again
            assert await ping_status(bridge) == 200

    run(scenario())
