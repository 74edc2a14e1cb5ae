"""Shared pieces of the Connect tests: a call recording, the servers (fake vLLM, the real bridge,
the KVS stand-in) in one event loop, and an in-memory store with the sink's interface."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import numpy as np

from connect_consumer import mkv
from connect_consumer.call import CallRequest
from connect_consumer.kvs import KvsMedia
from connect_consumer.sink import SEGMENT
from connect_consumer.transcriber import CallTranscriber
from voice_client.realtime import WebSocketTransport
from voice_devtools.fake_kvs import FakeCall, FakeKvs
from voice_devtools.local.fake_vllm import FakeVllm

RATE = mkv.CONNECT_SAMPLE_RATE_HZ
#: GetMedia's read timeout in the KVS stand-in, seconds (AWS: 3 s, fake_kvs.READ_TIMEOUT_S). A call
#: served whole (``speed`` 0) is read by its first GetMedia; what follows is waiting for the quiet
#: that ends the call: this timeout, the consumer's pause between two GetMedia (1 s,
#: kvs.MIN_GET_MEDIA_INTERVAL_S) and this timeout again.
READ_TIMEOUT_S = 0.2
#: The transcriber's ``quiet_s`` unless a test sets its own: below that pause, so a call served
#: whole ends at the first GetMedia that finds nothing new (at 1 s the end fell on the second one or
#: the third, by a few milliseconds).
QUIET_S = 0.5


def speech_like(seconds: float, seed: int, talk_s: float = 4.0, pause_s: float = 1.0) -> bytes:
    """PCM16 at 8 kHz: bursts of a noisy tone (``talk_s``) between silences (``pause_s``), so that
    the client finds quiet points to end generations at, as in speech. Each burst's noise is its
    own: tests/vllm's 20-minute call tells the generations apart by their audio (a repeated burst
    made them alike, and that test failed)."""
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
        return [
            kind
            for kind, detail in self.events
            if detail.get("contactId") == contact_id and kind != SEGMENT
        ]


@contextlib.asynccontextmanager
async def servers(max_streams: int = 256, **fake_options: Any):
    """Fake vLLM -> the real bridge, and the KVS stand-in; yields (bridge URL, FakeKvs,
    FakeVllm)."""
    from bridge.server import Bridge
    from contracts.bridge_env import BridgeEnvironment

    vllm = await FakeVllm(
        deltas=("one ", "two ", "three "), delta_per_append=True, **fake_options
    ).start()
    settings = BridgeEnvironment.defaults(
        host="127.0.0.1", port=0, vllm_port=vllm.port, drain_s=0, max_streams=max_streams
    )
    bridge = await Bridge(settings).start()
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
        session = boto3.Session(
            aws_access_key_id="AKIAFAKE", aws_secret_access_key="fake", region_name="us-east-1"
        )
        _MEDIA[kvs.url] = KvsMedia(session, region="us-east-1", endpoint_url=kvs.url)
    return _MEDIA[kvs.url]


def transcriber(
    call: FakeCall, url: str, kvs: FakeKvs, store: MemoryStore, **options: Any
) -> CallTranscriber:
    request = CallRequest(call.contact_id, call.stream_arn, call.number(0))
    options.setdefault("quiet_s", QUIET_S)
    return CallTranscriber(
        request,
        media=media(kvs),
        opener=lambda: WebSocketTransport.connect(url),
        store=store,
        **options,
    )


def assert_tiles(segments: list[Any], duration_s: float) -> None:
    """Final segments cover [0, duration) in order, each starting where the last ended: nothing
    missing or twice."""
    assert segments, "no final segment"
    position = 0.0
    for segment in segments:
        assert abs(segment.start_s - position) < 2e-3, (segment, position)
        assert segment.end_s > segment.start_s
        assert segment.text
        position = segment.end_s
    assert abs(position - duration_s) < 0.01, (position, duration_s)


# ---- fixtures: fragments in every real layout found, written byte for byte ---------------------
FIXTURES_DIR = Path(__file__).parent / "fixtures"
FIXTURE_CONTACT = "87718f4a-d2ed-476a-ad11-f496ab09b3f8"
"""The ContactId of the dump (citizensadvice, sample-matroska.txt)."""
FIXTURE_FRAGMENTS = 3


def fixture_audio(seconds: float = FIXTURE_FRAGMENTS * 1.024) -> tuple[bytes, bytes]:
    """The fixtures' PCM: distinct ramps per side, so that a track read as the other shows."""
    n = round(seconds * RATE)
    customer = (np.arange(n) % 1000 - 500).astype("<i2").tobytes()
    agent = (-(np.arange(n) % 777) * 7 + 2000).astype("<i2").tobytes()
    return customer, agent


