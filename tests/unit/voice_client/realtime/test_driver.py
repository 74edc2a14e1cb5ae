"""voice_client.realtime.driver: transcribe_stream over an in-memory server (event order,
pacing, generations, moves to a new stream, cuts, errors) and through the real bridge."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import numpy as np
import pytest

from tests.unit.voice_client.realtime.realtime_testkit import (
    CHUNK_S,
    LOUD,
    QUIET,
    chunks_of,
    error,
    pcm_with_index,
)
from voice_client import realtime
from voice_client.audio import CHUNK_BYTES, iter_chunks
from voice_client.realtime import (
    RealtimeError,
    Transcript,
    machine,  # the module that reads BUSY_RETRY_DELAYS_S
    paced_chunks,
    send_delay_s,
    transcribe_stream,
)
from voice_devtools.local.fake_vllm import SAMPLES_PER_TOKEN, TAIL_TOKENS


def test_send_pacing_allows_a_burst_then_the_speed():
    assert send_delay_s(sent_audio_s=0, audio_s=CHUNK_S, elapsed_s=0) == 0
    assert send_delay_s(
        sent_audio_s=realtime.SEND_BURST_S, audio_s=1.6, elapsed_s=0
    ) == pytest.approx(0.1)
    assert send_delay_s(
        sent_audio_s=realtime.SEND_BURST_S, audio_s=1.6, elapsed_s=0.1
    ) == pytest.approx(0)


# ---- the driver over an in-memory server -------------------------------------------------------


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
    result = asyncio.run(
        transcribe_stream(
            chunks_of(*chunks), memory_server.open, model="m1", on_delta=deltas.append
        )
    )
    (session,) = memory_server.sessions
    assert session.types() == [
        "session.update",
        "input_audio_buffer.commit",
        *["input_audio_buffer.append"] * 3,
        "input_audio_buffer.commit",
    ]
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
    result = asyncio.run(
        transcribe_stream(
            chunks_of(*chunks),
            memory_server.open,
            session_limit_s=0.4,
            on_session_text=texts.append,
        )
    )
    (session,) = memory_server.sessions
    # 0.4 s holds three 128 ms chunks: generations of 3, 3 and 1 chunks, each ended by a final
    # commit.
    assert generations(session) == [b"".join(chunks[:3]), b"".join(chunks[3:6]), chunks[6]]
    assert texts == ["w1.0 w1.1 w1.2 ", "w1.3 w1.4 w1.5 ", "w1.6 "]
    assert result.transcript == "w1.0 w1.1 w1.2 w1.3 w1.4 w1.5 w1.6 "
    assert (result.sessions, result.generations) == (1, 3)


def test_a_generation_prefers_a_quiet_chunk_near_the_limit(memory_server):
    chunks = [LOUD] * 8 + [QUIET] + [LOUD] * 3
    asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=1.28))
    # The limit fits 10 chunks; the window (20 % of it) starts at chunk 8, so the quiet chunk 9
    # opens generation 2.
    (session,) = memory_server.sessions
    assert [len(audio) // CHUNK_BYTES for audio in generations(session)] == [8, 4]
    assert generations(session)[1].startswith(QUIET)


def test_a_dropped_stream_is_reopened_and_the_generation_resent_from_its_start(memory_server):
    chunks = pcm_with_index(6)
    memory_server.drop_at = (1, 2)  # stream 1 drops when its third append is sent
    replays: list[str] = []
    transcript = Transcript()
    result = asyncio.run(
        transcribe_stream(
            chunks_of(*chunks), memory_server.open, on_replay=replays.append, transcript=transcript
        )
    )
    first, second = memory_server.sessions
    assert bytes(first.audio) == b"".join(chunks[:2])
    # The new stream gets the whole generation again (what was in flight may never have been
    # transcribed).
    assert bytes(second.audio) == b"".join(chunks)
    assert second.types()[:2] == ["session.update", "input_audio_buffer.commit"]
    # The dropped generation's partial text is replaced by the resent one's, not joined to it.
    assert result.transcript == "w2.0 w2.1 w2.2 w2.3 w2.4 w2.5 " == transcript.text
    assert (result.sessions, result.reopens) == (2, 1)
    assert result.audio_seconds_sent == pytest.approx(6 * 0.128)
    assert (
        len(replays) == 1
        and "resending this session's 0.4 s of audio since the last transcription.done"
        in replays[0]
    )


def test_a_drop_after_a_done_resends_only_the_audio_since(memory_server):
    chunks = pcm_with_index(7)
    memory_server.drop_at = (1, 4)  # the second append of the second generation

    # one chunk per turn, so that the first generation's done arrives before the drop
    async def paced():
        for chunk in chunks:
            await asyncio.sleep(0.01)
            yield chunk

    result = asyncio.run(transcribe_stream(paced(), memory_server.open, session_limit_s=0.4))
    first, second = memory_server.sessions
    assert generations(first) == [b"".join(chunks[:3])]
    assert bytes(second.audio) == b"".join(chunks[3:])  # not chunks 0-2 again
    assert result.transcript == "w1.0 w1.1 w1.2 w2.0 w2.1 w2.2 w2.3 "
    assert result.replayed_audio_s == pytest.approx(
        2 * CHUNK_S
    )  # chunk 3, and chunk 4 whose send failed


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
    result = asyncio.run(
        transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=0.4)
    )
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
    memory_server.audio_limit_bytes = (
        4 * 32000
    )  # the bridge's limit: 4 s, while the client asks for 3000 s
    chunks = pcm_with_index(40)  # 5.12 s
    replays: list[str] = []
    result = asyncio.run(
        transcribe_stream(chunks_of(*chunks), memory_server.open, on_replay=replays.append)
    )
    first, second = memory_server.sessions
    assert len(first.audio) > 4 * 32000 and first.events[-1]["type"] == "input_audio_buffer.append"
    # Every later generation fits the learned limit (0.9 x 4 s), and together they carry the audio
    # once, in order.
    assert all(len(audio) <= 3.6 * 32000 for audio in generations(second))
    assert b"".join(generations(second)) == b"".join(chunks)
    assert result.session_limit_s == pytest.approx(3.6)
    assert result.reopens == 0 and len(replays) == 1 and "using 4 s" in replays[0]
    assert result.transcript == "".join(f"w2.{index} " for index in range(40))


def test_server_busy_is_retried_and_nothing_is_lost(memory_server, monkeypatch):
    monkeypatch.setattr(machine, "BUSY_RETRY_DELAYS_S", (0.05, 0.1, 0.2))
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

    with pytest.raises(
        RealtimeError, match=r"the transport failed unexpectedly .KeyError"
    ) as raised:
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
                    memory_server.drop_at = (
                        2,
                        3,
                    )  # stream 2 resends chunks 0 and 1 (appends 0-1): chunk 3 is append 3
                yield chunk

        await transcribe_stream(chunks(), memory_server.open)

    with pytest.raises(
        RealtimeError, match=r"dropped again after a reopen.*may be missing"
    ) as raised:
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
    with pytest.raises(RealtimeError, match=r"no transcription.done arrived within 0 s"):
        asyncio.run(transcribe_stream(chunks_of(LOUD), memory_server.open, done_timeout_s=0.2))


#: How long a test waits for what must happen, seconds: a bound on waiting, not a speed target.
LIVENESS_S = 10.0
#: Appends a later stream's open waits for before it completes (1 s of microphone audio, half of the
#: 2 s rollover window that a 10 s stream limit gives: machine.ROLLOVER_WINDOW_MAX_FRACTION).
OPEN_TAKES_APPENDS = 8
#: The most chunks that may have arrived and not been sent (2 s of microphone audio, the bound this
#: test names).
MAX_BEHIND_CHUNKS = round(2.0 / CHUNK_S)


def test_a_live_microphone_falls_behind_by_at_most_2_s_across_stream_rollovers(memory_server):
    """Chunks arrive as from a microphone; each stream is used 10 s; a new stream's open takes as
    long as the audio of OPEN_TAKES_APPENDS appends. Time is counted in chunks, not read from a
    clock, so the test holds at any machine speed: the machine's clock is the audio that has
    arrived, and each later open completes only once that many appends have been sent meanwhile. A
    client that held audio back while a stream opens (no stream opened ahead of the move) would send
    nothing during the open, which then never completes: the test fails at its liveness bound. No
    chunk is sent more than 2 s of audio after it arrived, and the transcript holds every chunk
    once."""
    chunk_count = 180  # 23 s of audio: two moves to a new stream
    arrived = 0
    behind: list[int] = []
    appends_sent = 0
    sent_one = asyncio.Event()
    real_open = memory_server.open
    opens = 0

    async def slow_open():
        nonlocal opens
        opens += 1
        if opens > 1:  # the first stream has nothing to send on meanwhile: the audio waits for it
            target = appends_sent + OPEN_TAKES_APPENDS
            async with asyncio.timeout(
                LIVENESS_S
            ):  # a bound on waiting: the appends never come if audio is held
                while appends_sent < target:
                    sent_one.clear()
                    await sent_one.wait()
        transport = await real_open()
        real_send = transport.send_text

        async def counted_send(text: str) -> None:
            nonlocal appends_sent
            event = json.loads(text)
            if event["type"] == "input_audio_buffer.append":
                index = int(np.frombuffer(base64.b64decode(event["audio"]), dtype="<i2")[0])
                behind.append(arrived - 1 - index)
                appends_sent += 1
                sent_one.set()
            await real_send(text)

        transport.send_text = counted_send
        return transport

    # like the microphone page: chunks 128 ms of audio apart (8 ms of wall time here)
    async def live():
        nonlocal arrived
        for chunk in pcm_with_index(chunk_count):
            await asyncio.sleep(CHUNK_S / 16)
            arrived += 1
            yield chunk

    result = asyncio.run(
        transcribe_stream(live(), slow_open, max_stream_s=10, clock=lambda: arrived * CHUNK_S)
    )
    assert opens >= 3 and result.rollovers >= 2 and result.reopens == 0
    assert len(behind) == chunk_count and max(behind) <= MAX_BEHIND_CHUNKS, max(behind)
    assert b"".join(bytes(s.audio) for s in memory_server.sessions) == b"".join(
        pcm_with_index(chunk_count)
    )


def test_a_long_stream_moves_to_new_streams_through_the_real_bridge_with_nothing_lost_or_repeated():
    """30 s of audio (speech, then a pause every 2 s) through the bridge and the fake vLLM, each
    stream used 10 s: the audio reaches vLLM exactly once over the streams, and the transcript holds
    one word per chunk."""
    from tests.unit.voice_client.clients_testkit import Servers
    from voice_client.realtime import WebSocketTransport

    speed = 8  # audio and the machine's clock 8 x faster than real time: the test takes ~4 s
    chunks = [
        QUIET if index % 16 == 15 else chunk for index, chunk in enumerate(pcm_with_index(234))
    ]
    with Servers(deltas=("w ",), generate=True) as servers:

        async def scenario():
            start = time.monotonic()
            return await transcribe_stream(
                paced_chunks(chunks, speed),
                lambda: WebSocketTransport.connect(servers.url),
                max_stream_s=10,
                on_replay=replays.append,
                clock=lambda: start + (time.monotonic() - start) * speed,
            )

        replays: list[str] = []
        result = asyncio.run(scenario())
        sessions = servers.vllm.sessions
        assert (len(sessions), result.reopens, replays) == (result.sessions, 0, []), result
        assert (
            result.rollovers >= 2 and len(sessions) == result.rollovers + 1
        )  # every stream after the first is a move
        assert b"".join(bytes(session.audio) for session in sessions) == b"".join(chunks)
        # Each stream is one generation: one delta per 80 ms of its audio and TAIL_TOKENS more, as
        # vLLM sends them.
        assert [session.text for session in sessions] == [
            "w " * (-(-len(session.audio) // 2 // SAMPLES_PER_TOKEN) + TAIL_TOKENS)
            for session in sessions
        ]
        assert result.transcript == "".join(session.text for session in sessions)
        # The last stream's close reaches the fake vLLM through the bridge after the client has
        # returned.
        deadline = time.monotonic() + 5
        while (
            not all(session.closed.is_set() for session in sessions) and time.monotonic() < deadline
        ):
            time.sleep(0.005)
        assert all(session.closed.is_set() for session in sessions)


def test_pacing_follows_an_absolute_schedule():
    now = [0.0]
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds + 0.01  # every sleep overshoots by 10 ms

    async def collect(speed: float):
        return [
            c
            async for c in paced_chunks(
                iter_chunks(bytes(CHUNK_BYTES * 4)), speed, clock=lambda: now[0], sleep=fake_sleep
            )
        ]

    assert len(asyncio.run(collect(2.0))) == 4
    # Chunk n is due at n x 0.128 / 2 s after the first; overshoot is absorbed, not accumulated.
    assert sleeps == pytest.approx([0.064, 0.054, 0.054])
    sleeps.clear()
    asyncio.run(collect(0))
    assert sleeps == [0, 0, 0, 0]
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="speed must be 0"):
            asyncio.run(collect(bad))


def test_drive_machine_awaits_each_action_first_and_a_missing_done_goes_on(memory_server):
    """The public hook the Connect consumer drives the machine with: ``on_action`` is awaited before
    each action is carried out. A server that never sends ``transcription.done`` (vLLM #33962), with
    ``on_done_timeout="go_on"``: each generation's deltas are its text and the transcription ends
    normally, never failing."""
    from voice_client.realtime.driver import drive_machine
    from voice_client.realtime.policy import DONE_TIMEOUT_GO_ON

    memory_server.never_done = True
    seen: list[object] = []

    async def on_action(action) -> None:
        await asyncio.sleep(0)
        seen.append(action)

    machine_ = realtime.TranscriptionMachine(
        model="m", done_timeout_s=0.2, on_done_timeout=DONE_TIMEOUT_GO_ON
    )
    result = asyncio.run(
        drive_machine(
            machine_, chunks_of(*pcm_with_index(3)), memory_server.open, on_action=on_action
        )
    )
    texts = [action.text for action in seen if isinstance(action, realtime.ShowGenerationText)]
    assert texts == ["w1.0 w1.1 w1.2 "] and result.transcript == "w1.0 w1.1 w1.2 "
    assert isinstance(seen[-1], realtime.Finished) and isinstance(seen[0], realtime.OpenStream)
    assert memory_server.sessions[0].closed  # given up: closed by the client
