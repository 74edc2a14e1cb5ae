"""The Connect consumer's long runs end to end on loopback: the KVS stand-in (real Matroska
fragments over HTTP, read with boto3) -> the consumer -> the real bridge -> the fake vLLM; the store
in memory. A 20-minute call across a consumer restart and ten calls at once: minutes of audio
through every layer, so they run with the e2e tier (`make test`), not the fast one; the consumer's
other behaviour is tested in tests/unit/services/connect_consumer/."""

from __future__ import annotations

import asyncio

import pytest

from connect_consumer import mkv
from connect_consumer.consumer import Consumer
from connect_consumer.transcriber import END_OF_STREAM
from tests.unit.services.connect_consumer.connect_testkit import (
    MemoryStore,
    assert_tiles,
    servers,
    speech_like,
    transcriber,
)
from voice_devtools.fake_kvs import FakeCall

# A 20-minute call replayed at speed: about a minute however fast the machine
# (tests/e2e/conftest.py).
pytestmark = [pytest.mark.timeout(600), pytest.mark.starts_first]


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_20_minute_call_across_a_consumer_restart_and_stream_rollovers_loses_and_repeats_nothing():  # noqa: E501 (a test's name says what it checks)
    """20 minutes of both tracks, served as fast as the consumer reads (the client paces itself at
    16 x real time after a burst, below the bridge's limit); the consumer is stopped half way and a
    new one resumes from the checkpoint; streams move every 10 s (the client's rollover before the
    platform's stream cap)."""
    duration = 1200.0

    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, vllm):
            call = kvs.add(
                FakeCall("long", "stream-long", speech_like(duration, 3), speech_like(duration, 4))
            )
            first = asyncio.create_task(transcriber(call, url, kvs, store, max_stream_s=10.0).run())

            def reached() -> float:  # how far both tracks' finals reach
                return min(
                    max((s.end_s for s in store.finals("long", track)), default=0.0)
                    for track in mkv.CONNECT_TRACKS
                )

            while reached() < duration / 2:
                await asyncio.sleep(0.2)
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            before = len(store.segments)
            reason = await transcriber(call, url, kvs, store, max_stream_s=10.0).run()
            sessions = len(vllm.sessions)
        return store, reason, before, sessions, kvs.get_media_requests

    store, reason, before, sessions, requests = run(main())
    assert reason == END_OF_STREAM
    assert 0 < before < len(store.segments)
    for track in mkv.CONNECT_TRACKS:
        finals = sorted(store.finals("long", track), key=lambda s: s.start_s)
        assert finals == store.finals("long", track)  # published in call order
        assert_tiles(finals, duration)
    resumed = [r for r in requests if r["StartSelector"]["StartSelectorType"] == "FRAGMENT_NUMBER"][
        -1
    ]
    assert resumed["StartSelector"]["AfterFragmentNumber"] != FakeCall("c", "s", b"", b"").number(0)
    assert sessions > 2 * duration / 300  # streams moved on many times per track


def test_ten_simultaneous_calls_through_one_consumer():
    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, _vllm):
            calls = [
                kvs.add(FakeCall(f"c{i}", f"s{i}", speech_like(12, i), speech_like(12, i + 20)))
                for i in range(10)
            ]
            consumer = Consumer(
                lambda request: transcriber(calls[int(request.contact_id[1:])], url, kvs, store),
                store,
                max_calls=10,
            )
            from connect_consumer.call import CallRequest

            tasks = [
                consumer.start(CallRequest(c.contact_id, c.stream_arn, c.number(0))) for c in calls
            ]
            reasons = await asyncio.gather(*tasks)
        return store, reasons

    store, reasons = run(main())
    assert reasons == [END_OF_STREAM] * 10
    for i in range(10):
        assert store.kinds(f"c{i}") == ["Call Started", "Call Ended"]
        for track in mkv.CONNECT_TRACKS:
            assert_tiles(store.finals(f"c{i}", track), 12.0)
