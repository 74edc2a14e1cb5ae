"""Where transcripts go: EventBridge events (every partial and final) and a DynamoDB table (finals, call state,
the checkpoint), with a TTL.

Table layout (partition key ``ContactId``, sort key ``Item``; both strings):

- ``SEG#<start ms, 12 digits>#<track>``: a final segment (``Speaker``, ``Text``, ``StartS``, ``EndS``); the sort key
  orders a call's segments by their start in the call, both speakers interleaved; a put is idempotent.
- ``CALL``: the call's state (``Status`` ACTIVE / WAITING / ENDED / FAILED, ``Reason``).
- ``CHECKPOINT``: the last finished fragment (:class:`voicectl.connect.consumer.Checkpoint`).

Every item has ``ExpiresAt`` (epoch seconds; DynamoDB TTL deletes it some time after, "typically within a few
days", DynamoDB developer guide) so transcripts are not kept forever.

EventBridge (PutEvents API reference): at most 10 entries a call, each at most 256 KB; a call can succeed with
``FailedEntryCount`` > 0, whose entries are retried here (never dropped silently). ``Source`` is
:data:`EVENT_SOURCE`; ``DetailType`` one of :data:`DETAIL_TYPES`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeSerializer

EVENT_SOURCE = "voicectl.connect"
"""EventBridge ``Source`` of every event (rules match on it); "aws." sources are reserved for AWS."""
SEGMENT = "Transcript Segment"
CALL_STARTED = "Call Started"
CALL_ENDED = "Call Ended"
CALL_WAITING = "Call Waiting"
CALL_FAILED = "Call Failed"
DETAIL_TYPES = (SEGMENT, CALL_STARTED, CALL_ENDED, CALL_WAITING, CALL_FAILED)

PUT_EVENTS_MAX_ENTRIES = 10
"""PutEvents: "You can include up to 10 entries in a request"."""
PUT_EVENTS_MAX_ENTRY_BYTES = 256 * 1024
PUT_EVENTS_RETRIES = 3
DEFAULT_TTL_S = 7 * 24 * 3600
"""Seconds an item lives before TTL may delete it (``connect.transcript_ttl_days``, 7 by default)."""

PARTITION_KEY = "ContactId"
SORT_KEY = "Item"
TTL_ATTRIBUTE = "ExpiresAt"
CHECKPOINT_ITEM = "CHECKPOINT"
CALL_ITEM = "CALL"


class SinkError(RuntimeError):
    """Events or items could not be delivered after retries."""


@dataclass(frozen=True)
class Segment:
    """One piece of transcript: ``start_s``/``end_s`` are seconds from the start of the call's audio."""

    contact_id: str
    speaker: str  # the track: AUDIO_FROM_CUSTOMER or AUDIO_TO_CUSTOMER
    text: str
    start_s: float
    end_s: float
    final: bool

    def detail(self) -> dict[str, Any]:
        return {"contactId": self.contact_id, "segmentId": self.item_key, "speaker": self.speaker,
                "final": self.final, "text": self.text,
                "startS": round(self.start_s, 3), "endS": round(self.end_s, 3)}

    @property
    def item_key(self) -> str:
        return f"SEG#{round(self.start_s * 1000):012d}#{self.speaker}"


