"""connect_consumer.consumer: many calls in one task, end to end on loopback (the KVS stand-in:
real Matroska fragments over HTTP, read with boto3 -> the consumer -> the real bridge -> the fake
vLLM; the store in memory): a busy endpoint makes a call wait, a failing call fails alone, and
every call's outcome is recorded."""

from __future__ import annotations

import asyncio
import itertools

import numpy as np
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
from voice_devtools.fake_kvs import FRAGMENT_S, FakeCall

pytestmark = pytest.mark.timeout(600)


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture
def quick_busy_retries(monkeypatch):
    """The client's own pauses before it gives up on ``server_busy`` (1, 2 and 4 s: 7 s of real time
    per try of a waiting call) shortened to 0.05, 0.1 and 0.2 s: the same three retries, then
    EndpointBusy. What the tests assert about the wait is the consumer's own ``busy_wait_s`` and its
    events, which this leaves as they are."""
    from voice_client.realtime import machine

    monkeypatch.setattr(machine, "BUSY_RETRY_DELAYS_S", (0.05, 0.1, 0.2))


def test_a_call_arriving_when_the_endpoint_is_full_waits_then_is_transcribed_whole(
    quick_busy_retries,
):
    """Two stream slots: the first call's two tracks hold both (the call is held open); the second
    is refused (server_busy, after the client's own retries), is marked WAITING with an event saying
    why and for how long, keeps waiting while its stream is live (held open: no new fragment, but
    its quiet time not reached), and once the first call ends (its stream moves on to another
    contact) it is transcribed from its start."""
    from connect_consumer.call import CallRequest

    async def main():
        store, metrics = MemoryStore(), []
        async with servers(max_streams=2) as (url, kvs, vllm):
            first = kvs.add(
                FakeCall("busy-1", "sb1", speech_like(20, 5), speech_like(20, 6), limit=4)
            )
            second = kvs.add(
                FakeCall("busy-2", "sb2", speech_like(10, 7), speech_like(10, 8), limit=2)
            )
            by_id = {"busy-1": first, "busy-2": second}
            quiet = {
                "busy-1": 600.0,
                "busy-2": 600.0,
            }  # each call ends only when its stream moves on
            consumer = Consumer(
                lambda r: transcriber(
                    by_id[r.contact_id], url, kvs, store, quiet_s=quiet[r.contact_id]
                ),
                store,
                busy_wait_s=(1.0,),
                on_metric=lambda name, value: metrics.append((name, value)),
            )
            a = consumer.start(CallRequest("busy-1", first.stream_arn, first.number(0)))
            while len(vllm.sessions) < 2:  # both tracks of the first call hold a stream
                await asyncio.sleep(0.1)
            b = consumer.start(CallRequest("busy-2", second.stream_arn, second.number(0)))
            while store.kinds("busy-2").count("Call Waiting") < 2:
                await asyncio.sleep(0.1)
            first.limit, first.then_contact = None, "the-next-caller"
            while (
                len(vllm.sessions) < 4
            ):  # both tracks of the second call hold a stream: it waits no more
                await asyncio.sleep(0.1)
            second.limit, second.then_contact = None, "the-caller-after"
            return store, await asyncio.gather(a, b), consumer.waits, metrics

    store, reasons, waits, metrics = run(main())
    assert reasons == [
        "the stream moved on to contact the-next-caller",
        "the stream moved on to contact the-caller-after",
    ]
    assert waits["busy-2"] >= 2
    waiting = [detail for kind, detail in store.events if kind == "Call Waiting"]
    assert {detail["contactId"] for detail in waiting} == {"busy-2"}
    assert all(
        "server_busy" in detail["reason"] and detail["retryInS"] == 1.0 for detail in waiting
    )
    assert all(
        later["waitingS"] - earlier["waitingS"]
        >= 1.0  # how long it has waited: 1 s between tries at least
        for earlier, later in itertools.pairwise(waiting)
    )
    # Of the two fragments held open, the first is read while waiting: the second's Segment has an
    # unknown size (the real layout), so its end shows only when the next fragment begins.
    assert waiting[-1]["untranscribedToS"] == FRAGMENT_S
    assert [m for m in metrics if m[0] == "CallsWaiting"] == [
        ("CallsWaiting", 1.0),
        ("CallsWaiting", 0.0),
    ]
    assert store.calls["busy-2"][-1] == "ENDED"
    assert store.kinds("busy-2") == [
        "Call Started",
        *["Call Waiting"] * waits["busy-2"],
        "Call Ended",
    ]
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("busy-2", track), 10.0)
        assert_tiles(store.finals("busy-1", track), 20.0)


