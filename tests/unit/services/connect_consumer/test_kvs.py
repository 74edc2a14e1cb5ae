"""services/connect_consumer/kvs.py: GetMedia's StartSelector as the Kinesis Video Streams API
accepts it, and a payload read through the local stand-in (GetDataEndpoint first, then GetMedia
where it points)."""

from __future__ import annotations

import asyncio

import boto3
import pytest

from connect_consumer import kvs
from voice_devtools.fake_kvs import FakeCall, FakeKvs


def test_a_start_selector_resumes_from_the_token_else_from_the_fragment():
    fragment = "91343852333181432392682062607743920146264583078"
    assert kvs.start_selector(after_fragment=fragment) == {
        "StartSelectorType": "FRAGMENT_NUMBER",
        "AfterFragmentNumber": fragment,
    }
    assert kvs.start_selector(after_fragment="1", continuation_token="a_b.c-9") == {
        "StartSelectorType": "CONTINUATION_TOKEN",
        "ContinuationToken": "a_b.c-9",
    }


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "GetMedia needs a fragment number or a continuation token to start from"),
        (
            {"after_fragment": "12a"},
            "fragment number '12a' must be 1-128 decimal digits (GetMedia "
            "StartSelector.AfterFragmentNumber)",
        ),
        ({"after_fragment": "1" * 129}, "must be 1-128 decimal digits"),
        (
            {"continuation_token": "has space"},
            "continuation token 'has space' must be 1-128 of [a-zA-Z0-9_.-] (GetMedia "
            "StartSelector.ContinuationToken)",
        ),
        ({"continuation_token": ""}, "must be 1-128 of"),
    ],
)
def test_a_selector_the_api_would_refuse_is_named_with_its_rule(kwargs, message):
    with pytest.raises(ValueError) as caught:
        kvs.start_selector(**kwargs)
    assert message in str(caught.value)


def test_the_payload_of_a_call_is_read_from_where_get_data_endpoint_points():
    async def scenario() -> bytes:
        stand_in = await FakeKvs(read_timeout_s=0.5).start()
        try:
            call = stand_in.add(
                FakeCall("contact-1", "stream-1", bytes(8000 * 2), bytes(8000 * 2), speed=50.0)
            )
            session = boto3.Session(
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                region_name="us-east-1",
            )
            media = kvs.KvsMedia(session, region="us-east-1", endpoint_url=stand_in.url)
            pieces = [
                piece
                async for piece in media.get_media(
                    call.stream_arn, kvs.start_selector(after_fragment=call.number(0))
                )
            ]
            media.executor.shutdown(wait=False)
            return b"".join(pieces)
        finally:
            await stand_in.stop()

    payload = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert payload[:4] == bytes.fromhex("1a45dfa3")  # a Matroska (EBML) stream, as GetMedia returns
    assert (
        len(payload) > 8000 * 2 * 2
    )  # both tracks' second of PCM16, and the container around them


# ---- the reader over the stand-in: how a call's stream ends, and what it survives --------------
from connect_consumer import mkv  # noqa: E402
from connect_consumer.call import CallFailed  # noqa: E402
from connect_consumer.transcriber import END_OF_STREAM  # noqa: E402
from tests.unit.services.connect_consumer.connect_testkit import (  # noqa: E402
    MemoryStore,
    assert_tiles,
    servers,
    speech_like,
    transcriber,
)


def read_call(quiet_s: float = 5.0, **options):
    """One call (8 fragments) through a transcriber; returns (reason or the CallFailed, store,
    GetMedia requests, the endpoint's sessions)."""

    async def main():
        store = MemoryStore()
        async with servers() as (url, stand_in, vllm):
            seconds = 8 * 1.024
            call = stand_in.add(
                FakeCall("c-1", "s-1", speech_like(seconds, 1), speech_like(seconds, 2), **options)
            )
            try:
                reason = await transcriber(call, url, stand_in, store, quiet_s=quiet_s).run()
            except CallFailed as failed:
                reason = failed
            return reason, store, stand_in.get_media_requests, len(vllm.sessions)

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_a_call_ends_when_its_stream_ends_with_one_get_media():
    """The producer stopped: GetMedia's payload ends after the last fragment, and so does the call
    (before, the reader reopened GetMedia and waited out its quiet time: several requests and
    quiet_s late)."""
    reason, store, requests, _ = read_call(quiet_s=600.0)
    assert reason == END_OF_STREAM
    assert len(requests) == 1
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("c-1", track), 8 * 1.024)


