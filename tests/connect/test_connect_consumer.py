"""The consumer end to end on loopback: the KVS stand-in (real Matroska fragments over HTTP, read with boto3) ->
the consumer -> the real bridge -> the fake vLLM; the store in memory."""

from __future__ import annotations

import asyncio

import pytest

from connect_testkit import MemoryStore, assert_tiles, servers, speech_like, transcriber
from voicectl.connect import mkv
from voicectl.connect.consumer import CallFailed, Consumer
from voicectl.connect.fake_kvs import FakeCall

pytestmark = pytest.mark.timeout(600)


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_short_call_gives_both_speakers_transcripts_that_cover_the_call():
    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(FakeCall("contact-1", "stream-1", speech_like(21, 1), speech_like(21, 2)))
            reason = await transcriber(call, url, kvs, store).run()
        return store, reason

    store, reason = run(main())
    assert reason == "quiet"
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("contact-1", track), 21.0)
    assert store.kinds("contact-1") == ["Call Started"]
    assert store.checkpoints["contact-1"]["fragment"] == FakeCall("c", "s", b"", b"").number(10)