def test_a_call_that_ends_while_it_waits_for_the_endpoint_is_marked_untranscribed_with_its_seconds(
    quick_busy_retries,
):
    """The endpoint stays full; the waiting call's stream ends (the caller hung up after three
    fragments): the call is not dropped silently: its table item says UNTRANSCRIBED, a Call Ended
    event names the seconds of each track never transcribed, and the CallsUntranscribed metric
    counts it."""
    from connect_consumer.call import CallRequest

    async def main():
        store, metrics = MemoryStore(), []
        async with servers(max_streams=2) as (url, kvs, vllm):
            first = kvs.add(
                FakeCall("full-1", "sf1", speech_like(20, 5), speech_like(20, 6), limit=4)
            )
            three_fragments = (
                3 * FRAGMENT_S
            )  # the caller hangs up after three fragments: the stream ends there
            second = kvs.add(
                FakeCall(
                    "gone-2",
                    "sf2",
                    speech_like(three_fragments, 7),
                    speech_like(three_fragments, 8),
                )
            )
            by_id = {"full-1": first, "gone-2": second}
            quiet = {"full-1": 600.0, "gone-2": 1.0}
            consumer = Consumer(
                lambda r: transcriber(
                    by_id[r.contact_id], url, kvs, store, quiet_s=quiet[r.contact_id]
                ),
                store,
                busy_wait_s=(0.5,),
                on_metric=lambda name, value: metrics.append((name, value)),
            )
            a = consumer.start(CallRequest("full-1", first.stream_arn, first.number(0)))
            while len(vllm.sessions) < 2:
                await asyncio.sleep(0.1)
            gone = await consumer.start(CallRequest("gone-2", second.stream_arn, second.number(0)))
            first.limit, first.then_contact = None, "the-next-caller"
            return store, gone, await a, metrics

    store, gone, first_reason, metrics = run(main())
    assert first_reason == "the stream moved on to contact the-next-caller"
    assert gone.startswith(f"untranscribed: the call ended ({END_OF_STREAM}) after waiting ")
    three = 3 * FRAGMENT_S
    assert f"seconds 0-{three:g} of the call were not transcribed" in gone
    assert store.calls["gone-2"][-1] == "UNTRANSCRIBED"
    assert store.kinds("gone-2")[0] == "Call Started" and store.kinds("gone-2")[-1] == "Call Ended"
    assert set(store.kinds("gone-2")[1:-1]) == {"Call Waiting"}
    ended = [
        detail
        for kind, detail in store.events
        if kind == "Call Ended" and detail["contactId"] == "gone-2"
    ]
    assert len(ended) == 1 and ended[0]["transcribed"] is False and ended[0]["waitedS"] > 0
    assert ended[0]["untranscribed"] == {track: [0.0, three] for track in mkv.CONNECT_TRACKS}
    assert not store.finals("gone-2", mkv.TRACK_FROM_CUSTOMER)
    assert ("CallsUntranscribed", 1.0) in metrics
    assert [m for m in metrics if m[0] == "CallsWaiting"] == [
        ("CallsWaiting", 1.0),
        ("CallsWaiting", 0.0),
    ]
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("full-1", track), 20.0)


