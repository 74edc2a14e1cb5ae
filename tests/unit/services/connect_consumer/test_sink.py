"""The sink against moto: a final and its checkpoint in one transaction, segments read back in call
order, events on the bus, and a PutEvents that half fails is retried, not dropped."""

from __future__ import annotations

import asyncio
import json

import boto3
import pytest
from moto import mock_aws

from connect_consumer.sink import EVENT_SOURCE, SEGMENT, AwsSink, Segment, SinkError

TABLE, BUS = "transcripts", "voice-connect"


@pytest.fixture
def sink(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("dynamodb").create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": "ContactId", "KeyType": "HASH"},
                {"AttributeName": "Item", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "ContactId", "AttributeType": "S"},
                {"AttributeName": "Item", "AttributeType": "S"},
            ],
        )
        session.client("events").create_event_bus(Name=BUS)
        yield AwsSink(
            session, bus_name=BUS, table_name=TABLE, clock=lambda: 1_700_000_000.0, ttl_s=3600
        )


def test_a_final_and_its_checkpoint_are_stored_and_read_back_in_call_order(sink):
    later = Segment("c1", "AUDIO_TO_CUSTOMER", "fine thanks", 12.5, 14.0, True)
    earlier = Segment("c1", "AUDIO_FROM_CUSTOMER", "hello how are you", 3.25, 12.5, True)
    asyncio.run(sink.commit_final(later, {"fragment": "2", "done_s": {"AUDIO_TO_CUSTOMER": 14.0}}))
    asyncio.run(
        sink.commit_final(earlier, {"fragment": "2", "done_s": {"AUDIO_FROM_CUSTOMER": 12.5}})
    )
    items = sink.segments("c1")
    assert [(i["Speaker"], i["Text"], i["StartS"], i["EndS"]) for i in items] == [
        ("AUDIO_FROM_CUSTOMER", "hello how are you", "3.25", "12.5"),
        ("AUDIO_TO_CUSTOMER", "fine thanks", "12.5", "14.0"),
    ]
    assert {i["ExpiresAt"] for i in items} == {1_700_003_600}
    assert asyncio.run(sink.load_checkpoint("c1")) == {
        "fragment": "2",
        "done_s": {"AUDIO_FROM_CUSTOMER": 12.5},
    }
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
    assert json.loads(entry["Detail"]) == {
        "contactId": "c1",
        "segmentId": "SEG#000000000000#AUDIO_FROM_CUSTOMER",
        "speaker": "AUDIO_FROM_CUSTOMER",
        "final": True,
        "text": "hello",
        "startS": 0.0,
        "endS": 1.5,
    }


def test_entries_put_events_refuses_are_retried_and_a_persistent_refusal_raises(sink, monkeypatch):
    sink.sleep = lambda seconds: None
    calls = []

    def flaky(**kwargs):
        calls.append(len(kwargs["Entries"]))
        if len(calls) == 1:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]}
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}

    sink.events.put_events = flaky
    asyncio.run(sink.publish(SEGMENT, {"contactId": "c1"}))
    assert calls == [1, 1]
    sink.events.put_events = lambda **kwargs: {
        "FailedEntryCount": 1,
        "Entries": [{"ErrorCode": "InternalFailure"}],
    }
    with pytest.raises(SinkError, match="refused 1 event"):
        asyncio.run(sink.publish(SEGMENT, {"contactId": "c1"}))


def test_the_table_item_is_as_docs_connect_md_describes_it():
    """docs/connect.md tells an agent-assist app the sort key's form and a final's attributes."""
    from pathlib import Path

    from connect_consumer import sink

    docs = " ".join(
        (Path(__file__).resolve().parents[4] / "docs" / "connect.md").read_text().split()
    )
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