class AwsSink:
    """EventBridge + DynamoDB with boto3 (calls in worker threads)."""

    def __init__(self, session: Any, *, bus_name: str, table_name: str, region: str | None = None,
                 endpoint_url: str | None = None, ttl_s: int = DEFAULT_TTL_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.events = session.client("events", region_name=region, endpoint_url=endpoint_url)
        self.table = session.resource("dynamodb", region_name=region, endpoint_url=endpoint_url).Table(table_name)
        self.client = session.client("dynamodb", region_name=region, endpoint_url=endpoint_url)
        self.table_name = table_name
        self.bus_name = bus_name
        self.ttl_s = ttl_s
        self.clock = clock

    # ---- events ---------------------------------------------------------------------------------------------------
    async def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        await asyncio.to_thread(self._put_events, [(detail_type, detail)])

    def _put_events(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        pending = [{"Source": EVENT_SOURCE, "DetailType": kind, "Detail": json.dumps(detail),
                    "EventBusName": self.bus_name} for kind, detail in entries]
        for entry in pending:
            if len(json.dumps(entry).encode()) > PUT_EVENTS_MAX_ENTRY_BYTES:
                raise SinkError(f"an event is larger than PutEvents' {PUT_EVENTS_MAX_ENTRY_BYTES} bytes")
        for attempt in range(PUT_EVENTS_RETRIES + 1):
            failed = []
            for start in range(0, len(pending), PUT_EVENTS_MAX_ENTRIES):
                batch = pending[start:start + PUT_EVENTS_MAX_ENTRIES]
                response = self.events.put_events(Entries=batch)
                if response.get("FailedEntryCount"):
                    failed += [entry for entry, result in zip(batch, response["Entries"]) if result.get("ErrorCode")]
            if not failed:
                return
            pending = failed
            time.sleep(0.2 * 2 ** attempt)
        raise SinkError(f"EventBridge refused {len(pending)} event(s) after {PUT_EVENTS_RETRIES} retries")

    # ---- table ----------------------------------------------------------------------------------------------------
    def _expires(self) -> int:
        return int(self.clock()) + self.ttl_s

    def _segment_item(self, segment: Segment) -> dict[str, Any]:
        return {PARTITION_KEY: segment.contact_id, SORT_KEY: segment.item_key, "Speaker": segment.speaker,
                "Text": segment.text, "StartS": str(round(segment.start_s, 3)), "EndS": str(round(segment.end_s, 3)),
                TTL_ATTRIBUTE: self._expires()}

    def _checkpoint_item(self, contact_id: str, state: dict[str, Any]) -> dict[str, Any]:
        return {PARTITION_KEY: contact_id, SORT_KEY: CHECKPOINT_ITEM, "State": json.dumps(state),
                TTL_ATTRIBUTE: self._expires()}

    async def commit_final(self, segment: Segment, state: dict[str, Any]) -> None:
        """The segment and the checkpoint that covers it, in one TransactWriteItems (both or neither)."""
        serialize = TypeSerializer().serialize
        items = [self._segment_item(segment), self._checkpoint_item(segment.contact_id, state)]
        await asyncio.to_thread(self.client.transact_write_items, TransactItems=[
            {"Put": {"TableName": self.table_name, "Item": {key: serialize(value) for key, value in item.items()}}}
            for item in items])

    async def set_call(self, contact_id: str, status: str, reason: str = "") -> None:
        item = {PARTITION_KEY: contact_id, SORT_KEY: CALL_ITEM, "Status": status, "Reason": reason,
                "UpdatedAt": int(self.clock()), TTL_ATTRIBUTE: self._expires()}
        await asyncio.to_thread(self.table.put_item, Item=item)

    async def load_checkpoint(self, contact_id: str) -> dict[str, Any] | None:
        response = await asyncio.to_thread(self.table.get_item, Key={PARTITION_KEY: contact_id,
                                                                     SORT_KEY: CHECKPOINT_ITEM}, ConsistentRead=True)
        item = response.get("Item")
        return json.loads(item["State"]) if item else None

    def segments(self, contact_id: str) -> list[dict[str, Any]]:
        """A call's final segments in call order (what an agent-assist app reads; paginated Query)."""
        from boto3.dynamodb.conditions import Key

        items, kwargs = [], {"KeyConditionExpression": Key(PARTITION_KEY).eq(contact_id) & Key(SORT_KEY)
                             .begins_with("SEG#"), "ConsistentRead": True}
        while True:
            response = self.table.query(**kwargs)
            items += response["Items"]
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
