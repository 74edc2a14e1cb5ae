"""The realtime client: its state machine transition by transition (no sockets, no clock), its driver over an
in-memory server (event order, pacing, generations, moves to a new stream, cuts, errors), and the SageMaker transport
through the real SDK with smithy's MockHTTPClient (no network)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time

import numpy as np
import pytest

from voicectl.clients import realtime
from voicectl.clients.audio import CHUNK_BYTES, iter_chunks
from voicectl.local.fake_vllm import SAMPLES_PER_TOKEN, TAIL_TOKENS
from voicectl.clients.realtime import (
    CloseStream,
    Failed,
    Finished,
    OpenStream,
    RealtimeError,
    Replaying,
    SendEvent,
    ShowDelta,
    ShowGenerationText,
    Transcript,
    TranscriptionMachine,
    TransportClosed,
    join_transcripts,
    paced_chunks,
    send_delay_s,
    transcribe_stream,
)

LOUD = (np.full(CHUNK_BYTES // 2, 8000, dtype="<i2")).tobytes()  # RMS 0.24: never a quiet seam
QUIET = bytes(CHUNK_BYTES)
CHUNK_S = 0.128
UPDATE = json.dumps({"type": "session.update", "model": "m"})
COMMIT = json.dumps({"type": "input_audio_buffer.commit"})
FINAL = json.dumps({"type": "input_audio_buffer.commit", "final": True})


async def chunks_of(*chunks: bytes):
    for chunk in chunks:
        yield chunk


def pcm_with_index(count: int) -> list[bytes]:
    """Loud chunks, each distinct (its index in the first sample)."""
    chunks = []
    for index in range(count):
        samples = np.full(CHUNK_BYTES // 2, 8000, dtype="<i2")
        samples[0] = index
        chunks.append(samples.tobytes())
    return chunks


def append(chunk: bytes) -> SendEvent:
    return SendEvent(0, json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(chunk).decode()}),
                     CHUNK_S)


def sent(actions, stream: int | None = None) -> list[str]:
    """The events the actions send (on ``stream``, if given), as 'update', 'commit', 'final' or 'append <index>'."""
    names = []
    for action in actions:
        if isinstance(action, SendEvent) and (stream is None or action.stream == stream):
            event = json.loads(action.text)
            if event["type"] == "input_audio_buffer.append":
                names.append(f"append {np.frombuffer(base64.b64decode(event['audio']), dtype='<i2')[0]}")
            else:
                names.append({"session.update": "update", "input_audio_buffer.commit": "final" if event.get("final")
                              else "commit"}[event["type"]])
    return names


def delta(text: str) -> str:
    return json.dumps({"type": "transcription.delta", "delta": text})


def done(text: str) -> str:
    return json.dumps({"type": "transcription.done", "text": text, "usage": {}})


def error(code: str, message: str = "boom", **fields) -> str:
    return json.dumps({"type": "error", "error": message, "code": code, **fields})


def started(now: float = 0.0, **options) -> tuple[TranscriptionMachine, list]:
    """A machine with its first stream open (its opening actions returned)."""
    machine = TranscriptionMachine(model="m", **options)
    actions = machine.start(now) + machine.opened(1, now)
    return machine, actions


# ---- the state machine, one transition at a time -------------------------------------------------------------------


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
    assert machine.received(1, done("Hi."), 0.4) == [ShowGenerationText("Hi."), CloseStream(1), Finished()]
    result = machine.result(0.5)
    assert (result.transcript, result.generations, result.sessions, result.elapsed_s) == ("Hi.", 1, 1, pytest.approx(0.3))


def test_generation_limit_ends_the_generation_and_holds_audio_until_done():
    machine, _ = started(session_limit_s=0.4)  # three 128 ms chunks
    chunks = pcm_with_index(5)
    actions = [action for index, chunk in enumerate(chunks) for action in machine.audio(chunk, 0.1 * index)]
    assert sent(actions) == ["append 0", "append 1", "append 2", "final"]  # chunks 3 and 4 wait for the done
    after_done = machine.received(1, done("one"), 0.6)
    assert after_done[0] == ShowGenerationText("one")
    assert sent(after_done) == ["commit", "append 3", "append 4"]  # the next generation, same stream


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
    noise_floor = (np.full(CHUNK_BYTES // 2, 1000, dtype="<i2")).tobytes()  # RMS 0.03: above -40 dBFS
    assert sent(machine.audio(noise_floor, loud * CHUNK_S)) == ["final"]  # but under a quarter of the speech


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
    assert machine.received(1, done("old."), now + 0.5) == [ShowGenerationText("old."), CloseStream(1)]
    assert machine.transcript.text == "old. new "  # in audio order, whatever order the streams answer in
    assert machine.result(now).rollovers == 1


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
    for index, chunk in enumerate(chunks[:4]):  # chunk 3 would pass 0.4 s: the first generation ends before it
        machine.audio(chunk, index * 0.1)
    machine.received(1, delta("one"), 0.35)
    assert sent(machine.received(1, done("one."), 0.4)) == ["commit", "append 3"]  # chunks 0-2 are done for good
    machine.received(1, delta("four-partial"), 0.55)
    machine.audio(chunks[4], 0.6)
    actions = machine.closed(1, TransportClosed("reset"), 0.7)
    assert actions[0] == CloseStream(1)
    assert isinstance(actions[1], Replaying) and "resending this session's 0.3 s" in actions[1].reason
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
    assert actions[0] == CloseStream(1) and isinstance(actions[1], Replaying) and actions[2] == OpenStream(2)
    assert machine.closed(1, None, 0.3) == []  # the bridge's close after its error event: already handled


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
    actions = machine.received(1, error("server_busy", "256 streams are open", max_streams=256), 0.2)
    assert actions[0] == CloseStream(1) and isinstance(actions[1], Replaying)
    assert "busy" in actions[1].reason and not [a for a in actions if isinstance(a, OpenStream)]
    assert machine.next_deadline() == pytest.approx(0.2 + realtime.BUSY_RETRY_DELAYS_S[0])
    assert machine.tick(1.2) == [OpenStream(2)]
    assert sent(machine.opened(2, 1.3)) == ["update", "commit", "append 8000"]  # the audio is not lost


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
    actions = machine.received(1, error("session_limit", "any words at all", limit_s=2.0, audio_s=3.84), 0.4)
    assert isinstance(actions[1], Replaying) and "using 2 s" in actions[1].reason
    assert machine.session_limit_s == pytest.approx(1.8)
    resent = sent(machine.opened(2, 0.5))
    assert resent == ["update", "commit", *[f"append {index}" for index in range(14)], "final"]  # 1.792 s <= 1.8 s
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
    assert OpenStream(3) in actions and sent(actions, 1) == ["append 8000"]  # the active stream goes on


def test_the_first_stream_failing_to_open_fails_but_a_later_one_is_a_cut():
    machine = TranscriptionMachine(model="m")
    machine.start(0.0)
    actions = machine.open_failed(1, RealtimeError("cannot open a WebSocket", code="connect_failed"), 0.1)
    assert isinstance(actions[-1], Failed) and actions[-1].error.code == "connect_failed"
    machine, _ = started(max_stream_s=10)
    machine.audio(LOUD, 0.1)
    machine.tick(8.0)  # the next stream opens ahead ...
    assert machine.open_failed(2, RealtimeError("refused", code="connect_failed"), 8.1) == []  # ... and is retried
    actions = machine.audio(LOUD, 10.0)  # the move opens a new stream, which fails too: a cut, audio resent
    assert OpenStream(3) in actions
    recovered = machine.open_failed(3, RealtimeError("refused", code="connect_failed"), 10.1)
    assert isinstance(recovered[-1], OpenStream) and any(isinstance(action, Replaying) for action in recovered)


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
    assert isinstance(actions[1], Failed) and "(model_not_found): boom; pass --model" in str(actions[1].error)
    assert machine.finished and machine.received(1, delta("late"), 0.3) == []


def test_the_source_is_not_read_while_much_audio_waits():
    machine = TranscriptionMachine(model="m")
    machine.start(0.0)  # the stream never opens
    count = 0
    while machine.wants_audio:
        machine.audio(LOUD, 0.0)
        count += 1
    assert count == int(realtime.MAX_BUFFERED_S / CHUNK_S) + 1


def test_send_pacing_allows_a_burst_then_the_speed():
    assert send_delay_s(sent_audio_s=0, audio_s=CHUNK_S, elapsed_s=0) == 0
    assert send_delay_s(sent_audio_s=realtime.SEND_BURST_S, audio_s=1.6, elapsed_s=0) == pytest.approx(0.1)
    assert send_delay_s(sent_audio_s=realtime.SEND_BURST_S, audio_s=1.6, elapsed_s=0.1) == pytest.approx(0)


# ---- the driver over an in-memory server ---------------------------------------------------------------------------


def generations(session) -> list[bytes]:
    """The audio of each generation of an in-memory stream (commit ... final commit)."""
    found, current = [], None
    for event in session.events:
        if event["type"] == "input_audio_buffer.commit":
            if event.get("final"):
                found.append(bytes(current))
                current = None
            else:
                current = bytearray()
        elif event["type"] == "input_audio_buffer.append":
            current += base64.b64decode(event["audio"])
    return found


def test_event_order_and_transcript(memory_server):
    chunks = pcm_with_index(3)
    deltas: list[str] = []
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, model="m1", on_delta=deltas.append))
    (session,) = memory_server.sessions
    assert session.types() == ["session.update", "input_audio_buffer.commit", *["input_audio_buffer.append"] * 3,
                               "input_audio_buffer.commit"]
    assert session.events[0] == {"type": "session.update", "model": "m1"}
    assert session.events[1] == {"type": "input_audio_buffer.commit"}
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert bytes(session.audio) == b"".join(chunks)
    assert deltas == ["w1.0 ", "w1.1 ", "w1.2 "]
    assert result.transcript == "w1.0 w1.1 w1.2 "
    assert result.audio_seconds_sent == pytest.approx(3 * 0.128)
    assert (result.sessions, result.reopens, result.generations) == (1, 0, 1)
    assert result.time_to_first_delta_s is not None and result.time_to_first_delta_s >= 0
    assert session.closed


def test_generations_end_at_the_session_limit_on_one_stream_and_their_texts_join(memory_server):
    chunks = pcm_with_index(7)
    texts: list[str] = []
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=0.4,
                                           on_session_text=texts.append))
    (session,) = memory_server.sessions
    # 0.4 s holds three 128 ms chunks: generations of 3, 3 and 1 chunks, each ended by a final commit.
    assert generations(session) == [b"".join(chunks[:3]), b"".join(chunks[3:6]), chunks[6]]
    assert texts == ["w1.0 w1.1 w1.2 ", "w1.3 w1.4 w1.5 ", "w1.6 "]
    assert result.transcript == "w1.0 w1.1 w1.2 w1.3 w1.4 w1.5 w1.6 "
    assert (result.sessions, result.generations) == (1, 3)


def test_a_generation_prefers_a_quiet_chunk_near_the_limit(memory_server):
    chunks = [LOUD] * 8 + [QUIET] + [LOUD] * 3
    asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=1.28))
    # The limit fits 10 chunks; the window (20 % of it) starts at chunk 8, so the quiet chunk 9 opens generation 2.
    (session,) = memory_server.sessions
    assert [len(audio) // CHUNK_BYTES for audio in generations(session)] == [8, 4]
    assert generations(session)[1].startswith(QUIET)


def test_a_dropped_stream_is_reopened_and_the_generation_resent_from_its_start(memory_server):
    chunks = pcm_with_index(6)
    memory_server.drop_at = (1, 2)  # stream 1 drops when its third append is sent
    replays: list[str] = []
    transcript = Transcript()
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, on_replay=replays.append,
                                           transcript=transcript))
    first, second = memory_server.sessions
    assert bytes(first.audio) == b"".join(chunks[:2])
    # The new stream gets the whole generation again (what was in flight may never have been transcribed).
    assert bytes(second.audio) == b"".join(chunks)
    assert second.types()[:2] == ["session.update", "input_audio_buffer.commit"]
    # The dropped generation's partial text is replaced by the resent one's, not joined to it.
    assert result.transcript == "w2.0 w2.1 w2.2 w2.3 w2.4 w2.5 " == transcript.text
    assert (result.sessions, result.reopens) == (2, 1)
    assert result.audio_seconds_sent == pytest.approx(6 * 0.128)
    assert len(replays) == 1 and "resending this session's 0.4 s of audio since the last transcription.done" in replays[0]


def test_a_drop_after_a_done_resends_only_the_audio_since(memory_server):
    chunks = pcm_with_index(7)
    memory_server.drop_at = (1, 4)  # the second append of the second generation

    async def paced():  # one chunk per turn, so that the first generation's done arrives before the drop
        for chunk in chunks:
            await asyncio.sleep(0.01)
            yield chunk

    result = asyncio.run(transcribe_stream(paced(), memory_server.open, session_limit_s=0.4))
    first, second = memory_server.sessions
    assert generations(first) == [b"".join(chunks[:3])]
    assert bytes(second.audio) == b"".join(chunks[3:])  # not chunks 0-2 again
    assert result.transcript == "w1.0 w1.1 w1.2 w2.0 w2.1 w2.2 w2.3 "
    assert result.replayed_audio_s == pytest.approx(2 * CHUNK_S)  # chunk 3, and chunk 4 whose send failed


@pytest.mark.parametrize("cleanly", [False, True])
def test_a_drop_while_waiting_for_done_is_reopened_and_resent(memory_server, cleanly):
    chunks = pcm_with_index(4)
    memory_server.drop_on_final, memory_server.drop_cleanly = 1, cleanly
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open))
    first, second = memory_server.sessions
    assert first.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert bytes(second.audio) == b"".join(chunks)
    assert result.transcript == "w2.0 w2.1 w2.2 w2.3 "
    assert result.reopens == 1


def test_a_drop_on_the_final_commit_of_a_generation_resends_it_and_what_followed(memory_server):
    chunks = pcm_with_index(5)
    memory_server.drop_on_final = 1  # stream 1 breaks on the final commit of its first generation
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=0.4))
    first, second = memory_server.sessions
    assert generations(first) == [b"".join(chunks[:3])]
    assert generations(second) == [b"".join(chunks[:3]), b"".join(chunks[3:])]
    assert result.transcript == "w2.0 w2.1 w2.2 w2.3 w2.4 "
    assert (result.sessions, result.reopens) == (2, 1)


@pytest.mark.parametrize("code", ["server_shutdown", "upstream_closed"])
def test_server_shutdown_and_upstream_closed_count_as_a_drop(memory_server, code):
    chunks = pcm_with_index(4)
    memory_server.error_at = (1, 1, code, "stopping")
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open))
    assert bytes(memory_server.sessions[-1].audio) == b"".join(chunks)
    assert result.transcript == "w2.0 w2.1 w2.2 w2.3 "
    assert result.reopens == 1


def test_the_endpoints_session_limit_lowers_the_limit_and_resends_the_generation(memory_server):
    memory_server.audio_limit_bytes = 4 * 32000  # the bridge's limit: 4 s, while the client asks for 3000 s
    chunks = pcm_with_index(40)  # 5.12 s
    replays: list[str] = []
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, on_replay=replays.append))
    first, second = memory_server.sessions
    assert len(first.audio) > 4 * 32000 and first.events[-1]["type"] == "input_audio_buffer.append"
    # Every later generation fits the learned limit (0.9 x 4 s), and together they carry the audio once, in order.
    assert all(len(audio) <= 3.6 * 32000 for audio in generations(second))
    assert b"".join(generations(second)) == b"".join(chunks)
    assert result.session_limit_s == pytest.approx(3.6)
    assert result.reopens == 0 and len(replays) == 1 and "using 4 s" in replays[0]
    assert result.transcript == "".join(f"w2.{index} " for index in range(40))


def test_server_busy_is_retried_and_nothing_is_lost(memory_server, monkeypatch):
    monkeypatch.setattr(realtime, "BUSY_RETRY_DELAYS_S", (0.05, 0.1, 0.2))
    chunks = pcm_with_index(3)
    real_open = memory_server.open

    async def busy_first():
        transport = await real_open()
        if len(memory_server.sessions) == 1:
            transport.inbox.put_nowait(error("server_busy", "2 streams are open", max_streams=2))
            transport.inbox.put_nowait(None)
        return transport

    result = asyncio.run(transcribe_stream(chunks_of(*chunks), busy_first))
    assert bytes(memory_server.sessions[-1].audio) == b"".join(chunks)
    assert result.transcript == "w2.0 w2.1 w2.2 " and (result.sessions, result.reopens) == (2, 0)


def test_a_transport_that_raises_something_unexpected_is_reported_not_waited_for(memory_server):
    async def broken_open():
        raise KeyError("a bug in a transport")

    with pytest.raises(RealtimeError, match="the transport failed unexpectedly .KeyError") as raised:
        asyncio.run(asyncio.wait_for(transcribe_stream(chunks_of(LOUD), broken_open), 5))
    assert raised.value.code == "transport_error"


def test_null_delta_and_null_done_text_are_not_the_text_none(memory_server):
    memory_server.null_done_text = True
    deltas: list[str] = []

    async def opener():
        transport = await memory_server.open()
        transport.inbox.put_nowait(json.dumps({"type": "transcription.delta", "delta": None}))
        return transport

    result = asyncio.run(transcribe_stream(chunks_of(LOUD), opener, on_delta=deltas.append))
    assert deltas[0] == ""
    assert result.transcript == "w1.0 "  # done's null text falls back to the deltas
    assert "None" not in result.transcript


def test_a_failure_leaves_the_partial_transcript_in_the_caller_transcript(memory_server):
    memory_server.drop_at = (1, 2)
    transcript = Transcript()

    async def scenario():
        async def chunks():
            for index, chunk in enumerate(pcm_with_index(5)):
                if index == 3:
                    memory_server.error_at = (2, 3, "processing_error", "CUDA out of memory")
                yield chunk
        await transcribe_stream(chunks(), memory_server.open, transcript=transcript)

    with pytest.raises(RealtimeError, match="processing_error") as raised:
        asyncio.run(scenario())
    assert "w2.0" not in str(raised.value)  # the message does not embed the transcript
    assert transcript.text == "w2.0 w2.1 w2.2 "


def test_a_second_drop_ends_with_an_error(memory_server):
    memory_server.drop_at = (1, 1)

    async def scenario():
        async def chunks():
            for index, chunk in enumerate(pcm_with_index(5)):
                if index == 3:
                    memory_server.drop_at = (2, 3)  # stream 2 resends chunks 0 and 1 (appends 0-1): chunk 3 is append 3
                yield chunk
        await transcribe_stream(chunks(), memory_server.open)

    with pytest.raises(RealtimeError, match="dropped again after a reopen.*may be missing") as raised:
        asyncio.run(scenario())
    assert raised.value.code == "stream_dropped"


def test_an_error_event_ends_the_transcription_with_its_hint(memory_server):
    memory_server.error_on_append = "model_not_found"
    with pytest.raises(RealtimeError, match=r"\(model_not_found\): boom; pass --model") as raised:
        asyncio.run(transcribe_stream(chunks_of(*pcm_with_index(4)), memory_server.open))
    assert raised.value.code == "model_not_found"
    assert memory_server.sessions[0].closed


def test_no_done_after_the_final_commit_times_out(memory_server):
    memory_server.never_done = True
    with pytest.raises(RealtimeError, match="no transcription.done arrived within 0 s"):
        asyncio.run(transcribe_stream(chunks_of(LOUD), memory_server.open, done_timeout_s=0.2))


def test_a_live_microphone_falls_behind_by_at_most_2_s_across_stream_rollovers(memory_server):
    """Chunks arrive in real time; each stream is used 10 s; opening a stream takes 0.5 s. For every chunk, the
    time from its arrival to its send stays within 2 s, and the transcript holds every chunk once."""
    chunk_count = 180  # 23 s of audio: two moves to a new stream
    arrived: dict[int, float] = {}
    lags: list[float] = []
    real_open = memory_server.open

    async def slow_open():
        await asyncio.sleep(0.5)
        transport = await real_open()
        real_send = transport.send_text

        async def timed_send(text: str) -> None:
            event = json.loads(text)
            if event["type"] == "input_audio_buffer.append":
                index = int(np.frombuffer(base64.b64decode(event["audio"]), dtype="<i2")[0])
                lags.append(time.monotonic() - arrived[index])
            await real_send(text)

        transport.send_text = timed_send
        return transport

    async def live():  # like the microphone page: chunks 128 ms apart, sped up 4 x to keep the test short
        for index, chunk in enumerate(pcm_with_index(chunk_count)):
            await asyncio.sleep(CHUNK_S / 4)
            arrived[index] = time.monotonic()
            yield chunk

    async def scenario():
        clock_start = time.monotonic()
        # The 10 s limit is on the sped-up clock too: a 4 x faster clock for the machine.
        return await transcribe_stream(live(), slow_open, max_stream_s=10,
                                       clock=lambda: clock_start + (time.monotonic() - clock_start) * 4)

    result = asyncio.run(scenario())
    assert result.rollovers >= 2 and result.reopens == 0
    assert len(lags) == chunk_count and max(lags) * 4 <= 2.0  # in microphone time
    assert b"".join(bytes(s.audio) for s in memory_server.sessions) == b"".join(pcm_with_index(chunk_count))


def test_a_long_stream_moves_to_new_streams_through_the_real_bridge_with_nothing_lost_or_repeated():
    """30 s of audio (speech, then a pause every 2 s) through the bridge and the fake vLLM, each stream used 10 s:
    the audio reaches vLLM exactly once over the streams, and the transcript holds one word per chunk."""
    from tests.clients.conftest import Servers
    from voicectl.clients.realtime import WebSocketTransport

    speed = 8  # audio and the machine's clock 8 x faster than real time: the test takes ~4 s
    chunks = [QUIET if index % 16 == 15 else chunk for index, chunk in enumerate(pcm_with_index(234))]
    with Servers(deltas=("w ",), generate=True) as servers:
        async def scenario():
            start = time.monotonic()
            return await transcribe_stream(
                paced_chunks(chunks, speed), lambda: WebSocketTransport.connect(servers.url), max_stream_s=10,
                on_replay=replays.append, clock=lambda: start + (time.monotonic() - start) * speed)

        replays: list[str] = []
        result = asyncio.run(scenario())
        sessions = servers.vllm.sessions
        assert (len(sessions), result.reopens, replays) == (result.sessions, 0, []), result
        assert result.rollovers >= 2 and len(sessions) == result.rollovers + 1  # every stream after the first is a move
        assert b"".join(bytes(session.audio) for session in sessions) == b"".join(chunks)
        # Each stream is one generation: one delta per 80 ms of its audio and TAIL_TOKENS more, as vLLM sends them.
        assert [session.text for session in sessions] == [
            "w " * (-(-len(session.audio) // 2 // SAMPLES_PER_TOKEN) + TAIL_TOKENS) for session in sessions]
        assert result.transcript == "".join(session.text for session in sessions)
        # The last stream's close reaches the fake vLLM through the bridge after the client has returned.
        deadline = time.monotonic() + 5
        while not all(session.closed.is_set() for session in sessions) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert all(session.closed.is_set() for session in sessions)


def test_pacing_follows_an_absolute_schedule():
    now = [0.0]
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds + 0.01  # every sleep overshoots by 10 ms

    async def collect(speed: float):
        return [c async for c in paced_chunks(iter_chunks(bytes(CHUNK_BYTES * 4)), speed, clock=lambda: now[0],
                                              sleep=fake_sleep)]

    assert len(asyncio.run(collect(2.0))) == 4
    # Chunk n is due at n x 0.128 / 2 s after the first; overshoot is absorbed, not accumulated.
    assert sleeps == pytest.approx([0.064, 0.054, 0.054])
    sleeps.clear()
    asyncio.run(collect(0))
    assert sleeps == [0, 0, 0, 0]
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="speed must be 0"):
            asyncio.run(collect(bad))


def test_join_transcripts_adds_a_space_only_at_a_bare_seam():
    assert join_transcripts(["Hello", "world"]) == "Hello world"
    assert join_transcripts(["Hello ", "world"]) == "Hello world"
    assert join_transcripts(["Hello", " world", "", "again"]) == "Hello world again"


# ---- the SageMaker transport through the real SDK -------------------------------------------------------------


class StaticCredentialsSession:
    """Stands in for a botocore Session: returns fixed credentials."""

    def get_credentials(self):
        from botocore.credentials import Credentials

        return Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "session-token")


def response_part(text: str, completion_state: str = "COMPLETE") -> bytes:
    from tests.clients.conftest import event_stream_message

    return event_stream_message({":message-type": "event", ":event-type": "PayloadPart",
                                 ":content-type": "application/octet-stream", "DataType": "UTF8",
                                 "CompletionState": completion_state}, text.encode())


def exception_event(name: str, body: dict) -> bytes:
    from tests.clients.conftest import event_stream_message

    return event_stream_message({":message-type": "exception", ":exception-type": name,
                                 ":content-type": "application/json"}, json.dumps(body).encode())


async def open_mock_stream(response_body: bytes, status: int = 200, headers=None):
    from smithy_http.testing import MockHTTPClient

    from voicectl.clients.sagemaker_stream import BotocoreCredentialsResolver, SageMakerStreamTransport, create_client

    mock = MockHTTPClient()
    mock.add_response(status, headers or [("content-type", "application/vnd.amazon.eventstream")], response_body)
    client = await create_client("eu-west-1", BotocoreCredentialsResolver(StaticCredentialsSession()), http_transport=mock)
    transport = await SageMakerStreamTransport.open(client, "voxtral-ep", target_variant="AllTraffic")
    request = mock.captured_requests[0]
    sent = bytearray()

    async def drain():
        async for piece in request.body:
            sent.extend(piece)

    return transport, request, sent, asyncio.create_task(drain())


def decode_sent_events(raw: bytes) -> list:
    """Unwrap the signed envelopes of the request stream into (headers, payload) of the inner messages."""
    from smithy_aws_event_stream.events import Event

    source, inner = io.BytesIO(raw), []
    while (envelope := Event.decode(source)) is not None:
        if envelope.message.payload:
            message = Event.decode(io.BytesIO(envelope.message.payload)).message
            inner.append((message.headers, message.payload, envelope.message.headers))
    return inner


def test_sagemaker_request_is_signed_for_sagemaker_on_port_8443_and_payloads_are_utf8():
    async def scenario():
        transport, request, sent, drain = await open_mock_stream(response_part('{"type":"session.created"}'))
        await transport.send_text('{"type":"session.update","model":"m"}')
        await transport.send_text('{"type":"input_audio_buffer.commit"}')
        received = await transport.receive_text()
        end = await transport.receive_text()
        await transport.close()
        await asyncio.sleep(0.05)
        drain.cancel()
        return request, bytes(sent), received, end

    request, sent, received, end = asyncio.run(scenario())
    destination = request.destination
    assert (request.method, destination.scheme, destination.host, destination.port) == (
        "POST", "https", "runtime.sagemaker.eu-west-1.amazonaws.com", 8443)
    assert destination.path == "/endpoints/voxtral-ep/invocations-bidirectional-stream"
    fields = {field.name.lower(): field.values for field in request.fields.entries.values()}
    assert fields["x-amzn-sagemaker-target-variant"] == ["AllTraffic"]
    assert fields["x-amz-content-sha256"] == ["STREAMING-AWS4-HMAC-SHA256-EVENTS"]
    assert fields["x-amz-security-token"] == ["session-token"]
    assert fields["authorization"][0].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/sagemaker/aws4_request" in fields["authorization"][0]
    events = decode_sent_events(sent)
    assert [payload for _, payload, _ in events] == [b'{"type":"session.update","model":"m"}',
                                                      b'{"type":"input_audio_buffer.commit"}']
    assert all(headers["DataType"] == "UTF8" and headers[":event-type"] == "PayloadPart" for headers, _, _ in events)
    assert all(":chunk-signature" in envelope for _, _, envelope in events)  # each event is signed
    assert (received, end) == ('{"type":"session.created"}', None)


def test_sagemaker_partial_payload_parts_are_joined_into_one_frame():
    async def scenario():
        body = response_part('{"type":"transcription.', "PARTIAL") + response_part('delta","delta":"hé"}')
        transport, *_, drain = await open_mock_stream(body)
        try:
            return await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    assert asyncio.run(scenario()) == '{"type":"transcription.delta","delta":"hé"}'


def test_sagemaker_partial_parts_past_the_event_cap_are_refused_before_the_frame_is_whole():
    """A server that never ends its PARTIAL parts cannot grow the joined frame past MAX_EVENT_BYTES (issue 27)."""
    from voicectl.clients.realtime import MAX_EVENT_BYTES

    part = "x" * (256 * 1024)
    parts = MAX_EVENT_BYTES // len(part) + 2  # past the cap, and never a part that is not PARTIAL

    async def scenario():
        body = b"".join(response_part(part, "PARTIAL") for _ in range(parts))
        transport, *_, drain = await open_mock_stream(body)
        try:
            return await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    with pytest.raises(RealtimeError, match=r"more than 1,048,576 bytes in PARTIAL parts") as raised:
        asyncio.run(scenario())
    assert raised.value.code == "message_too_large"


@pytest.mark.parametrize(("event", "pattern", "code"), [
    (exception_event("ModelStreamError", {"Message": "socket closed", "ErrorCode": "ModelStreamError"}),
     r"ModelStreamError from endpoint 'voxtral-ep' \(ModelStreamError\): socket closed.*CloudWatch", "ModelStreamError"),
    (exception_event("InternalStreamFailure", {"Message": "lost"}),
     r"InternalStreamFailure on endpoint 'voxtral-ep': lost\. SageMaker lost the stream; retry", "InternalStreamFailure"),
])
def test_sagemaker_stream_errors_become_realtime_errors(event, pattern, code):
    async def scenario():
        transport, *_, drain = await open_mock_stream(response_part('{"type":"session.created"}') + event)
        try:
            assert await transport.receive_text() == '{"type":"session.created"}'
            await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    with pytest.raises(RealtimeError, match=pattern) as raised:
        asyncio.run(scenario())
    assert raised.value.code == code


def test_sagemaker_model_error_when_the_stream_opens():
    async def scenario():
        body = json.dumps({"Message": "Received server error", "OriginalStatusCode": 500,
                           "OriginalMessage": "handshake refused", "ErrorCode": "ModelError"}).encode()
        transport, *_, drain = await open_mock_stream(
            body, status=424, headers=[("content-type", "application/json"), ("x-amzn-errortype", "ModelError")])
        try:
            await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    with pytest.raises(RealtimeError, match=r"ModelError from endpoint 'voxtral-ep' \(container status 500\): "
                                            r"handshake refused"):
        asyncio.run(scenario())


def test_a_full_transcription_through_the_sagemaker_transport():
    """The session logic over the SDK: the response is canned, the request stream is checked event by event."""
    from smithy_http.testing import MockHTTPClient

    from voicectl.clients.sagemaker_stream import BotocoreCredentialsResolver, SageMakerStreamTransport, create_client

    async def scenario():
        mock = MockHTTPClient()
        mock.add_response(200, [("content-type", "application/vnd.amazon.eventstream")],
                          response_part('{"type":"session.created"}')
                          + response_part('{"type":"transcription.delta","delta":"Hello"}')
                          + response_part('{"type":"transcription.done","text":"Hello","usage":{}}'))
        client = await create_client("us-east-1", BotocoreCredentialsResolver(StaticCredentialsSession()),
                                     http_transport=mock)
        sent = bytearray()
        drains = []

        async def opener():
            transport = await SageMakerStreamTransport.open(client, "voxtral-ep")
            request = mock.captured_requests[-1]

            async def drain():
                async for piece in request.body:
                    sent.extend(piece)
            drains.append(asyncio.create_task(drain()))
            return transport

        result = await transcribe_stream(chunks_of(LOUD, LOUD), opener, model="m")
        await asyncio.sleep(0.05)
        for task in drains:
            task.cancel()
        return result, bytes(sent)

    result, sent = asyncio.run(scenario())
    assert result.transcript == "Hello"
    types = [json.loads(payload)["type"] for _, payload, _ in decode_sent_events(sent)]
    assert types == ["session.update", "input_audio_buffer.commit", "input_audio_buffer.append",
                     "input_audio_buffer.append", "input_audio_buffer.commit"]


def test_botocore_credentials_resolver_refreshes_and_reports_missing_credentials():
    from smithy_core.exceptions import SmithyIdentityError

    from voicectl.clients.sagemaker_stream import BotocoreCredentialsResolver

    class Refreshable:
        def __init__(self):
            self.calls = 0

        def refresh_needed(self):
            return True

        def get_frozen_credentials(self):
            from botocore.credentials import ReadOnlyCredentials

            self.calls += 1
            return ReadOnlyCredentials(f"AKID{self.calls}", "secret", None)

    credentials = Refreshable()

    class Session:
        def get_credentials(self):
            return credentials

    resolver = BotocoreCredentialsResolver(Session())
    first = asyncio.run(resolver.get_identity(properties={}))
    second = asyncio.run(resolver.get_identity(properties={}))
    assert (first.access_key_id, second.access_key_id) == ("AKID1", "AKID2")

    class Empty:
        def get_credentials(self):
            return None

    with pytest.raises(SmithyIdentityError, match="none found in the environment, profiles, SSO"):
        asyncio.run(BotocoreCredentialsResolver(Empty()).get_identity(properties={}))


def test_speak_and_transcribe_word_missing_credentials_the_same_way():
    """One message serves both clients (voicectl.errors.no_credentials_message): what is wrong, then what to run."""
    import botocore.exceptions
    from smithy_core.exceptions import SmithyIdentityError

    from voicectl.clients import speak
    from voicectl.clients.realtime import RealtimeError
    from voicectl.clients.sagemaker_stream import resolve_credentials
    from voicectl.clients.sonic import SonicRequest

    class NoCredentials:
        async def get_identity(self, *, properties=None):
            raise SmithyIdentityError("Unable to locate credentials")

    class Client:
        def invoke_endpoint_with_response_stream(self, **kwargs):
            raise botocore.exceptions.NoCredentialsError()

    with pytest.raises(RealtimeError) as transcribe_error:
        asyncio.run(resolve_credentials(NoCredentials()))
    with pytest.raises(speak.SpeakError) as speak_error:
        speak.synthesize(Client(), "sonic-tts", SonicRequest(transcript="hi", voice_id="v"))
    expected = ("no usable AWS credentials: Unable to locate credentials; run `aws configure` or `aws sso login`, "
                "or pass --profile")
    assert str(transcribe_error.value) == str(speak_error.value) == expected
    assert transcribe_error.value.code == "credentials"


# ---- voicectl transcribe --max-stream-s ------------------------------------------------------------------------


def test_max_stream_s_defaults_below_sagemakers_reported_30_minutes_and_reaches_the_machine(parse, recording, monkeypatch):
    from voicectl.clients import transcribe

    assert parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x"]).max_stream_s == 1500 < 30 * 60
    seen = {}

    async def fake_stream(chunks, opener, **options):
        seen.update(options)
        raise RealtimeError("stop here", code="test")

    monkeypatch.setattr(transcribe, "transcribe_stream", fake_stream)
    args = parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x", "--max-stream-s", "600"])
    assert transcribe.run(args) == 1
    assert seen["max_stream_s"] == 600


@pytest.mark.parametrize("value", ["5", "nan", "inf", "-1"])
def test_max_stream_s_must_be_finite_and_at_least_10_s(parse, recording, value):
    from voicectl.clients import transcribe
    from voicectl.cli import UsageError

    with pytest.raises(UsageError, match="--max-stream-s must be a finite number of seconds, at least 10"):
        transcribe.run(parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x", "--max-stream-s", value]))


def test_an_unresolvable_runtime_host_is_named_in_the_error():
    """A DNS failure (awscrt AWS_IO_DNS_*) names the host and URL the client called, and what to check."""
    from voicectl.clients.sagemaker_stream import describe_error

    error = RuntimeError("AWS_IO_DNS_INVALID_NAME: Host name was invalid for dns resolution")
    message = str(describe_error(error, "voxtral-realtime", "https://runtime.sagemaker.xx-east-1.amazonaws.com:8443"))
    assert "runtime host runtime.sagemaker.xx-east-1.amazonaws.com" in message
    assert "does not resolve (DNS): check --endpoint-url, AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, --region" in message
    refused = describe_error(RuntimeError("AWS_IO_SOCKET_CONNECTION_REFUSED: refused"), "e", "https://127.0.0.1:1")
    assert "runtime host 127.0.0.1 (https://127.0.0.1:1) cannot be reached" in str(refused)
    assert "runtime host" not in str(describe_error(RuntimeError("AWS_IO_DNS_INVALID_NAME"), "e"))  # URL unknown


# ---- a hostile server: deep JSON, huge events, an endless transcript, a many-line error ----------------------------


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
    results = [machine.received(1, one_mib_delta, 0.1) for _ in range(realtime.MAX_TRANSCRIPT_CHARS // (2**20) + 1)]
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
    machine2.closed(1, TransportClosed("drop"), 0.2)  # the generation is resent: its text is discarded
    assert kept.chars == 0


@pytest.mark.parametrize("message", ["line one\nline two\r\n\x1b[2J" * 200, {"nested": ["detail"] * 500}])
def test_an_error_event_fails_with_one_bounded_line(message):
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(1, json.dumps({"type": "error", "error": message, "code": "processing_error"}), 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    text = str(failed.error)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text
    assert len(text) < 500
    assert failed.error.code == "processing_error"


def test_an_error_code_that_is_not_a_short_string_is_bounded_too():
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(1, json.dumps({"type": "error", "error": "x", "code": {"a": "b\n" * 100}}), 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert isinstance(failed.error.code, str) and len(failed.error.code) <= 64 and "\n" not in failed.error.code


@pytest.mark.parametrize(("code", "shown"), [("\x1b]0;owned\x07", "(\\x1b]0;owned\\x07)"), (None, "(no code)")])
def test_a_short_error_code_is_escaped_and_a_missing_one_named(code, shown):
    machine, _ = started()
    machine.audio(LOUD, 0.0)
    actions = machine.received(1, json.dumps({"type": "error", "error": "x", "code": code}), 0.1)
    (failed,) = [action for action in actions if isinstance(action, Failed)]
    assert "\x1b" not in str(failed.error) and "\x07" not in str(failed.error)
    assert f"the endpoint reported an error {shown}: x;" in str(failed.error)
