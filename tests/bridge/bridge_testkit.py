"""Helpers of the bridge tests: start a bridge in front of a fake vLLM, connect clients, build events."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bridge.health import http_get
from bridge.server import STREAM_PATH, Bridge
from bridge.settings import Settings
from voicectl.local.fake_vllm import FakeVllm

#: 4096 bytes of PCM16 (2048 samples, 128 ms at 16 kHz), a recognisable ramp.
PCM_CHUNK = bytes(range(256)) * 16


@contextlib.asynccontextmanager
async def running_bridge(vllm_port: int, **overrides: Any) -> AsyncIterator[Bridge]:
    """A bridge on 127.0.0.1 (a free port) in front of vLLM at `vllm_port`; settings overridable by name.

    The health cache is filled once before yielding, so `/ping` reflects vLLM at once.
    """
    settings = Settings(**{"host": "127.0.0.1", "port": 0, "vllm_port": vllm_port, "metrics_interval_s": 3600, **overrides})
    bridge = await Bridge(settings).start()
    try:
        await bridge.health.probe_once()
        yield bridge
    finally:
        await bridge.shutdown(drain_s=0)


async def open_stream(bridge: Bridge) -> ClientConnection:
    """Connect a client to the bridge's stream path (compression off, as SageMaker's side has no deflate)."""
    return await connect(f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}", compression=None, open_timeout=2)


async def recv_event(ws: ClientConnection, timeout: float = 1.0) -> dict[str, Any]:
    """Next event from the bridge, parsed; raises TimeoutError after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        return json.loads(await ws.recv())


async def started_stream(bridge: Bridge, vllm: FakeVllm, index: int = 0) -> tuple[ClientConnection, Any]:
    """A client stream past `session.created`, with `session.update` sent and a commit; returns (client, FakeSession)."""
    ws = await open_stream(bridge)
    created = await recv_event(ws)
    assert created["type"] == "session.created"
    await ws.send(event("session.update", model=vllm.model))
    await ws.send(event("input_audio_buffer.commit"))
    session = await vllm.wait_for_session(index)
    await session.wait_for_event("input_audio_buffer.commit")
    return ws, session


def event(event_type: str, **fields: Any) -> str:
    """A client event as JSON text (json.dumps' default separators)."""
    return json.dumps({"type": event_type, **fields})


def append(pcm: bytes = PCM_CHUNK) -> str:
    """An `input_audio_buffer.append` carrying `pcm` (base64)."""
    return event("input_audio_buffer.append", audio=base64.b64encode(pcm).decode())


async def ping_status(bridge: Bridge) -> int:
    """HTTP status of the bridge's `GET /ping`."""
    status, _ = await http_get("127.0.0.1", bridge.port, "/ping", 1.0)
    return status


async def closed_within(ws: ClientConnection, timeout: float) -> tuple[int | None, str | None]:
    """Wait for the client connection to close; return (close code, reason)."""
    async with asyncio.timeout(timeout):
        await ws.wait_closed()
    return ws.close_code, ws.close_reason
