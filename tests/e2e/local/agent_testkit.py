"""The voice agent (``services/agent/``) on loopback for the e2e tests: the bot and the Bedrock
stand-in on an event loop of their own, in front of the local stack (tests/e2e/local/conftest.py:
the front door, the real bridge, the fake vLLM, the Sonic stand-in); a page's WebSocket side.

Import it after ``pytest.importorskip("pipecat")``. The fixtures (``utterance``, ``agent_factory``,
``agent``) are tests/e2e/local/conftest.py's.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import websockets

from agent.metrics import MetricsSink
from agent.server import AgentServer, services_factory
from contracts.agent_env import AgentEnv
from voice_devtools.local.fake_bedrock import FakeBedrock

FRAME_BYTES = 640  # 20 ms of 16 kHz PCM16
SILENCE = bytes(FRAME_BYTES)
EVENT_TIMEOUT_S = 30.0


class AgentRunner:
    """The bot and the Bedrock stand-in on an event loop of their own."""

    def __init__(self, env: AgentEnv, bedrock: FakeBedrock) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.bedrock = bedrock
        self.call(bedrock.start())
        env = AgentEnv(**{**env.__dict__, "bedrock_runtime_url": bedrock.url})
        self.metrics: list[str] = []
        sink = MetricsSink(env.metric_dimensions, out=_Lines(self.metrics))
        self.server = self.call(AgentServer(env, services_factory(env), sink).start())
        self.url = f"ws://127.0.0.1:{self.server.port}/"

    def call(self, coroutine: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.server.port}/health", timeout=5) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.call(self.server.stop(drain_s=0))
        self.call(self.bedrock.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> None:
        self.lines.extend(line for line in text.splitlines() if line)

    def flush(self) -> None:
        pass


@dataclass
class Page:
    """What a page received, in order: ("event", dict) or ("audio", bytes)."""

    websocket: Any
    received: list[tuple[str, Any]] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        try:
            async for message in self.websocket:
                if isinstance(message, bytes):
                    self.received.append(("audio", message))
                else:
                    self.received.append(("event", json.loads(message)))
        except websockets.ConnectionClosed:
            pass

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [item for tag, item in self.received if tag == "event" and item["type"] == kind]

    def audio_bytes(self) -> int:
        return sum(len(item) for tag, item in self.received if tag == "audio")

    async def wait_for(self, kind: str, count: int = 1) -> dict[str, Any]:
        deadline = time.monotonic() + EVENT_TIMEOUT_S
        while len(self.events(kind)) < count:
            assert time.monotonic() < deadline, (
                f"no {kind} event within {EVENT_TIMEOUT_S} s: "
                f"{[item for tag, item in self.received if tag == 'event']}"
            )
            await asyncio.sleep(0.02)
        return self.events(kind)[count - 1]

    async def speak(self, pcm16: bytes, then_silence_s: float = 1.0) -> None:
        """Send ``pcm16`` then silence at real-time pace, 20 ms at a time."""
        audio = pcm16 + SILENCE * int(then_silence_s / 0.02)
        start = time.monotonic()
        for index, offset in enumerate(range(0, len(audio), FRAME_BYTES)):
            await self.websocket.send(audio[offset : offset + FRAME_BYTES])
            delay = start + (index + 1) * 0.02 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


async def open_page(url: str) -> Page:
    page = Page(await websockets.connect(url, max_size=None))
    page.reader = asyncio.create_task(page.read())
    await page.wait_for("ready")
    return page


async def keep_silent(page: Page, until: asyncio.Event) -> None:
    while not until.is_set():
        await page.websocket.send(SILENCE)
        await asyncio.sleep(0.02)