def _call(**options: Any) -> FakeCall:
    customer, agent = fixture_audio()
    return FakeCall(FIXTURE_CONTACT, "fixture", customer, agent, **options)


def _payload(call: FakeCall) -> bytes:
    return b"".join(call.fragment(index) for index in range(call.count))


def _video_fragment(number: str) -> bytes:
    """A fragment in the layout of the parser library's real GetMedia payload
    (output_get_media.mkv): an EBML header and Segment with 8-byte sizes, a libavformat-written
    H.264 track (unnamed, TrackType 1), GetMedia's tags around a Cluster of known size. Video: the
    consumer must refuse it clearly."""
    from ebmlite import encoding as enc

    from voice_devtools.fake_kvs import getmedia_tags

    def sized(element_id: str, payload: bytes, width: int = 1) -> bytes:
        return bytes.fromhex(element_id) + enc.encodeSize(len(payload), width) + payload

    header = sized(
        "1a45dfa3",
        bytes.fromhex("4286810142f7810142f2810442f381084282886d6174726f736b614287810442858102"),
        8,
    )
    info = sized(
        "1549a966",
        sized("2ad7b1", (1_000_000).to_bytes(3, "big")) + sized("4d80", b"Lavf57.71.100"),
        8,
    )
    video = sized(
        "e0", sized("b0", (640).to_bytes(2, "big")) + sized("ba", (360).to_bytes(2, "big")), 8
    )
    entry = sized(
        "ae",
        sized("d7", b"\x01")
        + sized("73c5", b"\x01")
        + sized("86", b"V_MPEG4/ISO/AVC")
        + sized("83", b"\x01")
        + video,
        8,
    )
    blocks = b"".join(
        sized("a3", b"\x81" + (i * 33).to_bytes(2, "big") + b"\x80" + bytes(64)) for i in range(3)
    )
    cluster = sized("1f43b675", sized("e7", b"\x00") + blocks, 8)
    body = (
        info
        + sized("1654ae6b", entry, 8)
        + getmedia_tags({mkv.TAG_FRAGMENT_NUMBER: number})
        + cluster
        + getmedia_tags({mkv.TAG_CONTINUATION_TOKEN: number})
    )
    return header + bytes.fromhex("18538067") + b"\x01" + b"\xff" * 7 + body


def fixtures() -> dict[str, bytes]:
    """Each fixture's bytes, by file name (README.md in the fixtures directory names each one's
    source)."""
    from voice_devtools.fake_kvs import error_chunk

    first = _call()
    return {
        "connect_to_customer_first.mkv": _payload(first),
        "connect_from_customer_first.mkv": _payload(_call(order=mkv.CONNECT_TRACKS)),
        "connect_customer_only.mkv": _payload(_call(tracks=(mkv.TRACK_FROM_CUSTOMER,))),
        "connect_then_fragment_not_found.mkv": _payload(first)
        + error_chunk(mkv.ERROR_FRAGMENT_NOT_FOUND, "Requested fragment is not found"),
        "getmedia_video.mkv": b"".join(_video_fragment(first.number(index)) for index in range(2)),
    }


def write_fixtures() -> None:
    """Rewrite the fixture files
    (``python -m tests.unit.services.connect_consumer.connect_testkit``)."""
    FIXTURES_DIR.mkdir(exist_ok=True)
    for name, data in fixtures().items():
        (FIXTURES_DIR / name).write_bytes(data)


if __name__ == "__main__":
    write_fixtures()
