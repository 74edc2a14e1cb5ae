"""voicectl/connect/kvs.py: GetMedia's StartSelector as the Kinesis Video Streams API accepts it, and a payload read
through the local stand-in (GetDataEndpoint first, then GetMedia where it points)."""

from __future__ import annotations

import asyncio

import boto3
import pytest

from voicectl.connect import kvs
from voicectl.connect.fake_kvs import FakeCall, FakeKvs


def test_a_start_selector_resumes_from_the_token_else_from_the_fragment():
    fragment = "91343852333181432392682062607743920146264583078"
    assert kvs.start_selector(after_fragment=fragment) == {"StartSelectorType": "FRAGMENT_NUMBER",
                                                           "AfterFragmentNumber": fragment}
    assert kvs.start_selector(after_fragment="1", continuation_token="a_b.c-9") == {
        "StartSelectorType": "CONTINUATION_TOKEN", "ContinuationToken": "a_b.c-9"}


@pytest.mark.parametrize("kwargs, message", [
    ({}, "GetMedia needs a fragment number or a continuation token to start from"),
    ({"after_fragment": "12a"}, "fragment number '12a' must be 1-128 decimal digits (GetMedia "
                                "StartSelector.AfterFragmentNumber)"),
    ({"after_fragment": "1" * 129}, "must be 1-128 decimal digits"),
    ({"continuation_token": "has space"}, "continuation token 'has space' must be 1-128 of [a-zA-Z0-9_.-] (GetMedia "
                                          "StartSelector.ContinuationToken)"),
    ({"continuation_token": ""}, "must be 1-128 of"),
])
def test_a_selector_the_api_would_refuse_is_named_with_its_rule(kwargs, message):
    with pytest.raises(ValueError) as caught:
        kvs.start_selector(**kwargs)
    assert message in str(caught.value)


def test_the_payload_of_a_call_is_read_from_where_get_data_endpoint_points():
    async def scenario() -> bytes:
        stand_in = await FakeKvs(read_timeout_s=0.5).start()
        try:
            call = stand_in.add(FakeCall("contact-1", "stream-1", bytes(8000 * 2), bytes(8000 * 2), speed=50.0))
            session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                    region_name="us-east-1")
            media = kvs.KvsMedia(session, region="us-east-1", endpoint_url=stand_in.url)
            pieces = [piece async for piece in media.get_media(call.stream_arn, kvs.start_selector(
                after_fragment=call.number(0)))]
            media.executor.shutdown(wait=False)
            return b"".join(pieces)
        finally:
            await stand_in.stop()

    payload = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert payload[:4] == bytes.fromhex("1a45dfa3")  # a Matroska (EBML) stream, as GetMedia returns
    assert len(payload) > 8000 * 2 * 2  # both tracks' second of PCM16, and the container around them