def conflict(*codes: str):
    from botocore.exceptions import ClientError

    return ClientError(
        {
            "Error": {
                "Code": "TransactionCanceledException",
                "Message": "Transaction cancelled, please "
                f"refer cancellation reasons for specific reasons [{', '.join(codes)}]",
            },
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


def test_a_transaction_conflict_is_retried_with_backoff_and_the_final_is_written(sink):
    """Two writers of the CHECKPOINT item at once: DynamoDB cancels one with TransactionConflict
    (the call used to end there). It is tried again after a jittered pause, and the final and its
    checkpoint are stored."""
    pauses: list[float] = []
    sink.sleep = pauses.append
    real = sink.client.transact_write_items
    answers = [conflict("None", "TransactionConflict"), conflict("TransactionConflict", "None")]

    def flaky(**kwargs):
        if answers:
            raise answers.pop(0)
        return real(**kwargs)

    sink.client.transact_write_items = flaky
    segment = Segment("c1", "AUDIO_FROM_CUSTOMER", "hello", 0.0, 1.5, True)
    asyncio.run(sink.commit_final(segment, {"fragment": "7"}))
    assert [item["Text"] for item in sink.segments("c1")] == ["hello"]
    assert asyncio.run(sink.load_checkpoint("c1")) == {"fragment": "7"}
    assert sink.conflicts == 2 and len(pauses) == 2
    assert (
        0 <= pauses[0] <= sink_module().CONFLICT_BACKOFF_S
        and 0 <= pauses[1] <= 2 * sink_module().CONFLICT_BACKOFF_S
    )


def test_a_conflict_that_persists_and_other_cancellations_are_raised(sink):
    from botocore.exceptions import ClientError

    sink.sleep = lambda seconds: None
    sink.client.transact_write_items = lambda **kwargs: (_ for _ in ()).throw(
        conflict("TransactionConflict")
    )
    segment = Segment("c1", "AUDIO_FROM_CUSTOMER", "hello", 0.0, 1.5, True)
    with pytest.raises(ClientError):
        asyncio.run(sink.commit_final(segment, {}))
    assert sink.conflicts == sink_module().CONFLICT_RETRIES
    sink.client.transact_write_items = lambda **kwargs: (_ for _ in ()).throw(
        conflict("ConditionalCheckFailed")
    )
    with pytest.raises(ClientError):
        asyncio.run(sink.commit_final(segment, {}))
    assert sink.conflicts == sink_module().CONFLICT_RETRIES  # not a conflict: not retried


def sink_module():
    from connect_consumer import sink

    return sink


def test_event_sizes_are_utf8_bytes_as_eventbridge_counts_them(sink):
    """A 180 KB final in a non-ASCII script is within PutEvents' 256 KB (it was refused: its Detail
    was ASCII escapes, six bytes a character); the size is the user guide's sum of UTF-8 bytes."""
    from connect_consumer.sink import PUT_EVENTS_MAX_ENTRY_BYTES, entry_bytes

    captured = []
    real = sink.events.put_events

    def record(**kwargs):
        captured.extend(kwargs["Entries"])
        return real(**kwargs)

    sink.events.put_events = record
    text = "語" * 60_000  # 180,000 bytes in UTF-8
    asyncio.run(
        sink.publish(SEGMENT, Segment("c1", "AUDIO_FROM_CUSTOMER", text, 0.0, 1.5, True).detail())
    )
    (entry,) = captured
    assert json.loads(entry["Detail"])["text"] == text and "cut" not in json.loads(entry["Detail"])
    assert entry_bytes(entry) == (len(EVENT_SOURCE) + len(SEGMENT) + len(entry["Detail"].encode()))
    assert 180_000 < entry_bytes(entry) < PUT_EVENTS_MAX_ENTRY_BYTES
    assert (
        entry_bytes({"Source": "é", "DetailType": "x", "Time": 1, "Resources": ["ü", "a"]})
        == 2 + 1 + 14 + 2 + 1
    )
    with pytest.raises(SinkError, match="more than PutEvents' 262144 bytes"):
        asyncio.run(sink.publish(SEGMENT, {"contactId": "c1", "blob": "語" * 90_000}))


def test_texts_and_reasons_are_cut_in_bytes_on_a_character_boundary(sink):
    from connect_consumer.sink import CUT_MARK, MAX_REASON_BYTES, MAX_TEXT_BYTES, cut_utf8

    assert cut_utf8("héllo", 100) == "héllo"
    assert (
        cut_utf8("ab語語語", 8) == "ab語" + CUT_MARK and len(cut_utf8("ab語語語", 8).encode()) <= 8
    )
    assert cut_utf8("語語語cd", 8, keep_tail=True) == CUT_MARK + "語cd"
    final = Segment("c1", "AUDIO_TO_CUSTOMER", "語" * 100_000, 0.0, 1.0, True).detail()
    assert (
        final["cut"] is True
        and final["text"].startswith("語語")
        and final["text"].endswith(CUT_MARK)
    )
    assert len(final["text"].encode()) <= MAX_TEXT_BYTES
    partial = Segment(
        "c1", "AUDIO_TO_CUSTOMER", "a" * 10 + "語" * 100_000 + "end", 0.0, 1.0, False
    ).detail()
    assert (
        partial["cut"] is True
        and partial["text"].endswith("語end")
        and partial["text"].startswith(CUT_MARK)
    )
    asyncio.run(sink.set_call("c1", "FAILED", "a bad tag " + "x" * 1_000_000))
    item = sink.table.get_item(Key={"ContactId": "c1", "Item": "CALL"})["Item"]
    assert item["Status"] == "FAILED" and len(item["Reason"].encode()) <= MAX_REASON_BYTES
    assert item["Reason"].startswith("a bad tag xxx") and item["Reason"].endswith(CUT_MARK)


def test_a_call_is_claimed_by_one_task_until_its_lease_runs_out_and_never_after_it_ended(
    monkeypatch,
):
    """The claim is a conditional write (moto evaluates the condition): one owner at a time; a claim
    that is not renewed runs out (a task that died); a released claim is free at once (a stopping
    task); an ended call is never claimed again (a copy of its message is a duplicate)."""
    from connect_consumer.sink import LEASE_S

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    now = [1_700_000_000.0]
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("dynamodb").create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[
                {"AttributeName": "ContactId", "KeyType": "HASH"},
                {"AttributeName": "Item", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "ContactId", "AttributeType": "S"},
                {"AttributeName": "Item", "AttributeType": "S"},
            ],
        )
        a, b = (
            AwsSink(session, bus_name=BUS, table_name=TABLE, clock=lambda: now[0], owner=owner)
            for owner in ("task-a", "task-b")
        )
        assert asyncio.run(a.claim_call("c1")) == "claimed"
        assert asyncio.run(b.claim_call("c1")) == "elsewhere"
        asyncio.run(a.set_call("c1", "ACTIVE"))
        assert (
            asyncio.run(a.claim_call("c1")) == "claimed"
        )  # renewed by its owner; set_call kept the claim
        item = a.table.get_item(Key={"ContactId": "c1", "Item": "CALL"})["Item"]
        assert (item["Owner"], item["Status"], int(item["LeaseUntil"])) == (
            "task-a",
            "ACTIVE",
            now[0] + LEASE_S,
        )
        now[0] += LEASE_S + 1  # task a died: its claim ran out
        assert asyncio.run(b.claim_call("c1")) == "claimed"
        assert asyncio.run(a.claim_call("c1")) == "elsewhere"
        asyncio.run(b.release_call("c1"))
        asyncio.run(a.release_call("c1"))  # not its claim: nothing changes
        assert asyncio.run(a.claim_call("c1")) == "claimed"
        asyncio.run(a.set_call("c1", "ENDED", "quiet"))
        now[0] += 10 * LEASE_S
        assert asyncio.run(a.claim_call("c1")) == "finished"
        assert asyncio.run(b.claim_call("c1")) == "finished"


def test_a_text_of_json_escapes_is_cut_to_its_size_in_the_event():
    from connect_consumer.sink import MAX_TEXT_BYTES

    detail = Segment(
        "c1", "AUDIO_TO_CUSTOMER", "\x01" * 100_000, 0.0, 1.0, False
    ).detail()  # 6 bytes each in JSON
    assert detail["cut"] is True
    assert (
        MAX_TEXT_BYTES - 32
        <= len(json.dumps(detail["text"], ensure_ascii=False).encode()) - 2
        <= MAX_TEXT_BYTES
    )
