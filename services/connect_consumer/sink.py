"""Where transcripts go: EventBridge events (every partial and final) and a DynamoDB table (finals,
call state, the checkpoint), with a TTL.

Table layout (partition key ``ContactId``, sort key ``Item``; both strings):

- ``SEG#<start ms, 12 digits>#<track>``: a final segment (``Speaker``, ``Text``, ``StartS``,
  ``EndS``); the sort key orders a call's segments by their start in the call, both speakers
  interleaved; a put is idempotent.
- ``CALL``: the call's state (``Status`` ACTIVE / WAITING / ENDED / FAILED / UNTRANSCRIBED,
  ``Reason``) and its claim (``Owner``: the consumer task running it, ``LeaseUntil``: epoch seconds
  the claim holds unless renewed). A task runs a call only after :meth:`AwsSink.claim_call`
  succeeded (a conditional write): SQS standard queues deliver at least once, and a copy of a call's
  message that another task holds, or of a finished call, must not run it again.
- ``CHECKPOINT``: the last finished fragment (:class:`connect_consumer.call.Checkpoint`).

Sizes are counted in UTF-8 bytes: a reason is cut to :data:`MAX_REASON_BYTES` and a segment's text
to :data:`MAX_TEXT_BYTES` (:func:`cut_utf8`), so no item reaches DynamoDB's 400 KB and no event
EventBridge's 256 KB.

Every item has ``ExpiresAt`` (epoch seconds; DynamoDB TTL deletes it some time after, "typically
within a few days", DynamoDB developer guide) so transcripts are not kept forever.

EventBridge (PutEvents API reference): at most 10 entries a call, each at most 256 KB; a call can
succeed with ``FailedEntryCount`` > 0, whose entries are retried here (never dropped silently).
``Source`` is :data:`EVENT_SOURCE`; ``DetailType`` one of :data:`DETAIL_TYPES`; ``Detail`` is JSON
in UTF-8 (not ASCII escapes, which made a non-ASCII event six times its size).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

LOG = logging.getLogger(__name__)

EVENT_SOURCE = "voicectl.connect"
"""EventBridge ``Source`` of every event (rules match on it); "aws." sources are reserved for
AWS."""
SEGMENT = "Transcript Segment"
CALL_STARTED = "Call Started"
CALL_ENDED = "Call Ended"
CALL_WAITING = "Call Waiting"
CALL_FAILED = "Call Failed"
DETAIL_TYPES = (SEGMENT, CALL_STARTED, CALL_ENDED, CALL_WAITING, CALL_FAILED)

PUT_EVENTS_MAX_ENTRIES = 10
"""PutEvents: "You can include up to 10 entries in a request"."""
PUT_EVENTS_MAX_ENTRY_BYTES = 256 * 1024
"""PutEvents: an entry is at most 256 KB, counted as the EventBridge user guide's "Calculating
PutEvents event entry size" says: the UTF-8 bytes of Source, DetailType, Detail and each Resources
entry, 14 bytes for Time (:func:`entry_bytes`)."""
PUT_EVENTS_RETRIES = 3
MAX_REASON_BYTES = 1024
"""UTF-8 bytes of a reason stored (``Reason``) or published (``reason``) at most: a reason can quote
what a producer or a server sent (strings of any length), and must never make an item or an event
too large to write."""
MAX_TEXT_BYTES = 200 * 1024
"""Bytes of a segment's ``text`` at most, counted in its JSON form in UTF-8 as the event carries it
(a final of a 50-minute generation is some 50 KB of text): the rest of the event (some 300 bytes)
fits in EventBridge's 256 KB entry, and the item in DynamoDB's 400 KB ("Service quotas in DynamoDB":
an item, names and values, is at most 400 KB)."""
CUT_MARK = "\u2026"
"""Ends (or, for a partial's tail, begins) a string that was cut."""
CONFLICT_RETRIES = 5
"""Times a transaction cancelled with ``TransactionConflict`` is tried again: DynamoDB cancels a
TransactWriteItems that "conflicts with a concurrent TransactWriteItems request"
(TransactionCanceledException, API reference); the conflict is transient, the write is the same
(idempotent puts), so it is tried again after a pause."""
CONFLICT_BACKOFF_S = 0.05
"""First pause before such a retry, doubled each time with full jitter (0.05-0.8 s: well within a
generation)."""
LEASE_S = 180
"""Seconds a task's claim on a call holds unless renewed (the consumer renews it every minute): a
task that dies leaves its calls to others once the claim and the message's visibility (120 s) have
both run out."""
FINISHED = ("ENDED", "FAILED", "UNTRANSCRIBED")
"""Call statuses that are final: a call in one of them never runs again."""
DEFAULT_TTL_S = 7 * 24 * 3600
"""Seconds an item lives before TTL may delete it (``connect.transcript_ttl_days``, 7 by
default)."""

PARTITION_KEY = "ContactId"
SORT_KEY = "Item"
TTL_ATTRIBUTE = "ExpiresAt"
CHECKPOINT_ITEM = "CHECKPOINT"
CALL_ITEM = "CALL"


class SinkError(RuntimeError):
    """Events or items could not be delivered after retries."""


def cut_utf8(text: str, max_bytes: int, *, keep_tail: bool = False) -> str:
    """``text`` if its UTF-8 form fits ``max_bytes``, else its head (or tail) with :data:`CUT_MARK`,
    cut on a character boundary so that the whole is at most ``max_bytes`` bytes."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max(0, max_bytes - len(CUT_MARK.encode()))
    if keep_tail:
        return CUT_MARK + data[len(data) - room :].decode(errors="ignore")
    return data[:room].decode(errors="ignore") + CUT_MARK


def cut_json(text: str, max_bytes: int, *, keep_tail: bool = False) -> str:
    """:func:`cut_utf8`, with the size counted as the string's JSON form in an event (quotes and
    control characters take up to six bytes there)."""
    budget = max_bytes
    while True:
        cut = cut_utf8(text, budget, keep_tail=keep_tail)
        size = len(json.dumps(cut, ensure_ascii=False).encode()) - 2
        if size <= max_bytes:
            return cut
        if budget <= 0:
            return ""
        budget = (
            min(budget, len(cut.encode())) * max_bytes // size
        )  # escapes shrink the room in proportion


def entry_bytes(entry: dict[str, Any]) -> int:
    """A PutEvents entry's size as EventBridge counts it (see
    :data:`PUT_EVENTS_MAX_ENTRY_BYTES`)."""
    size = 14 if entry.get("Time") is not None else 0
    for name in ("Source", "DetailType", "Detail"):
        size += len(str(entry.get(name) or "").encode())
    return size + sum(len(str(resource).encode()) for resource in entry.get("Resources") or ())


def is_transaction_conflict(error: ClientError) -> bool:
    """A TransactWriteItems cancelled because another request held one of its items (retried, never
    fatal)."""
    response = error.response
    if response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return False
    reasons = [reason.get("Code") for reason in response.get("CancellationReasons") or ()]
    return "TransactionConflict" in reasons or "TransactionConflict" in response["Error"].get(
        "Message", ""
    )


@dataclass(frozen=True)
class Segment:
    """One piece of transcript: ``start_s``/``end_s`` are seconds from the start of the call's
    audio."""

    contact_id: str
    speaker: str  # the track: AUDIO_FROM_CUSTOMER or AUDIO_TO_CUSTOMER
    text: str
    start_s: float
    end_s: float
    final: bool

    def detail(self) -> dict[str, Any]:
        """The event's fields; ``text`` cut to :data:`MAX_TEXT_BYTES` (a final's head; a partial's
        tail, the words just heard), with ``cut`` true when it was."""
        text = cut_json(self.text, MAX_TEXT_BYTES, keep_tail=not self.final)
        detail = {
            "contactId": self.contact_id,
            "segmentId": self.item_key,
            "speaker": self.speaker,
            "final": self.final,
            "text": text,
            "startS": round(self.start_s, 3),
            "endS": round(self.end_s, 3),
        }
        if text != self.text:
            detail["cut"] = True
        return detail

    @property
    def item_key(self) -> str:
        return f"SEG#{round(self.start_s * 1000):012d}#{self.speaker}"


class AwsSink:
    """EventBridge + DynamoDB with boto3 (calls in worker threads)."""

    def __init__(
        self,
        session: Any,
        *,
        bus_name: str,
        table_name: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        ttl_s: int = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.events = session.client("events", region_name=region, endpoint_url=endpoint_url)
        self.table = session.resource(
            "dynamodb", region_name=region, endpoint_url=endpoint_url
        ).Table(table_name)
        self.client = session.client("dynamodb", region_name=region, endpoint_url=endpoint_url)
        self.table_name = table_name
        self.bus_name = bus_name
        self.ttl_s = ttl_s
        self.clock = clock
        self.owner = owner or f"task-{uuid.uuid4()}"
        """This consumer task's name in the calls' claims (``Owner``)."""
        self.sleep = sleep
        self.conflicts = 0
        """Transaction conflicts met (each retried)."""

    # ---- events ---------------------------------------------------------------------------------
    async def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        await asyncio.to_thread(self._put_events, [(detail_type, detail)])

    def _put_events(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        pending = [
            {
                "Source": EVENT_SOURCE,
                "DetailType": kind,
                "Detail": json.dumps(detail, ensure_ascii=False),
                "EventBusName": self.bus_name,
            }
            for kind, detail in entries
        ]
        for entry in pending:
            if (size := entry_bytes(entry)) > PUT_EVENTS_MAX_ENTRY_BYTES:
                raise SinkError(
                    f"a {entry['DetailType']!r} event is {size} bytes, more than PutEvents' "
                    f"{PUT_EVENTS_MAX_ENTRY_BYTES} bytes an entry"
                )
        for attempt in range(PUT_EVENTS_RETRIES + 1):
            failed = []
            for start in range(0, len(pending), PUT_EVENTS_MAX_ENTRIES):
                batch = pending[start : start + PUT_EVENTS_MAX_ENTRIES]
                response = self.events.put_events(Entries=batch)
                if response.get("FailedEntryCount"):
                    failed += [
                        entry
                        for entry, result in zip(batch, response["Entries"], strict=True)
                        if result.get("ErrorCode")
                    ]
            if not failed:
                return
            pending = failed
            self.sleep(0.2 * 2**attempt)
        raise SinkError(
            f"EventBridge refused {len(pending)} event(s) after {PUT_EVENTS_RETRIES} retries"
        )

    # ---- table ----------------------------------------------------------------------------------
    def _expires(self) -> int:
        return int(self.clock()) + self.ttl_s

    def _segment_item(self, segment: Segment) -> dict[str, Any]:
        return {
            PARTITION_KEY: segment.contact_id,
            SORT_KEY: segment.item_key,
            "Speaker": segment.speaker,
            "Text": segment.text,
            "StartS": str(round(segment.start_s, 3)),
            "EndS": str(round(segment.end_s, 3)),
            TTL_ATTRIBUTE: self._expires(),
        }

    def _checkpoint_item(self, contact_id: str, state: dict[str, Any]) -> dict[str, Any]:
        return {
            PARTITION_KEY: contact_id,
            SORT_KEY: CHECKPOINT_ITEM,
            "State": json.dumps(state),
            TTL_ATTRIBUTE: self._expires(),
        }

    async def commit_final(self, segment: Segment, state: dict[str, Any]) -> None:
        """The segment and the checkpoint that covers it, in one TransactWriteItems (both or
        neither); a ``TransactionConflict`` is retried (:data:`CONFLICT_RETRIES`, backoff with
        jitter), never fatal."""
        serialize = TypeSerializer().serialize
        items = [self._segment_item(segment), self._checkpoint_item(segment.contact_id, state)]
        transaction = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": {key: serialize(value) for key, value in item.items()},
                }
            }
            for item in items
        ]
        await asyncio.to_thread(self._transact, transaction)

    def _transact(self, transaction: list[dict[str, Any]]) -> None:

        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                self.client.transact_write_items(TransactItems=transaction)
                return
            except ClientError as error:
                if not is_transaction_conflict(error) or attempt == CONFLICT_RETRIES:
                    raise
                self.conflicts += 1
                LOG.warning(
                    "a checkpoint transaction met a conflict; retry %d of %d",
                    attempt + 1,
                    CONFLICT_RETRIES,
                )
                self.sleep(random.uniform(0, CONFLICT_BACKOFF_S * 2**attempt))

    async def set_call(self, contact_id: str, status: str, reason: str = "") -> None:
        """The call's status and reason (cut to :data:`MAX_REASON_BYTES`); the claim (``Owner``,
        ``LeaseUntil``) is left as it is."""
        await asyncio.to_thread(
            self.table.update_item,
            Key={PARTITION_KEY: contact_id, SORT_KEY: CALL_ITEM},
            UpdateExpression="SET #status = :status, #reason = :reason, UpdatedAt = :now, #ttl = "
            ":ttl",
            ExpressionAttributeNames={
                "#status": "Status",
                "#reason": "Reason",
                "#ttl": TTL_ATTRIBUTE,
            },
            ExpressionAttributeValues={
                ":status": status,
                ":reason": cut_utf8(reason, MAX_REASON_BYTES),
                ":now": int(self.clock()),
                ":ttl": self._expires(),
            },
        )

    async def claim_call(self, contact_id: str) -> str:
        """Claim the call for this task (or renew the claim) for :data:`LEASE_S`. Returns
        ``"claimed"``; ``"finished"`` (the call ended: never run it again) or ``"elsewhere"``
        (another task's claim holds).

        One conditional UpdateItem: it succeeds when the call has no claim, is this task's, or its
        claim ran out, and the call is not finished (DynamoDB: a condition expression is checked and
        the write made atomically)."""
        now = int(self.clock())
        try:
            await asyncio.to_thread(
                self.table.update_item,
                Key={PARTITION_KEY: contact_id, SORT_KEY: CALL_ITEM},
                UpdateExpression="SET #owner = :me, LeaseUntil = :until, #ttl = :ttl, "
                "#status = if_not_exists(#status, :claimed)",
                ConditionExpression="(attribute_not_exists(#status) OR NOT #status IN (:ended, "
                ":failed, :gone)) AND (attribute_not_exists(#owner) OR #owner = :me OR "
                "LeaseUntil < :now)",
                ExpressionAttributeNames={
                    "#owner": "Owner",
                    "#status": "Status",
                    "#ttl": TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":me": self.owner,
                    ":until": now + LEASE_S,
                    ":now": now,
                    ":ttl": self._expires(),
                    ":claimed": "CLAIMED",
                    ":ended": FINISHED[0],
                    ":failed": FINISHED[1],
                    ":gone": FINISHED[2],
                },
            )
            return "claimed"
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        item = (
            await asyncio.to_thread(
                self.table.get_item,
                Key={PARTITION_KEY: contact_id, SORT_KEY: CALL_ITEM},
                ConsistentRead=True,
            )
        ).get("Item") or {}
        return "finished" if item.get("Status") in FINISHED else "elsewhere"

    async def release_call(self, contact_id: str) -> None:
        """End this task's claim now (a stopping task: another may resume the call at once)."""
        try:
            await asyncio.to_thread(
                self.table.update_item,
                Key={PARTITION_KEY: contact_id, SORT_KEY: CALL_ITEM},
                UpdateExpression="SET LeaseUntil = :zero",
                ConditionExpression="#owner = :me",
                ExpressionAttributeNames={"#owner": "Owner"},
                ExpressionAttributeValues={":zero": 0, ":me": self.owner},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    async def load_checkpoint(self, contact_id: str) -> dict[str, Any] | None:
        response = await asyncio.to_thread(
            self.table.get_item,
            Key={PARTITION_KEY: contact_id, SORT_KEY: CHECKPOINT_ITEM},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return json.loads(item["State"]) if item else None

    def segments(self, contact_id: str) -> list[dict[str, Any]]:
        """A call's final segments in call order (what an agent-assist app reads; paginated
        Query)."""
        from boto3.dynamodb.conditions import Key

        items, kwargs = (
            [],
            {
                "KeyConditionExpression": Key(PARTITION_KEY).eq(contact_id)
                & Key(SORT_KEY).begins_with("SEG#"),
                "ConsistentRead": True,
            },
        )
        while True:
            response = self.table.query(**kwargs)
            items += response["Items"]
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
