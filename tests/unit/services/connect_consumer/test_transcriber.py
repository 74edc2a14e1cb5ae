"""connect_consumer.transcriber: one call end to end on loopback, the KVS stand-in (real Matroska
fragments over HTTP, read with boto3) -> the call's transcriber -> the real bridge -> the fake vLLM;
the store in memory: both tracks' finals cover the call, finals are committed one at a time, partial
events stay bounded, and a stop never cuts a final in half."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from connect_consumer import mkv
from connect_consumer.transcriber import END_OF_STREAM
from tests.unit.services.connect_consumer.connect_testkit import (
    MemoryStore,
    assert_tiles,
    servers,
    speech_like,
    transcriber,
)
from voice_devtools.fake_kvs import FakeCall

pytestmark = pytest.mark.timeout(600)


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_short_call_gives_both_speakers_transcripts_that_cover_the_call():
    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(
                FakeCall("contact-1", "stream-1", speech_like(21, 1), speech_like(21, 2))
            )
            reason = await transcriber(call, url, kvs, store).run()
        return store, reason

    store, reason = run(main())
    assert reason == END_OF_STREAM
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("contact-1", track), 21.0)
    assert store.kinds("contact-1") == ["Call Started"]
    assert store.checkpoints["contact-1"]["fragment"] == FakeCall("c", "s", b"", b"").number(
        20
    )  # 21 s: 21 fragments


def test_the_two_tracks_finals_are_committed_one_at_a_time_and_the_checkpoint_never_goes_back():
    """Both tracks write the CHECKPOINT item; two transactions at once conflict in DynamoDB (the
    call ended there), and an earlier checkpoint finishing last would overwrite a later one. The
    store below fails a commit that overlaps another, as DynamoDB does, and each commit takes a
    while: both tracks end generations at the same quiet points, so they finish together."""
    from connect_consumer.sink import SinkError

    class Conflicting(MemoryStore):
        writing = 0

        async def commit_final(self, segment, state):
            self.writing += 1
            try:
                if self.writing > 1:
                    raise SinkError("TransactionConflict")
                await asyncio.sleep(0.05)
                await super().commit_final(segment, state)
            finally:
                self.writing -= 1

    async def main():
        store = Conflicting()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(FakeCall("both", "s-both", speech_like(21, 1), speech_like(21, 2)))
            reason = await transcriber(call, url, kvs, store).run()
        return store, reason

    store, reason = run(main())
    assert reason == END_OF_STREAM
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("both", track), 21.0)


def test_partial_events_stay_under_eventbridges_limit_however_long_a_generation_runs():
    """130 deltas of 200 KB each in one generation: each partial event carries the generation's
    latest text, cut to MAX_TEXT_BYTES from its start (it carried the whole generation so far: 30 MB
    published, then a refused event)."""
    import json as json_module

    from connect_consumer.call import CallRequest
    from connect_consumer.sink import MAX_TEXT_BYTES, PUT_EVENTS_MAX_ENTRY_BYTES, entry_bytes
    from connect_consumer.transcriber import CallTranscriber
    from voice_client.audio import CHUNK_BYTES

    class LongDeltas:  # answers each append with a 200 KB delta, the final commit with its done
        def __init__(self):
            self.inbox = asyncio.Queue()
            self.inbox.put_nowait(json_module.dumps({"type": "session.created"}))
            self.count = 0

        async def send_text(self, text):
            event = json_module.loads(text)
            if event["type"] == "input_audio_buffer.append":
                self.count += 1
                delta = f"<{self.count}>" + "ü" * 100_000
                self.inbox.put_nowait(
                    json_module.dumps({"type": "transcription.delta", "delta": delta})
                )
            elif event.get("final"):
                self.inbox.put_nowait(
                    json_module.dumps({"type": "transcription.done", "text": "the end"})
                )

        async def receive_text(self):
            return await self.inbox.get()

        async def close(self):
            pass

    async def opener():
        return LongDeltas()

    loud = (np.full(CHUNK_BYTES // 2, 8000, dtype="<i2")).tobytes()

    async def main():
        store = MemoryStore()
        made = CallTranscriber(
            CallRequest("long", "arn", "1"), media=None, opener=opener, store=store
        )
        queue = asyncio.Queue()
        for _ in range(130):
            queue.put_nowait(loud)
        queue.put_nowait(None)
        await made._transcribe(mkv.TRACK_FROM_CUSTOMER, queue)
        return store

    store = run(main())
    partials = [
        detail
        for kind, detail in store.events
        if kind == "Transcript Segment" and not detail["final"]
    ]
    assert len(partials) == 130
    for number, detail in enumerate(partials, 1):
        entry = {
            "Source": "voicectl.connect",
            "DetailType": "Transcript Segment",
            "Detail": json_module.dumps(detail, ensure_ascii=False),
        }
        assert entry_bytes(entry) < PUT_EVENTS_MAX_ENTRY_BYTES
        assert detail["text"].endswith(f"<{number}>" + "ü" * 100_000)  # the latest words, whole
        assert len(detail["text"].encode()) <= MAX_TEXT_BYTES and detail.get("cut", False) == (
            number > 1
        )
    assert [s.text for s in store.segments] == ["the end"]


def test_a_stopped_call_finishes_the_final_it_was_writing_before_it_counts_as_stopped():
    """SIGTERM cancels the calls; a final whose transaction is in flight is written and published
    before the call's task ends (it used to go on unseen after it: the task resuming the call from
    the checkpoint could read the checkpoint before that final's and publish the final a second
    time)."""

    class Slow(MemoryStore):
        def __init__(self):
            super().__init__()
            self.in_commit, self.release = asyncio.Event(), asyncio.Event()

        async def commit_final(self, segment, state):
            self.in_commit.set()
            await self.release.wait()
            await super().commit_final(segment, state)

    async def main():
        store = Slow()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(FakeCall("stopped", "s-stop", speech_like(21, 1), speech_like(21, 2)))
            task = asyncio.create_task(transcriber(call, url, kvs, store).run())
            await store.in_commit.wait()
            task.cancel()
            for _ in range(50):
                await asyncio.sleep(0)
            stopped_early = task.done()
            store.release.set()
            await asyncio.gather(task, return_exceptions=True)
        return store, stopped_early

    store, stopped_early = run(main())
    assert not stopped_early
    finals = [
        detail for kind, detail in store.events if kind == "Transcript Segment" and detail["final"]
    ]
    assert store.segments and [d["segmentId"] for d in finals] == [
        s.item_key for s in store.segments
    ]


def test_a_partial_the_bus_refuses_is_dropped_and_the_call_goes_on():
    """A partial is superseded by the next one and by the final: one that EventBridge still refuses
    after the sink's retries is logged and dropped (it failed the call: found by the fault soak,
    with throttled entries)."""
    from connect_consumer.sink import SinkError

    class RefusesPartials(MemoryStore):
        async def publish(self, kind, detail):
            if kind == "Transcript Segment" and not detail["final"]:
                raise SinkError("EventBridge refused 1 event(s) after 3 retries")
            await super().publish(kind, detail)

    async def main():
        store = RefusesPartials()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(FakeCall("partials", "s-partials", speech_like(6, 1), speech_like(6, 2)))
            made = transcriber(call, url, kvs, store)
            reason = await made.run()
        return store, reason, made.partials_dropped

    store, reason, dropped = run(main())
    assert reason == END_OF_STREAM and dropped > 0
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("partials", track), 6.0)