@pytest.mark.parametrize(
    "flaw, expected",
    [
        ({"codec_id": "A_OPUS", "mime_type": "audio/opus"}, "MimeType 'audio/opus'"),
        ({"layout": "lavf", "codec_id": "A_PCM/INT/BIG"}, "A_PCM/INT/BIG"),
        ({"truncate_fragment": 2}, "truncated"),
    ],
)
def test_a_bad_fragment_fails_that_call_only_with_an_event_naming_the_flaw(flaw, expected):
    from connect_consumer.call import CallRequest

    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, _vllm):
            bad = kvs.add(FakeCall("bad", "sbad", speech_like(10, 9), speech_like(10, 10), **flaw))
            good = kvs.add(FakeCall("good", "sgood", speech_like(10, 11), speech_like(10, 12)))
            by_id = {"bad": bad, "good": good}
            consumer = Consumer(lambda r: transcriber(by_id[r.contact_id], url, kvs, store), store)
            tasks = [
                consumer.start(CallRequest(c.contact_id, c.stream_arn, c.number(0)))
                for c in (bad, good)
            ]
            return store, await asyncio.gather(*tasks)

    store, (bad_reason, good_reason) = run(main())
    assert bad_reason.startswith("failed:") and expected in bad_reason
    failed = [detail for kind, detail in store.events if kind == "Call Failed"]
    assert [d["contactId"] for d in failed] == ["bad"] and expected in failed[0]["reason"]
    assert store.calls["bad"][-1] == "FAILED"
    assert good_reason == END_OF_STREAM
    for track in mkv.CONNECT_TRACKS:
        assert_tiles(store.finals("good", track), 10.0)


def test_finals_carry_the_audio_offsets_they_cover_across_a_resend():
    """The clients' machine reports where each generation's audio lies in the source; after a cut
    the resent audio keeps its offsets (the consumer's exactly-once checkpoint relies on it)."""
    from voice_client.realtime import (
        OpenStream,
        SendEvent,
        ShowGenerationText,
        TranscriptionMachine,
        TransportClosed,
    )

    machine = TranscriptionMachine(max_stream_s=600)
    machine.start(0.0)
    machine.opened(1, 0.0)
    loud = (np.full(2048, 8000, dtype="<i2")).tobytes()  # 128 ms
    for i in range(10):
        machine.audio(loud, 0.1 * i)
    actions = machine.closed(1, TransportClosed("reset"), 1.0)  # a cut: resend on stream 2
    assert any(isinstance(a, OpenStream) and a.stream == 2 for a in actions)
    machine.opened(2, 1.1)
    machine.end_of_audio(1.2)
    done = machine.received(2, '{"type": "transcription.done", "text": "ten chunks"}', 1.3)
    (final,) = [a for a in done if isinstance(a, ShowGenerationText)]
    assert (final.text, final.start_s, round(final.end_s, 6)) == ("ten chunks", 0.0, 1.28)
    assert not any(isinstance(a, SendEvent) for a in done)


@pytest.mark.parametrize("failures, expected", [(2, END_OF_STREAM), (4, "failed:")])
def test_a_model_error_on_a_stream_makes_the_call_wait_and_resume_a_few_times_then_fail(
    failures, expected
):
    """SageMaker answers a stream with a ModelError when the container did not accept it within 250
    ms (seen with vLLM's real server on a loaded CPU): the call waits and resumes from its
    checkpoint, whole; a container that keeps failing fails the call after MODEL_ERROR_RETRIES
    resumes instead of holding it forever."""
    from connect_consumer.call import CallRequest
    from connect_consumer.consumer import MODEL_ERROR_RETRIES
    from voice_client.realtime import RealtimeError, WebSocketTransport

    async def main():
        store = MemoryStore()
        async with servers() as (url, kvs, _vllm):
            call = kvs.add(FakeCall("model-error", "sme", speech_like(8, 13), speech_like(8, 14)))
            attempts = []

            async def opener():  # every stream of the call's first `failures` attempts is refused
                if len(attempts) <= failures:
                    raise RealtimeError(
                        "ModelError from endpoint 'voxtral-realtime': the model container did not "
                        "accept the WebSocket connection within 250 ms",
                        code="ModelError",
                    )
                return await WebSocketTransport.connect(url)

            def factory(request):
                attempts.append(request)
                made = transcriber(call, url, kvs, store)
                made.opener = opener
                return made

            consumer = Consumer(factory, store, busy_wait_s=(0.1,))
            reason = await consumer.start(
                CallRequest(call.contact_id, call.stream_arn, call.number(0))
            )
        return store, reason

    store, reason = run(main())
    assert reason.startswith(expected)
    waits = min(failures, MODEL_ERROR_RETRIES)
    ended = ["Call Ended"] if expected == END_OF_STREAM else ["Call Failed"]
    assert (
        store.kinds("model-error") == ["Call Started"] + ["Call Waiting"] * waits + ended
    )  # one Call Started
    if expected == END_OF_STREAM:
        for track in mkv.CONNECT_TRACKS:
            assert_tiles(store.finals("model-error", track), 8.0)
    else:
        assert store.calls["model-error"][-1] == "FAILED" and "resumed 3 times" in reason


