"""The sink against moto: a final and its checkpoint in one transaction, segments read back in call order, events
on the bus, and a PutEvents that half fails is retried, not dropped."""

from __future__ import annotations

import asyncio
import json

import boto3
import pytest
from moto import mock_aws

from voicectl.connect.sink import EVENT_SOURCE, SEGMENT, AwsSink, Segment, SinkError

TABLE, BUS = "transcripts", "voice-connect"


@pytest.fixture
def sink(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("dynamodb").create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "ContactId", "KeyType": "HASH"},
                       {"AttributeName": "Item", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "ContactId", "AttributeType": "S"},
                                  {"AttributeName": "Item", "AttributeType": "S"}])
        session.client("events").create_event_bus(Name=BUS)
        yield AwsSink(session, bus_name=BUS, table_name=TABLE, clock=lambda: 1_700_000_000.0, ttl_s=3600)


def test_a_final_and_its_checkpoint_are_stored_and_read_back_in_call_order(sink):
    later = Segment("c1", "AUDIO_TO_CUSTOMER", "fine thanks", 12.5, 14.0, True)
    earlier = Segment("c1", "AUDIO_FROM_CUSTOMER", "hello how are you", 3.25, 12.5, True)
    asyncio.run(sink.commit_final(later, {"fragment": "2", "done_s": {"AUDIO_TO_CUSTOMER": 14.0}}))
    asyncio.run(sink.commit_final(earlier, {"fragment": "2", "done_s": {"AUDIO_FROM_CUSTOMER": 12.5}}))
    items = sink.segments("c1")
    assert [(i["Speaker"], i["Text"], i["StartS"], i["EndS"]) for i in items] == [
        ("AUDIO_FROM_CUSTOMER", "hello how are you", "3.25", "12.5"),
        ("AUDIO_TO_CUSTOMER", "fine thanks", "12.5", "14.0")]
    assert {i["ExpiresAt"] for i in items} == {1_700_003_600}
    assert asyncio.run(sink.load_checkpoint("c1")) == {"fragment": "2", "done_s": {"AUDIO_FROM_CUSTOMER": 12.5}}
    assert asyncio.run(sink.load_checkpoint("c2")) is None


def test_segments_go_to_the_bus_with_the_documented_fields(sink):
    segment = Segment("c1", "AUDIO_FROM_CUSTOMER", "hello", 0.0, 1.5, True)
    captured = []
    real = sink.events.put_events

    def record(**kwargs):
        captured.extend(kwargs["Entries"])
        return real(**kwargs)

    sink.events.put_events = record
    asyncio.run(sink.publish(SEGMENT, segment.detail()))
    (entry,) = captured
    assert entry["Source"] == EVENT_SOURCE and entry["DetailType"] == "Transcript Segment"
    assert entry["EventBusName"] == BUS
    assert json.loads(entry["Detail"]) == {"contactId": "c1", "segmentId": "SEG#000000000000#AUDIO_FROM_CUSTOMER",
                                           "speaker": "AUDIO_FROM_CUSTOMER", "final": True, "text": "hello",
                                           "startS": 0.0, "endS": 1.5}


def test_entries_put_events_refuses_are_retried_and_a_persistent_refusal_raises(sink, monkeypatch):
    monkeypatch.setattr("voicectl.connect.sink.time.sleep", lambda seconds: None)
    calls = []

    def flaky(**kwargs):
        calls.append(len(kwargs["Entries"]))
        if len(calls) == 1:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]}
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}

    sink.events.put_events = flaky
    asyncio.run(sink.publish(SEGMENT, {"contactId": "c1"}))
    assert calls == [1, 1]
    sink.events.put_events = lambda **kwargs: {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}
    with pytest.raises(SinkError, match="refused 1 event"):
        asyncio.run(sink.publish(SEGMENT, {"contactId": "c1"}))


def test_the_table_item_is_as_docs_connect_md_describes_it():
    """docs/connect.md tells an agent-assist app the sort key's form and a final's attributes."""
    from pathlib import Path

    from voicectl.connect import sink

    docs = " ".join((Path(__file__).resolve().parents[4] / "docs" / "connect.md").read_text().split())
    segment = Segment("c-1", "AUDIO_TO_CUSTOMER", "hi", 1.5, 2.25, final=True)
    prefix, millis, track = segment.item_key.split("#")
    assert (prefix, millis, track) == ("SEG", "000000001500", "AUDIO_TO_CUSTOMER")
    assert "`SEG#<start ms, 12 digits with leading zeros>#<track>`" in docs and len(millis) == 12
    assert f"sort key `{sink.SORT_KEY}`" in docs and f"partition `{sink.PARTITION_KEY}`" in docs
    item = AwsSink.__new__(AwsSink)
    item.ttl_s, item.clock = 60, lambda: 0.0
    fields = item._segment_item(segment)
    assert fields["StartS"] == "1.5" and fields["EndS"] == "2.25"  # strings, as the doc says
    for name in set(fields) - {sink.PARTITION_KEY, sink.SORT_KEY, sink.TTL_ATTRIBUTE}:
        assert f"`{name}`" in docs, name
    assert segment.detail()["segmentId"] == segment.item_key