def test_a_reset_in_the_middle_of_a_fragment_is_resumed_from_the_last_whole_one():
    reason, store, requests, _ = read_call(resets={3})
    assert reason == END_OF_STREAM
    assert [r["StartSelector"] for r in requests] == [
        {
            "StartSelectorType": "FRAGMENT_NUMBER",
            "AfterFragmentNumber": FakeCall("c", "s", b"", b"").number(0),
        },
        {
            "StartSelectorType": "CONTINUATION_TOKEN",
            "ContinuationToken": FakeCall("c", "s", b"", b"").number(2),
        },
    ]
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("c-1", track), 8 * 1.024)  # nothing lost, nothing twice


def test_a_transient_getmedia_error_is_resumed_and_a_lasting_one_fails_the_call_naming_it():
    reason, store, requests, _ = read_call(errors={2: (5000, "Internal error")})
    assert reason == END_OF_STREAM and len(requests) == 2
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("c-1", track), 8 * 1.024)
    failed, _, _, _ = read_call(errors={2: (4501, "The stream's KMS key is disabled")})
    assert isinstance(failed, CallFailed)
    assert str(failed) == "GetMedia stopped with error 4501 The stream's KMS key is disabled"


def test_fragment_not_found_after_the_last_fragment_is_the_end_and_at_the_start_a_failure():
    reason, _, _, _ = read_call(errors={8: (4000, "Requested fragment is not found")})
    assert reason == END_OF_STREAM
    failed, _, _, _ = read_call(errors={0: (4000, "Requested fragment is not found")})
    assert (
        isinstance(failed, CallFailed)
        and "start fragment" in str(failed)
        and "retention" in str(failed)
    )


def test_resets_without_progress_fail_the_call_after_the_bounded_retries():
    class Resets(FakeCall):
        def fragment(
            self, index
        ):  # every serving of fragment 2 is cut: the connection never gets past it
            self.resets.add(2)
            return super().fragment(index)

    async def main():
        store = MemoryStore()
        async with servers() as (url, stand_in, _vllm):
            call = stand_in.add(Resets("c-1", "s-1", speech_like(8, 1), speech_like(8, 2)))
            with pytest.raises(CallFailed) as failed:
                await transcriber(call, url, stand_in, store).run()
            return str(failed.value), stand_in.get_media_requests

    message, requests = asyncio.run(asyncio.wait_for(main(), 60))
    last_whole = FakeCall("c", "s", b"", b"").number(1)
    assert message.startswith(f"GetMedia failed 3 times in a row after fragment {last_whole}")
    assert len(requests) == 4  # the first, then three reopenings that got nowhere


def test_a_customer_only_flow_opens_one_endpoint_stream_and_transcribes_that_track():
    reason, store, _, sessions = read_call(tracks=(mkv.TRACK_FROM_CUSTOMER,))
    assert reason == END_OF_STREAM and sessions == 1
    assert_tiles(store.finals("c-1", mkv.TRACK_FROM_CUSTOMER), 8 * 1.024)
    assert not store.finals("c-1", mkv.TRACK_TO_CUSTOMER)
    assert store.checkpoints["c-1"]["fragment"] == FakeCall("c", "s", b"", b"").number(7)


def test_the_data_endpoint_is_asked_again_after_45_minutes_and_after_a_failure():
    class Control:
        def __init__(self):
            self.asked = 0

        def client(self, name, **kwargs):
            return self

        def get_data_endpoint(self, **kwargs):
            self.asked += 1
            return {"DataEndpoint": "https://one.example"}

    now = [0.0]
    session = Control()
    media = kvs.KvsMedia(session, clock=lambda: now[0])
    media._media_client("arn")
    media._media_client("arn")
    assert media.endpoint_requests == 1
    now[0] = kvs.ENDPOINT_TTL_S
    media._media_client("arn")
    assert media.endpoint_requests == 2
    media.forget("arn")
    media._media_client("arn")
    assert media.endpoint_requests == 3
    media.executor.shutdown(wait=False)