# ---- every exit path ends in a recorded outcome ------------------------------------------------


def raw_errors():
    """Errors no branch of the consumer expects, as the SDKs raise them."""
    from botocore.exceptions import ClientError, ResponseStreamingError

    return [
        ResponseStreamingError(
            error=ConnectionResetError(104, "Connection reset by peer")
        ),  # GetMedia, mid-fragment
        ClientError(
            {
                "Error": {
                    "Code": "ProvisionedThroughputExceededException",
                    "Message": "x" * 1_000_000,
                }
            },
            "TransactWriteItems",
        ),  # a DynamoDB error with a huge message
        ClientError(
            {
                "Error": {
                    "Code": "AccessDeniedException",
                    "Message": "not authorized to perform: events:PutEvents",
                }
            },
            "PutEvents",
        ),  # an EventBridge refusal
    ]


@pytest.mark.parametrize("error", raw_errors(), ids=["getmedia-reset", "dynamodb", "eventbridge"])
def test_an_unexpected_error_fails_the_call_with_a_bounded_reason_never_leaving_it_active(error):
    """A raw SDK error out of a call (GetMedia reset mid-fragment, a DynamoDB or EventBridge error)
    used to escape the consumer: no Call Failed event, the call ACTIVE for ever. It ends FAILED with
    the error's type and text, cut to MAX_REASON_BYTES."""
    from connect_consumer.call import CallRequest
    from connect_consumer.sink import MAX_REASON_BYTES

    class Raising:
        announce, checkpoint = True, None

        async def run(self):
            await store.set_call("c-raw", "ACTIVE")
            raise error

    store = MemoryStore()

    async def main():
        return await Consumer(lambda request: Raising(), store).start(
            CallRequest("c-raw", "arn", "1")
        )

    reason = run(main())
    assert store.calls["c-raw"] == ["ACTIVE", "FAILED"]
    (failed,) = [detail for kind, detail in store.events if kind == "Call Failed"]
    assert reason == f"failed: {failed['reason']}" and failed["contactId"] == "c-raw"
    assert failed["reason"].startswith(f"an unexpected error: {type(error).__name__}: ")
    assert len(failed["reason"].encode()) <= MAX_REASON_BYTES


def test_an_outcome_that_cannot_be_written_is_logged_and_counted_not_passed_over(caplog):
    """The table and the bus both refuse the call's outcome: the consumer does not raise, says so in
    the log, counts it (OutcomesNotRecorded) and keeps the contact in ``unrecorded`` (its message is
    then left to come back, so that another try records it)."""
    from connect_consumer.call import CallRequest

    class Ending:
        announce, checkpoint = True, None

        async def run(self):
            return "quiet"

    class Refusing(MemoryStore):
        async def set_call(self, contact_id, status, reason=""):
            raise RuntimeError(
                "An error occurred (InternalServerError) when calling the UpdateItem operation"
            )

        async def publish(self, kind, detail):
            raise RuntimeError(
                "An error occurred (InternalException) when calling the PutEvents operation"
            )

    metrics = []

    async def main():
        consumer = Consumer(
            lambda request: Ending(), Refusing(), on_metric=lambda *metric: metrics.append(metric)
        )
        reason = await consumer.start(CallRequest("c-lost", "arn", "1"))
        return consumer, reason

    consumer, reason = run(main())
    assert reason == "quiet" and consumer.unrecorded == {"c-lost"}
    assert metrics == [("OutcomesNotRecorded", 1.0)]
    logged = [record.getMessage() for record in caplog.records]
    assert "call c-lost: its ENDED event could not be recorded" in logged


