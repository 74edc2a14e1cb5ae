"""What the mic page's tests share: a synthetic microphone (:func:`tone`), the page's side of the
recording WebSocket (:class:`PageClient`) and recordings played through it, and stand-ins for the
page and the stream that a recording's parts see."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import numpy as np

from tests.unit.voice_client.clients_testkit import Servers
from voice_client import mic
from voice_client.audio import CHUNK_BYTES
from voice_client.realtime import WebSocketTransport

CHUNK_SAMPLES = CHUNK_BYTES // 2

RATE_HZ = 48_000
#: How long a test waits before it calls a stream stuck, seconds: a liveness bound, not a latency
#: target.
LIVENESS_S = 10.0
"""Sample rate of the synthetic microphone (a browser's usual)."""


def tone(seconds: float, rate_hz: int = RATE_HZ, frequency_hz: float = 300.0) -> np.ndarray:
    """A float32 sine at half scale."""
    t = np.arange(round(rate_hz * seconds)) / rate_hz
    return (0.5 * np.sin(2 * np.pi * frequency_hz * t)).astype(np.float32)


def expected_16k_samples(samples: int, rate_hz: int = RATE_HZ) -> float:
    return samples * 16_000 / rate_hz


class RecordingPage:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def send(self, event: dict) -> None:
        self.sent.append(event)


def websocket_opener(url: str):
    async def open_websocket():
        return await WebSocketTransport.connect(url)

    return open_websocket


def recording_url(page_url: str) -> str:
    return page_url.replace("http://", "ws://") + mic.RECORDING_PATH


class PageClient:
    """Speaks the page's side of the recording protocol over a real WebSocket."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.messages: list[dict] = []

    @classmethod
    async def connect(cls, url: str, **kwargs) -> PageClient:
        from websockets.asyncio.client import connect

        return cls(await connect(url, **kwargs))

    async def start(self, rate_hz: int = RATE_HZ) -> None:
        await self.connection.send(json.dumps({"type": "start", "sample_rate_hz": rate_hz}))

    async def next(self, timeout: float = 5.0) -> dict:
        message = json.loads(await asyncio.wait_for(self.connection.recv(), timeout))
        self.messages.append(message)
        return message

    async def until(self, kind: str, timeout: float = 5.0) -> dict:
        while (message := await self.next(timeout))["type"] != kind:
            assert message["type"] in ("started", "transcript"), message
        return message

    async def closed_by_server(self, timeout: float = 5.0) -> bool:
        from websockets.exceptions import ConnectionClosedOK

        try:
            await asyncio.wait_for(self.connection.recv(), timeout)
        except ConnectionClosedOK:
            return True
        return False


def on_servers(servers: Servers, coroutine):
    """Await ``coroutine`` on the servers' loop from the test's loop."""
    return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, servers.loop))


async def record_until_end(url: str, seconds: float, stop: bool = True) -> list[dict]:
    """Record ``seconds`` of tone in 0.1 s frames at real time, Stop (if ``stop``), and return every
    message up to the end (done or error)."""
    client = await PageClient.connect(url)
    await client.start()
    await client.until("started")
    from websockets.exceptions import ConnectionClosed

    audio = tone(seconds)
    step = RATE_HZ // 10
    with contextlib.suppress(
        ConnectionClosed
    ):  # the server ends the recording (and the socket) on an error
        for start in range(0, len(audio), step):
            await client.connection.send(audio[start : start + step].tobytes())
            await asyncio.sleep(0.1)
        if stop:
            await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
    with contextlib.suppress(ConnectionClosed):
        while (await client.next(10))["type"] not in ("done", "error"):
            pass
    return client.messages


async def record_held(url: str, bridge, seconds: float, release: bool) -> tuple[list[dict], int]:
    """Send ``seconds`` of tone and Stop while ``bridge`` holds its first event (``bridge.gate``),
    then let it go if ``release``, and return every message up to the end (done or error) and the
    number of samples sent."""
    client = await PageClient.connect(url)
    await client.start()
    audio = tone(seconds)
    step = RATE_HZ // 10
    for start in range(0, len(audio), step):  # 1 s, under MAX_AHEAD_S: sent at once
        await client.connection.send(audio[start : start + step].tobytes())
    await client.connection.send(json.dumps({"type": "stop", "samples": len(audio)}))
    deadline = time.monotonic() + LIVENESS_S
    while (
        not bridge.held and time.monotonic() < deadline
    ):  # the stream is open, its first event held back
        await asyncio.sleep(0.01)
    assert bridge.held == 1
    if release:
        bridge.gate.set()
    from websockets.exceptions import ConnectionClosed

    with contextlib.suppress(ConnectionClosed):
        while (await client.next(LIVENESS_S))["type"] not in ("done", "error"):
            pass
    return client.messages, len(audio)
