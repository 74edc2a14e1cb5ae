"""Shared pieces of the Connect tests: a call recording, the servers (fake vLLM, the real bridge, the KVS
stand-in) in one event loop, and an in-memory store with the sink's interface."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import boto3
import numpy as np

from voicectl.connect import mkv
from voicectl.connect.consumer import CallRequest, CallTranscriber
from voicectl.connect.fake_kvs import FakeCall, FakeKvs
from voicectl.connect.kvs import KvsMedia
from voicectl.connect.sink import SEGMENT
from voicectl.local.fake_vllm import FakeVllm
from voicectl.clients.realtime import WebSocketTransport

RATE = mkv.CONNECT_SAMPLE_RATE_HZ
#: GetMedia's read timeout in the KVS stand-in, seconds (AWS: 3 s, fake_kvs.READ_TIMEOUT_S). A call served whole
#: (``speed`` 0) is read by its first GetMedia; what follows is waiting for the quiet that ends the call: this
#: timeout, the consumer's pause between two GetMedia (1 s, kvs.MIN_GET_MEDIA_INTERVAL_S) and this timeout again.
READ_TIMEOUT_S = 0.2
#: The transcriber's ``quiet_s`` unless a test sets its own: below that pause, so a call served whole ends at the first
#: GetMedia that finds nothing new (at 1 s the end fell on the second one or the third, by a few milliseconds).
QUIET_S = 0.5


def speech_like(seconds: float, seed: int, talk_s: float = 4.0, pause_s: float = 1.0) -> bytes:
    """PCM16 at 8 kHz: bursts of a noisy tone (``talk_s``) between silences (``pause_s``), so that the client finds
    quiet points to end generations at, as in speech. Each burst's noise is its own: tests/vllm's 20-minute call
    tells the generations apart by their audio (a repeated burst made them alike, and that test failed)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    on = (t % (talk_s + pause_s)) < talk_s
    signal = 0.3 * np.sin(2 * np.pi * (300 + 50 * seed) * t) + 0.05 * rng.standard_normal(t.size)
    return (np.where(on, signal, 0.0) * 32767).astype("<i2").tobytes()


@dataclass
class MemoryStore:
    """The sink's interface in memory (the moto-backed AwsSink is tested on its own)."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    segments: list[Any] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def publish(self, kind: str, detail: dict[str, Any]) -> None:
        self.events.append((kind, detail))

    async def commit_final(self, segment: Any, state: dict[str, Any]) -> None:
        self.segments.append(segment)
        self.checkpoints[segment.contact_id] = state

    async def set_call(self, contact_id: str, status: str, reason: str = "") -> None:
        self.calls.setdefault(contact_id, []).append(status)

    async def load_checkpoint(self, contact_id: str) -> dict[str, Any] | None:
        return self.checkpoints.get(contact_id)

    def finals(self, contact_id: str, track: str) -> list[Any]:
        return [s for s in self.segments if s.contact_id == contact_id and s.speaker == track]

    def kinds(self, contact_id: str) -> list[str]:
        return [kind for kind, detail in self.events if detail.get("contactId") == contact_id and kind != SEGMENT]


@contextlib.asynccontextmanager
async def servers(max_streams: int = 256, **fake_options: Any):
    """Fake vLLM -> the real bridge, and the KVS stand-in; yields (bridge URL, FakeKvs, FakeVllm)."""
    from bridge.server import Bridge
    from bridge.settings import Settings

    vllm = await FakeVllm(deltas=("one ", "two ", "three "), delta_per_append=True, **fake_options).start()
    bridge = await Bridge(Settings(host="127.0.0.1", port=0, vllm_port=vllm.port, drain_s=0,
                                   max_streams=max_streams)).start()
    kvs = await FakeKvs(read_timeout_s=READ_TIMEOUT_S).start()
    try:
        yield f"ws://127.0.0.1:{bridge.port}/invocations-bidirectional-stream", kvs, vllm
    finally:
        await kvs.stop()
        await bridge.shutdown(drain_s=0)
        await vllm.stop()


_MEDIA: dict[str, KvsMedia] = {}


def media(kvs: FakeKvs) -> KvsMedia:
    """One KvsMedia (one reader pool) per stand-in, as one consumer task has."""
    if kvs.url not in _MEDIA:
        session = boto3.Session(aws_access_key_id="AKIAFAKE", aws_secret_access_key="fake", region_name="us-east-1")
        _MEDIA[kvs.url] = KvsMedia(session, region="us-east-1", endpoint_url=kvs.url)
    return _MEDIA[kvs.url]


def transcriber(call: FakeCall, url: str, kvs: FakeKvs, store: MemoryStore, **options: Any) -> CallTranscriber:
    request = CallRequest(call.contact_id, call.stream_arn, call.number(0))
    options.setdefault("quiet_s", QUIET_S)
    return CallTranscriber(request, media=media(kvs), opener=lambda: WebSocketTransport.connect(url), store=store,
                           **options)


def assert_tiles(segments: list[Any], duration_s: float) -> None:
    """Final segments cover [0, duration) in order, each starting where the last ended: nothing missing or twice."""
    assert segments, "no final segment"
    position = 0.0
    for segment in segments:
        assert abs(segment.start_s - position) < 2e-3, (segment, position)
        assert segment.end_s > segment.start_s
        assert segment.text
        position = segment.end_s
    assert abs(position - duration_s) < 0.01, (position, duration_s)