def test_a_final_status_is_written_only_after_the_event_so_a_lost_event_is_published_again():
    """The bus refuses the Call Ended event: the table keeps the call unfinished (a final status
    would make the copy of its message that comes back be deleted unrun, and the event would be lost
    for good); once the bus takes it, the next try publishes the event and then writes ENDED."""
    from connect_consumer.call import CallRequest

    class Ending:
        announce, checkpoint = True, None

        async def run(self):
            return "the call's stream ended"

    class BusDownOnce(MemoryStore):
        refused = 0

        async def publish(self, kind, detail):
            if kind == "Call Ended" and not self.refused:
                self.refused += 1
                raise RuntimeError(
                    "An error occurred (InternalException) when calling the PutEvents operation"
                )
            await super().publish(kind, detail)

    store = BusDownOnce()

    async def main():
        consumer = Consumer(lambda request: Ending(), store)
        await consumer.start(CallRequest("c-bus", "arn", "1"))
        first = (set(consumer.unrecorded), list(store.calls.get("c-bus", [])))
        await consumer.start(CallRequest("c-bus", "arn", "1"))  # the copy that came back
        return first, consumer.unrecorded

    (unrecorded, statuses), after = run(main())
    assert unrecorded == {"c-bus"} and "ENDED" not in statuses
    assert store.calls["c-bus"] == ["ENDED"] and after == set()
    assert [kind for kind, _ in store.events] == ["Call Ended"]


def test_a_stop_while_the_outcome_is_recorded_lets_the_event_and_the_status_both_be_written():
    """SIGTERM cancels the call tasks; one that is publishing its Call Ended event finishes the
    event and writes ENDED before the stop goes on (no event lost, none published twice by the task
    that resumes the call)."""
    from connect_consumer.call import CallRequest

    class Ending:
        announce, checkpoint = True, None

        async def run(self):
            return "the call's stream ended"

    publishing = asyncio.Event()
    go_on = asyncio.Event()

    class SlowBus(MemoryStore):
        async def publish(self, kind, detail):
            publishing.set()
            await go_on.wait()
            await super().publish(kind, detail)

    store = SlowBus()

    async def main():
        consumer = Consumer(lambda request: Ending(), store)
        task = consumer.start(CallRequest("c-stop", "arn", "1"))
        await publishing.wait()
        task.cancel()
        await asyncio.sleep(0)
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert [kind for kind, _ in store.events] == ["Call Ended"] and store.calls["c-stop"] == [
        "ENDED"
    ]


def test_an_ended_call_is_not_kept_by_the_consumer():
    """A consumer task runs calls for weeks: each call's task is dropped once it ended (not one Task
    per call ever taken kept in memory), and the same contact can start again."""
    from connect_consumer.call import CallRequest

    class Ending:
        announce, checkpoint = True, None

        async def run(self):
            return "the call's stream ended"

    async def main():
        consumer = Consumer(lambda request: Ending(), MemoryStore())
        for number in range(3):
            await consumer.start(CallRequest(f"c-{number}", "arn", "1"))
        await asyncio.sleep(0)
        kept = dict(consumer.calls)
        again = await consumer.start(CallRequest("c-0", "arn", "1"))
        await asyncio.sleep(0)
        return kept, again, dict(consumer.calls)

    kept, again, after = run(main())
    assert kept == {} and again == "the call's stream ended" and after == {}
