"""voice_client.realtime.machine: the state machine transition by transition (no sockets, no
clock), and its bounds against a hostile server (deep JSON, huge events, an endless transcript, a
many-line error)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.unit.voice_client.realtime.realtime_testkit import (
    CHUNK_S,
    LOUD,
    QUIET,
    delta,
    done,
    error,
    pcm_with_index,
    sent,
    started,
)
from voice_client import realtime
from voice_client.audio import CHUNK_BYTES
from voice_client.realtime import (
    CloseStream,
    Failed,
    Finished,
    OpenStream,
    RealtimeError,
    Replaying,
    ShowDelta,
    ShowGenerationText,
    Transcript,
    TranscriptionMachine,
    TransportClosed,
)

# ---- the state machine, one transition at a time ------------------------------------------------


def test_session_start_opens_a_stream_selects_the_model_and_starts_a_generation():
    machine = TranscriptionMachine(model="m")
    assert machine.start(0.0) == [OpenStream(1)]
    chunk = pcm_with_index(1)[0]
    assert machine.audio(chunk, 0.1) == []  # the stream is still opening: the audio waits
    assert sent(machine.opened(1, 0.2)) == ["update", "commit", "append 0"]
    assert sent(machine.audio(pcm_with_index(2)[1], 0.3)) == ["append 1"]


def test_delta_is_shown_and_grows_the_transcript():
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    assert machine.received(1, delta("Hello "), 0.2) == [ShowDelta("Hello ")]
    assert machine.received(1, delta("world"), 0.3) == [ShowDelta("world")]
    assert machine.transcript.text == "Hello world"
    assert machine.received(1, json.dumps({"type": "session.created"}), 0.3) == []


def test_done_after_the_end_of_audio_finishes_and_closes():
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    assert sent(machine.end_of_audio(0.2)) == ["final"]
    machine.received(1, delta("Hi"), 0.3)
    assert machine.received(1, done("Hi."), 0.4) == [
        ShowGenerationText("Hi."),
        CloseStream(1),
        Finished(),
    ]
    result = machine.result(0.5)
    assert (result.transcript, result.generations, result.sessions, result.elapsed_s) == (
        "Hi.",
        1,
        1,
        pytest.approx(0.3),
    )


def test_generation_limit_ends_the_generation_and_holds_audio_until_done():
    machine, _ = started(session_limit_s=0.4)  # three 128 ms chunks
    chunks = pcm_with_index(5)
    actions = [
        action for index, chunk in enumerate(chunks) for action in machine.audio(chunk, 0.1 * index)
    ]
    assert sent(actions) == [
        "append 0",
        "append 1",
        "append 2",
        "final",
    ]  # chunks 3 and 4 wait for the done
    after_done = machine.received(1, done("one"), 0.6)
    assert after_done[0] == ShowGenerationText("one")
    assert sent(after_done) == [
        "commit",
        "append 3",
        "append 4",
    ]  # the next generation, same stream


def test_a_generation_ends_at_a_quiet_chunk_after_the_target_length():
    machine, _ = started()
    loud = int(realtime.GENERATION_TARGET_S / CHUNK_S) + 1
    actions = [action for index in range(loud) for action in machine.audio(LOUD, index * CHUNK_S)]
    assert "final" not in sent(actions)
    assert sent(machine.audio(QUIET, loud * CHUNK_S)) == ["final"]


def test_a_quiet_chunk_is_relative_to_the_generations_loudness():
    machine, _ = started()
    loud = int(realtime.GENERATION_TARGET_S / CHUNK_S) + 1
    for index in range(loud):
        machine.audio(LOUD, index * CHUNK_S)  # RMS 0.24
    noise_floor = (
        np.full(CHUNK_BYTES // 2, 1000, dtype="<i2")
    ).tobytes()  # RMS 0.03: above -40 dBFS
    assert sent(machine.audio(noise_floor, loud * CHUNK_S)) == [
        "final"
    ]  # but under a quarter of the speech


def test_stream_rollover_opens_the_next_stream_ahead_and_moves_at_a_quiet_chunk():
    machine, _ = started(max_stream_s=10)  # window: 2 s before 10 s
    now = 0.0
    for _ in range(60):  # 7.7 s of speech
        now += CHUNK_S
        assert not [a for a in machine.audio(LOUD, now) if isinstance(a, OpenStream)]
    now = 8.1
    actions = machine.audio(LOUD, now)
    assert OpenStream(2) in actions  # inside the window: the next stream opens ahead
    assert sent(machine.opened(2, now)) == ["update"]  # and waits, idle
    moved = machine.audio(QUIET, now + 0.2)  # the first quiet chunk in the window
    assert sent(moved, 1) == ["final"]
    assert sent(moved, 2) == ["commit", "append 0"]  # new audio flows at once on the new stream
    assert machine.received(2, delta("new "), now + 0.3) == [ShowDelta("new ")]
    assert machine.received(1, delta("old "), now + 0.4) == [ShowDelta("old ")]
    assert machine.received(1, done("old."), now + 0.5) == [
        ShowGenerationText("old."),
        CloseStream(1),
    ]
    assert (
        machine.transcript.text == "old. new "
    )  # in audio order, whatever order the streams answer in
    assert machine.result(now).rollovers == 1


def _moved_with_a_short_last_generation():
    """A machine moved from stream 1 (its generation of 61 loud chunks finishing there) to stream 2
    at a quiet chunk, where the audio ended 7 loud chunks later: both generations wait for their
    transcription.done."""
    machine, _ = started(max_stream_s=10)
    now = 0.0
    for _ in range(60):
        now += CHUNK_S
        machine.audio(LOUD, now)
    now = 8.1
    machine.audio(LOUD, now)
    machine.opened(2, now)
    machine.audio(QUIET, now + 0.2)  # the move: stream 1's generation ends here
    for index in range(7):
        machine.audio(LOUD, now + 0.3 + index * CHUNK_S)
    assert sent(machine.end_of_audio(now + 1.3), 2) == ["final"]
    return machine, now + 1.4


def test_a_later_generation_answered_first_waits_for_the_earlier_one():
    # Seen with vLLM's real server (tests/vllm, a 20-minute Connect call): the short last generation
    # on the new stream finished before the old stream's, and the consumer stored its final, and
    # moved its checkpoint, past audio whose text had not arrived.
    machine, now = _moved_with_a_short_last_generation()
    assert machine.received(2, done("last."), now) == []  # held: stream 1's generation is still out
    assert machine.next_deadline() == pytest.approx(
        now - 1.4 + 0.2 + realtime.DONE_TIMEOUT_S
    )  # stream 1's only
    released = machine.received(1, done("old."), now + 0.1)
    assert released == [
        ShowGenerationText("old."),
        ShowGenerationText("last."),
        CloseStream(1),
        CloseStream(2),
        Finished(),
    ]
    old, last = released[0], released[1]
    assert (old.start_s, old.end_s) == (0.0, pytest.approx(61 * CHUNK_S))
    assert (last.start_s, last.end_s) == (
        pytest.approx(61 * CHUNK_S),
        pytest.approx(69 * CHUNK_S),
    )  # tiles on
    assert machine.transcript.text == "old. last."
    assert machine.result(now).generations == 2


def test_a_held_generation_is_resent_with_the_earlier_one_when_its_stream_drops():
    machine, now = _moved_with_a_short_last_generation()
    machine.received(2, done("last."), now)
    actions = machine.closed(1, TransportClosed("reset"), now + 0.1)
    assert not [a for a in actions if isinstance(a, ShowGenerationText)]
    replaying = next(a for a in actions if isinstance(a, Replaying))
    assert (
        f"resending this session's {69 * CHUNK_S:.1f} s" in replaying.reason
    )  # both generations' audio
    assert (
        machine.transcript.text == ""
    )  # the held text is discarded with its audio: shown once, after the resend


def test_stream_rollover_is_forced_at_max_stream_s_without_a_quiet_chunk():
    machine, _ = started(max_stream_s=10)
    now = 0.0
    while now < 9.9:
        now += CHUNK_S
        actions = machine.audio(LOUD, now)
        if OpenStream(2) in actions:
            machine.opened(2, now)
        assert "final" not in sent(actions)
    moved = machine.audio(LOUD, 10.0)
    assert sent(moved, 1) == ["final"] and sent(moved, 2)[:1] == ["commit"]


def test_a_rollover_in_silence_moves_on_the_clock():
    machine, _ = started(max_stream_s=10)
    machine.audio(LOUD, 0.1)
    deadline = machine.next_deadline()
    assert deadline == pytest.approx(8.0)  # open the next stream ahead
    assert machine.tick(8.0) == [OpenStream(2)]
    machine.opened(2, 8.1)
    assert machine.next_deadline() == pytest.approx(10.0)  # then move at 10 s at the latest
    moved = machine.tick(10.0)
    assert sent(moved, 1) == ["final"] and sent(moved, 2) == ["commit"]


def test_a_dropped_stream_resends_only_the_audio_since_the_last_done():
    machine, _ = started(session_limit_s=0.4)
    chunks = pcm_with_index(5)
    for index, chunk in enumerate(
        chunks[:4]
    ):  # chunk 3 would pass 0.4 s: the first generation ends before it
        machine.audio(chunk, index * 0.1)
    machine.received(1, delta("one"), 0.35)
    assert sent(machine.received(1, done("one."), 0.4)) == [
        "commit",
        "append 3",
    ]  # chunks 0-2 are done for good
    machine.received(1, delta("four-partial"), 0.55)
    machine.audio(chunks[4], 0.6)
    actions = machine.closed(1, TransportClosed("reset"), 0.7)
    assert actions[0] == CloseStream(1)
    assert (
        isinstance(actions[1], Replaying) and "resending this session's 0.3 s" in actions[1].reason
    )
    assert actions[2:] == [OpenStream(2)]
    assert machine.transcript.text == "one."  # the partial text of the resent audio is gone
    assert sent(machine.opened(2, 0.8)) == ["update", "commit", "append 3", "append 4"]
    machine.received(2, delta("four five"), 0.9)
    assert machine.transcript.text == "one. four five"  # no gap, nothing twice
    assert machine.result(1.0).replayed_audio_s == pytest.approx(2 * CHUNK_S)


@pytest.mark.parametrize("code", ["upstream_closed", "server_shutdown", "ModelStreamError"])
def test_codes_that_end_a_stream_but_not_the_endpoint_count_as_a_cut(code):
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    if code == "ModelStreamError":  # SageMaker's: raised by the transport
        actions = machine.closed(1, RealtimeError("socket closed", code=code), 0.2)
    else:
        actions = machine.received(1, error(code), 0.2)
    assert (
        actions[0] == CloseStream(1)
        and isinstance(actions[1], Replaying)
        and actions[2] == OpenStream(2)
    )
    assert (
        machine.closed(1, None, 0.3) == []
    )  # the bridge's close after its error event: already handled


def test_a_second_cut_without_a_done_in_between_fails():
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    machine.closed(1, TransportClosed("reset"), 0.2)
    machine.opened(2, 0.3)
    actions = machine.closed(2, TransportClosed("reset again"), 0.4)
    assert isinstance(actions[-1], Failed) and actions[-1].error.code == "stream_dropped"
    assert "dropped again after a reopen" in str(actions[-1].error)


def test_a_done_between_two_cuts_lets_the_second_one_recover_too():
    machine, _ = started(session_limit_s=0.3)
    chunks = pcm_with_index(4)
    machine.audio(chunks[0], 0.0)
    machine.closed(1, TransportClosed("reset"), 0.1)
    machine.opened(2, 0.2)
    machine.audio(chunks[1], 0.3)
    machine.audio(chunks[2], 0.4)  # over 0.3 s: the generation of chunks 0-1 ends
    machine.received(2, done("a b"), 0.5)
    machine.audio(chunks[3], 0.6)
    actions = machine.closed(2, TransportClosed("reset"), 0.7)
    assert OpenStream(3) in actions and not any(isinstance(action, Failed) for action in actions)


def test_server_busy_closes_the_stream_and_retries_after_a_pause():
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    actions = machine.received(
        1, error("server_busy", "256 streams are open", max_streams=256), 0.2
    )
    assert actions[0] == CloseStream(1) and isinstance(actions[1], Replaying)
    assert "busy" in actions[1].reason and not [a for a in actions if isinstance(a, OpenStream)]
    assert machine.next_deadline() == pytest.approx(0.2 + realtime.BUSY_RETRY_DELAYS_S[0])
    assert machine.tick(1.2) == [OpenStream(2)]
    assert sent(machine.opened(2, 1.3)) == [
        "update",
        "commit",
        "append 8000",
    ]  # the audio is not lost


def test_server_busy_too_often_fails_with_the_hint():
    machine, _ = started()
    now = 0.0
    for stream in range(1, len(realtime.BUSY_RETRY_DELAYS_S) + 2):
        actions = machine.received(stream, error("server_busy"), now)
        if stream <= len(realtime.BUSY_RETRY_DELAYS_S):
            now = machine.next_deadline()
            machine.tick(now)
            machine.opened(stream + 1, now)
    assert isinstance(actions[-1], Failed) and actions[-1].error.code == "server_busy"
    assert "scale the endpoint out" in str(actions[-1].error)


def test_a_cut_mid_commit_resends_the_finishing_generation():
    machine, _ = started()
    chunks = pcm_with_index(2)
    machine.audio(chunks[0], 0.1)
    machine.audio(chunks[1], 0.2)
    assert sent(machine.end_of_audio(0.3)) == ["final"]
    machine.received(1, delta("partial"), 0.35)
    actions = machine.closed(1, TransportClosed("reset while waiting for transcription.done"), 0.4)
    assert OpenStream(2) in actions and machine.transcript.text == ""
    assert sent(machine.opened(2, 0.5)) == ["update", "commit", "append 0", "append 1", "final"]
    assert machine.received(2, done("both"), 0.6)[-1] == Finished()
    assert machine.transcript.text == "both"


def test_session_limit_reads_limit_s_and_resends_under_the_lower_limit():
    machine, _ = started()
    chunks = pcm_with_index(30)  # 3.84 s
    for index, chunk in enumerate(chunks):
        machine.audio(chunk, index * 0.01)
    actions = machine.received(
        1, error("session_limit", "any words at all", limit_s=2.0, audio_s=3.84), 0.4
    )
    assert isinstance(actions[1], Replaying) and "using 2 s" in actions[1].reason
    assert machine.session_limit_s == pytest.approx(1.8)
    resent = sent(machine.opened(2, 0.5))
    assert resent == [
        "update",
        "commit",
        *[f"append {index}" for index in range(14)],
        "final",
    ]  # 1.792 s <= 1.8 s
    assert machine.result(0.6).reopens == 0  # a lower limit, not a cut


def test_session_limit_without_fields_falls_back_to_the_audio_sent():
    machine, _ = started()
    for index, chunk in enumerate(pcm_with_index(10)):
        machine.audio(chunk, index * 0.01)
    machine.received(1, error("session_limit"), 0.2)
    assert machine.session_limit_s == pytest.approx(10 * CHUNK_S * realtime.SESSION_LIMIT_MARGIN)


def test_the_next_stream_timing_out_idle_is_dropped_quietly():
    machine, _ = started(max_stream_s=10)
    machine.audio(LOUD, 0.1)
    machine.tick(8.0)
    machine.opened(2, 8.1)
    assert machine.received(2, error("idle_timeout", idle_timeout_s=60), 8.2) == [CloseStream(2)]
    assert machine.closed(2, None, 8.25) == []  # no audio was on it: nothing to resend
    actions = machine.audio(LOUD, 8.3)
    assert OpenStream(3) in actions and sent(actions, 1) == [
        "append 8000"
    ]  # the active stream goes on


def test_the_first_stream_failing_to_open_fails_but_a_later_one_is_a_cut():
    machine = TranscriptionMachine(model="m")
    machine.start(0.0)
    actions = machine.open_failed(
        1, RealtimeError("cannot open a WebSocket", code="connect_failed"), 0.1
    )
    assert isinstance(actions[-1], Failed) and actions[-1].error.code == "connect_failed"
    machine, _ = started(max_stream_s=10)
    machine.audio(LOUD, 0.1)
    machine.tick(8.0)  # the next stream opens ahead ...
    assert (
        machine.open_failed(2, RealtimeError("refused", code="connect_failed"), 8.1) == []
    )  # ... and is retried
    actions = machine.audio(
        LOUD, 10.0
    )  # the move opens a new stream, which fails too: a cut, audio resent
    assert OpenStream(3) in actions
    recovered = machine.open_failed(3, RealtimeError("refused", code="connect_failed"), 10.1)
    assert isinstance(recovered[-1], OpenStream) and any(
        isinstance(action, Replaying) for action in recovered
    )


def test_no_done_after_a_final_commit_times_out_on_the_clock():
    machine, _ = started(done_timeout_s=5)
    machine.audio(LOUD, 0.1)
    machine.end_of_audio(0.2)
    assert machine.next_deadline() == pytest.approx(5.2)
    actions = machine.tick(5.2)
    assert isinstance(actions[-1], Failed) and actions[-1].error.code == "timeout"


def test_other_error_codes_fail_with_their_hint_and_close_every_stream():
    machine, _ = started()
    machine.audio(LOUD, 0.1)
    actions = machine.received(1, error("model_not_found"), 0.2)
    assert actions[0] == CloseStream(1)
    assert isinstance(actions[1], Failed) and "(model_not_found): boom; pass --model" in str(
        actions[1].error
    )
    assert machine.finished and machine.received(1, delta("late"), 0.3) == []


def test_the_source_is_not_read_while_much_audio_waits():
    machine = TranscriptionMachine(model="m")
    machine.start(0.0)  # the stream never opens
    count = 0
    while machine.wants_audio:
        machine.audio(LOUD, 0.0)
        count += 1
    assert count == int(realtime.MAX_BUFFERED_S / CHUNK_S) + 1


# ---- a hostile server: deep JSON, huge events, an endless transcript, a many-line error --------


def test_deeply_nested_json_fails_cleanly_instead_of_raising_recursion_error():
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(1, "[" * 2000 + "]" * 2000, 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert failed.error.code == "bad_message"
    assert "nests deeper than 32 levels" in str(failed.error)
    assert CloseStream(1) in actions


def test_an_event_larger_than_the_bound_fails_before_it_is_parsed():
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    huge_done = done("x" * realtime.MAX_EVENT_BYTES)
    actions = machine.received(1, huge_done, 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert failed.error.code == "message_too_large"
    assert f"a {len(huge_done):,}-byte event, more than the 1,048,576 bytes" in str(failed.error)


def test_a_transcript_past_the_total_bound_ends_the_run():
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    one_mib_delta = delta("x" * (realtime.MAX_EVENT_BYTES - 100))
    results = [
        machine.received(1, one_mib_delta, 0.1)
        for _ in range(realtime.MAX_TRANSCRIPT_CHARS // (2**20) + 1)
    ]
    assert all(isinstance(actions[0], ShowDelta) for actions in results[:-1])
    (failed,) = [action for action in results[-1] if isinstance(action, Failed)]
    assert failed.error.code == "transcript_too_large"
    assert machine.finished


def test_a_done_text_replaces_its_deltas_in_the_count_and_a_discarded_segment_leaves_it():
    transcript = Transcript()
    machine, _ = started(transcript=transcript)
    machine.audio(LOUD, 0.0)
    machine.received(1, delta("abc"), 0.1)
    machine.received(1, delta("de"), 0.1)
    assert transcript.chars == 5
    machine.end_of_audio(0.2)
    machine.received(1, done("abcdef"), 0.3)
    assert (transcript.chars, transcript.text) == (6, "abcdef")
    machine2, _ = started(transcript=(kept := Transcript()))
    machine2.audio(LOUD, 0.0)
    machine2.received(1, delta("lost"), 0.1)
    machine2.closed(
        1, TransportClosed("drop"), 0.2
    )  # the generation is resent: its text is discarded
    assert kept.chars == 0


@pytest.mark.parametrize(
    "message", ["line one\nline two\r\n\x1b[2J" * 200, {"nested": ["detail"] * 500}]
)
def test_an_error_event_fails_with_one_bounded_line(message):
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(
        1, json.dumps({"type": "error", "error": message, "code": "processing_error"}), 0.1
    )
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    text = str(failed.error)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert len(text) < 500
    assert failed.error.code == "processing_error"


def test_an_error_code_that_is_not_a_short_string_is_bounded_too():
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(
        1, json.dumps({"type": "error", "error": "x", "code": {"a": "b\n" * 100}}), 0.1
    )
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert (
        isinstance(failed.error.code, str)
        and len(failed.error.code) <= 64
        and "\n" not in failed.error.code
    )


@pytest.mark.parametrize(
    ("code", "shown"), [("\x1b]0;owned\x07", "(\\x1b]0;owned\\x07)"), (None, "(no code)")]
)
def test_a_short_error_code_is_escaped_and_a_missing_one_named(code, shown):
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(1, json.dumps({"type": "error", "error": "x", "code": code}), 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert "\x1b" not in str(failed.error) and "\x07" not in str(failed.error)
    assert f"the endpoint reported an error {shown}: x;" in str(failed.error)


def test_a_done_that_never_comes_can_go_on_on_a_new_stream_with_the_deltas_as_the_text():
    """vLLM #33962: a final commit left unanswered while every delta was sent. With
    ``on_done_timeout="go_on"`` (the Connect consumer's live calls) the generation's deltas become
    its text, its stream is closed, and the audio after it goes on a new stream: the transcription
    does not end."""
    from voice_client.realtime.policy import DONE_TIMEOUT_GO_ON

    machine, _ = started(done_timeout_s=5, session_limit_s=0.5, on_done_timeout=DONE_TIMEOUT_GO_ON)
    for index, chunk in enumerate(
        pcm_with_index(4)
    ):  # the fourth chunk is past the 0.5 s limit: the generation
        machine.audio(chunk, 0.1 * index)  # ends before it, which waits for the generation's done
    assert machine.received(1, delta("hello "), 0.4) == [ShowDelta("hello ")]
    assert machine.next_deadline() == pytest.approx(5.3)
    actions = machine.tick(5.3)
    assert (
        isinstance(actions[0], Replaying)
        and "no transcription.done within 5 s" in actions[0].reason
    )
    assert actions[1:3] == [CloseStream(1), OpenStream(2)]
    (text,) = [action for action in actions if isinstance(action, ShowGenerationText)]
    assert (text.text, text.start_s, round(text.end_s, 6)) == ("hello ", 0.0, round(3 * CHUNK_S, 6))
    assert not machine.finished and not any(isinstance(action, Failed) for action in actions)
    assert sent(machine.opened(2, 5.4)) == [
        "update",
        "commit",
        "append 3",
    ]  # the held chunk, on the new stream
    assert machine.received(1, done("late"), 5.5) == []  # the closed stream is no longer heard


def test_on_done_timeout_is_checked():
    with pytest.raises(ValueError, match="on_done_timeout must be 'fail' or 'go_on'"):
        TranscriptionMachine(on_done_timeout="retry")
