"""Many Amazon Connect calls in one task (:class:`Consumer`): each call runs until it ends, a busy
endpoint makes a call wait, a failing call fails alone. One call's transcription is
:class:`~connect_consumer.transcriber.CallTranscriber`'s.

Every way out of a call ends in a recorded outcome: the end (``Call Ended``), or a failure (``Call
Failed``: a bad fragment, a lasting GetMedia error, and every other way out, a raw SDK error, a
refused write, anything unexpected, with the error's type and text): no call is left ACTIVE; an
outcome that cannot be written is logged and counted (:meth:`Consumer._record`). Reasons and texts
are cut in UTF-8 bytes (:data:`~connect_consumer.sink.MAX_REASON_BYTES`,
:data:`~connect_consumer.sink.MAX_TEXT_BYTES`).

When the endpoint is at its stream cap (``server_busy`` after the client's own retries), or
SageMaker answers a stream with a ModelError (a container slow to accept; at most
:data:`MODEL_ERROR_RETRIES` times), the call is marked WAITING in the table and each try publishes a
``Call Waiting`` event (the reason, ``waitingS`` so far, ``retryInS``, and the call seconds not yet
transcribed); the ``CallsWaiting`` metric counts the calls waiting. It resumes from its checkpoint
once a stream opens: Kinesis Video Streams keeps the audio for the retention the instance sets, so
waiting loses nothing within it. Between server_busy tries (a wait without a bound) the consumer
reads the call's new fragments (:meth:`~connect_consumer.transcriber.CallTranscriber.probe`) to
learn whether the call is still live; one that ends while it waits (another contact's fragment, or
the end of its stream) is never dropped silently: the table says UNTRANSCRIBED, a ``Call Ended``
event carries ``transcribed: false`` and each track's untranscribed seconds, and the
``CallsUntranscribed`` metric counts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from connect_consumer import mkv
from connect_consumer.call import (
    CallFailed,
    CallRequest,
    Checkpoint,
    EndpointBusy,
    EndpointUnavailable,
)
from connect_consumer.sink import (
    CALL_ENDED,
    CALL_FAILED,
    CALL_WAITING,
    MAX_REASON_BYTES,
    cut_utf8,
)
from connect_consumer.transcriber import CallTranscriber

LOG = logging.getLogger(__name__)

BUSY_WAIT_S = (5.0, 10.0, 20.0, 30.0)
"""Pauses before a WAITING call tries the endpoint again (the last one repeats)."""
MODEL_ERROR_RETRIES = 3
"""Times a call resumes after a ModelError before it fails: a container slow to accept under load
recovers (seen with vLLM's real server on a loaded CPU, tests/vllm), a broken one does not, and its
call must not wait forever."""


@dataclass
class _Wait:
    """A call waiting for the endpoint: since when, the checkpoint it resumes from, how far the
    stream was probed."""

    since: float
    checkpoint: Checkpoint
    probed: str | None = (
        None  # the last fragment read (the checkpoint's to begin with; None: nothing yet)
    )
    probed_s: float = (
        0.0  # seconds of call audio in the fragments after the checkpoint read while waiting
    )
    last_fragment_at: float = 0.0  # when the last new fragment was read (the Consumer's clock)

    def from_s(self) -> float:
        """Where the call's untranscribed audio starts: the earliest track's finals end there."""
        return min(
            (self.checkpoint.done_s.get(track, 0.0) for track in mkv.CONNECT_TRACKS), default=0.0
        )

    def to_s(self) -> float:
        """Where the call's audio read so far ends (seconds of call time)."""
        return round(max(self.checkpoint.fragment_end_s.values(), default=0.0) + self.probed_s, 3)


class Consumer:
    """Many calls in one task (asyncio): each call runs until it ends; a busy endpoint makes a call
    wait, a failing call fails alone.

    ``transcriber_factory(call)`` builds the :class:`CallTranscriber` of a call (a new one each
    attempt, which resumes from the checkpoint).
    """

    def __init__(
        self,
        transcriber_factory: Callable[[CallRequest], CallTranscriber],
        store: Any,
        *,
        max_calls: int = 50,
        busy_wait_s: tuple[float, ...] = BUSY_WAIT_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        on_metric: Callable[[str, float], None] = lambda name, value: None,
    ) -> None:
        self.factory, self.store = transcriber_factory, store
        self.clock, self.on_metric = clock, on_metric
        self.waiting: set[str] = (
            set()
        )  # calls waiting for the endpoint now (the CallsWaiting metric)
        self.slots = asyncio.Semaphore(max_calls)
        self.busy_wait_s, self.sleep = busy_wait_s, sleep
        self.calls: dict[str, asyncio.Task[str]] = {}
        self.waits: dict[str, int] = {}
        self.unrecorded: set[str] = (
            set()
        )  # calls whose outcome could not be written (their message is kept)

    def start(self, call: CallRequest) -> asyncio.Task[str]:
        """Start (or keep) the call's task; a second start of a live call is a no-op (messages may
        repeat)."""
        task = self.calls.get(call.contact_id)
        if task is None or task.done():
            self.unrecorded.discard(call.contact_id)
            task = asyncio.create_task(self._run(call), name=f"call-{call.contact_id}")
            self.calls[call.contact_id] = task
            # A consumer task runs calls for weeks: an ended call's task is not kept.
            task.add_done_callback(
                lambda done, contact=call.contact_id: self._forget(contact, done)
            )
        return task

    def _forget(self, contact: str, task: asyncio.Task[str]) -> None:
        if self.calls.get(contact) is task:
            del self.calls[contact]

    async def _run(self, call: CallRequest) -> str:
        """The call until its recorded end: every way out is ``Call Ended`` or ``Call Failed`` with
        the reason (an error no branch expects, a refused write, a raw SDK error, fails the call
        with its type and text), and an outcome that cannot be recorded is logged and counted
        (``OutcomesNotRecorded``), never passed over."""
        async with self.slots:
            try:
                return await self._attempts(call)
            except (
                Exception
            ) as error:  # every exit ends in an outcome; a stop (CancelledError) is not an exit
                LOG.exception("call %s failed unexpectedly", call.contact_id)
                if call.contact_id in self.waiting:
                    self.waiting.discard(call.contact_id)
                    self.on_metric("CallsWaiting", float(len(self.waiting)))
                return await self._failed(
                    call, f"an unexpected error: {type(error).__name__}: {error}"
                )

    async def _record(
        self, call: CallRequest, status: str, kind: str, detail: dict[str, Any]
    ) -> bool:
        """The call's event, then its final status in the table; a failure is logged and counted and
        the contact kept in :attr:`unrecorded` (the service then leaves its message to come back).
        Never raises.

        The event goes first and the status only after it: a final status makes every later copy of
        the call's message be deleted unrun (:meth:`connect_consumer.sink.AwsSink.claim_call`), so a
        status written before an event that then failed (or a stop between the two) would lose the
        event for good; this way a lost write leaves the call unfinished, and the copy that comes
        back records both (the event at least once). A stop (cancellation) while recording lets both
        writes finish first, then goes on as a stop."""
        writing = asyncio.ensure_future(self._write_outcome(call, status, kind, detail))
        try:
            return await asyncio.shield(writing)
        except asyncio.CancelledError:
            await (
                writing
            )  # the outcome written whole (the stop waits a write's time), then the stop goes on
            raise

    async def _write_outcome(
        self, call: CallRequest, status: str, kind: str, detail: dict[str, Any]
    ) -> bool:
        reason = cut_utf8(str(detail.get("reason", "")), MAX_REASON_BYTES)
        for what, write in (
            (
                "event",
                lambda: self.store.publish(
                    kind, {"contactId": call.contact_id, **detail, "reason": reason}
                ),
            ),
            ("status", lambda: self.store.set_call(call.contact_id, status, reason)),
        ):
            try:
                await write()
            except Exception:
                LOG.exception(
                    "call %s: its %s %s could not be recorded", call.contact_id, status, what
                )
                self.on_metric("OutcomesNotRecorded", 1.0)
                self.unrecorded.add(call.contact_id)
                return False
        return True

    async def _failed(self, call: CallRequest, reason: str) -> str:
        reason = cut_utf8(reason, MAX_REASON_BYTES)
        await self._record(call, "FAILED", CALL_FAILED, {"reason": reason})
        return f"failed: {reason}"

    async def _attempts(self, call: CallRequest) -> str:
        waits = model_errors = 0
        wait: _Wait | None = None
        while True:
            transcriber = self.factory(call)
            transcriber.announce = (
                waits == 0
            )  # one Call Started, however often the call waited before a final
            try:
                reason = await transcriber.run()
            except (EndpointBusy, EndpointUnavailable) as error:
                if isinstance(error, EndpointUnavailable):
                    model_errors += 1
                    if model_errors > MODEL_ERROR_RETRIES:
                        self._stop_waiting(call, wait)
                        return await self._failed(
                            call, f"{error} (resumed {MODEL_ERROR_RETRIES} times)"
                        )
                if wait is not None and transcriber.checkpoint != wait.checkpoint:
                    self._stop_waiting(
                        call, wait
                    )  # it ran and finished audio since: a new wait begins
                    wait = None
                if wait is None:
                    now = self.clock()
                    checkpoint = transcriber.checkpoint
                    wait = _Wait(
                        since=now,
                        checkpoint=checkpoint,
                        probed=checkpoint.fragment,
                        last_fragment_at=now,
                    )
                    self.waiting.add(call.contact_id)
                    self.on_metric("CallsWaiting", float(len(self.waiting)))
                delay = self.busy_wait_s[min(waits, len(self.busy_wait_s) - 1)]
                waits += 1
                self.waits[call.contact_id] = waits
                reason = cut_utf8(str(error), MAX_REASON_BYTES)
                await self.store.set_call(call.contact_id, "WAITING", reason)
                await self.store.publish(
                    CALL_WAITING,
                    {
                        "contactId": call.contact_id,
                        "reason": reason,
                        "retryInS": delay,
                        "waitingS": round(self.clock() - wait.since, 3),
                        "untranscribedFromS": wait.from_s(),
                        "untranscribedToS": wait.to_s(),
                    },
                )
                await self.sleep(delay)
                if isinstance(error, EndpointUnavailable):
                    # a few tries at most, then Call Failed: resumed from the checkpoint, live or
                    # not
                    continue
                try:
                    ended = await self._still_live(transcriber, wait)
                except CallFailed as failed:
                    self._stop_waiting(call, wait)
                    return await self._failed(call, str(failed))
                if ended is not None:
                    return await self._ended_untranscribed(call, wait, ended)
                continue
            except CallFailed as error:
                self._stop_waiting(call, wait)
                return await self._failed(call, str(error))
            self._stop_waiting(call, wait)
            reason = cut_utf8(reason, MAX_REASON_BYTES)
            await self._record(call, "ENDED", CALL_ENDED, {"reason": reason})
            return reason

    async def _still_live(self, transcriber: CallTranscriber, wait: _Wait) -> str | None:
        """Why the waiting call ended (another contact's fragment, or no new fragment for the call's
        ``quiet_s``), or None while it is live. Reads on from the last fragment probed, so a long
        wait reads each fragment once."""
        last, seconds, ended = await transcriber.probe(wait.probed)
        now = self.clock()
        if last != wait.probed:
            wait.probed, wait.last_fragment_at = last, now
        wait.probed_s += seconds
        if ended is None and now - wait.last_fragment_at >= transcriber.quiet_s:
            ended = "quiet"
        return ended

    async def _ended_untranscribed(self, call: CallRequest, wait: _Wait, ended: str) -> str:
        """The call ended while it waited: its table item and an event say so, with the seconds
        never transcribed."""
        self._stop_waiting(call, wait)
        waited = round(self.clock() - wait.since, 3)
        reason = cut_utf8(
            f"the call ended ({ended}) after waiting {waited:g} s for the endpoint; "
            f"seconds {wait.from_s():g}-{wait.to_s():g} of the call were not transcribed",
            MAX_REASON_BYTES,
        )
        self.on_metric("CallsUntranscribed", 1.0)
        await self._record(
            call,
            "UNTRANSCRIBED",
            CALL_ENDED,
            {
                "reason": reason,
                "transcribed": False,
                "waitedS": waited,
                "untranscribed": {
                    track: [wait.checkpoint.done_s.get(track, 0.0), wait.to_s()]
                    for track in mkv.CONNECT_TRACKS
                },
            },
        )
        return f"untranscribed: {reason}"

    def _stop_waiting(self, call: CallRequest, wait: _Wait | None) -> None:
        if wait is not None and call.contact_id in self.waiting:
            self.waiting.discard(call.contact_id)
            self.on_metric("CallsWaiting", float(len(self.waiting)))

    async def close(self) -> None:
        for task in self.calls.values():
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self.calls.values(), return_exceptions=True)
