"""VoxtralUtteranceStream over in-process streams: interim texts then one final per utterance, in
order; the bounded wait for a ``transcription.done`` that never comes; a refused stream reported
once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.unit.voice_client.frameworks.frameworks_testkit import ScriptedServer
from voice_client.audio import CHUNK_BYTES
from voice_client.frameworks.voxtral_stream import (
    Failure,
    Final,
    Interim,
    VoxtralUtteranceStream,
)
from voice_client.realtime.protocol import RealtimeError

LOUD = b"\x10\x27\xf0\xd8" * (CHUNK_BYTES // 4)  # one 128 ms chunk of a loud square wave


async def utterances(
    server: ScriptedServer,
    count: int,
    *,
    chunks: int = 3,
    done_wait_s: float = 5.0,
    piece: int = 640,
) -> list:
    stream = VoxtralUtteranceStream(server.open, done_wait_s=done_wait_s)
    audio = (
        LOUD * chunks + b"\x01\x00" * 100
    )  # not a whole number of chunks: the rest goes at the end of speech
    for _ in range(count):
        for start in range(0, len(audio), piece):  # framework-sized pieces (20 ms)
            stream.push_audio(audio[start : start + piece])
        stream.end_of_speech()
    events = []
    finals = 0
    while finals < count:
        event = await asyncio.wait_for(stream.events.get(), 10)
        events.append(event)
        finals += not isinstance(event, Interim)
    await stream.aclose()
    return events


def test_interim_texts_then_the_final_of_each_utterance_in_order():
    server = ScriptedServer()
    events = asyncio.run(utterances(server, 2))
    assert [type(event) for event in events] == [Interim, Interim, Interim, Interim, Final] * 2
    assert [event.text for event in events[:5]] == [
        "word1",
        "word1 word2",
        "word1 word2 word3",
        "word1 word2 word3 word4",
        "word1 word2 word3 word4",
    ]
    assert events[4].complete and events[4].speech_end_at is not None
    assert len(server.streams) == 2  # one stream (and generation) per utterance
    audio = LOUD * 3 + b"\x01\x00" * 100
    assert [bytes(stream.audio) for stream in server.streams] == [
        audio,
        audio,
    ]  # every byte, once, in order
    assert [event["type"] for event in server.streams[0].received][-1:] == [
        "input_audio_buffer.commit"
    ]
    assert server.streams[0].received[-1] == {"type": "input_audio_buffer.commit", "final": True}


def test_a_done_that_never_comes_ends_the_utterance_with_its_deltas(caplog):
    server = ScriptedServer(drop_done=True)
    with caplog.at_level(logging.WARNING):
        events = asyncio.run(utterances(server, 1, done_wait_s=0.2))
    final = events[-1]
    assert isinstance(final, Final) and not final.complete
    assert final.text == events[-2].text == "word1 word2 word3 word4"
    assert "no transcription.done within 0.2 s" in caplog.text
    assert server.streams[0].closed  # the stuck stream is closed


def test_a_refused_stream_is_one_fatal_failure_and_later_audio_is_dropped():
    server = ScriptedServer(
        refuse=RealtimeError(
            "SageMaker rejected the request: Endpoint x not found", code="ValidationError"
        )
    )

    opens = []

    async def opener():
        opens.append(1)
        return await server.open()

    async def run():
        stream = VoxtralUtteranceStream(opener)
        stream.push_audio(LOUD)
        stream.end_of_speech()
        first = await asyncio.wait_for(stream.events.get(), 10)
        stream.push_audio(LOUD)  # dropped: the endpoint refuses streams
        stream.end_of_speech()
        await stream.aclose(wait_s=5.0)  # whatever the second utterance would do is done
        rest = [stream.events.get_nowait() for _ in range(stream.events.qsize())]
        return first, rest

    first, rest = asyncio.run(run())
    assert isinstance(first, Failure) and first.fatal and "Endpoint x not found" in str(first.error)
    assert rest == []
    assert len(opens) == 1  # the later audio opened no stream


def test_utterances_refused_together_are_reported_once():
    """Two utterances started before the endpoint's refusal is known: one failure, not two."""
    server = ScriptedServer(
        refuse=RealtimeError("SageMaker rejected the request: Endpoint x", code="ValidationError")
    )

    async def run():
        stream = VoxtralUtteranceStream(server.open)
        for _ in range(2):
            stream.push_audio(LOUD)
            stream.end_of_speech()
        await stream.aclose(wait_s=5.0)
        return [stream.events.get_nowait() for _ in range(stream.events.qsize())]

    events = asyncio.run(run())
    assert [type(event) for event in events] == [Failure] and events[0].fatal


@pytest.mark.parametrize("pieces", [1, 7])
def test_end_of_speech_without_audio_does_nothing(pieces):
    async def run():
        stream = VoxtralUtteranceStream(ScriptedServer().open)
        for _ in range(pieces):
            stream.end_of_speech()
        await stream.aclose()
        return stream.events.qsize()

    assert asyncio.run(run()) == 0


def test_a_stream_cut_mid_utterance_is_answered_by_a_new_stream_without_losing_audio():
    """The machine reopens and resends the utterance's audio since the last transcription.done: the
    final text covers all of it once (the first stream's partial text is replaced)."""
    server = ScriptedServer(cut_after_appends=2)
    events = asyncio.run(utterances(server, 1, chunks=4))
    final = events[-1]
    assert isinstance(final, Final) and final.complete
    assert (
        final.text == "word1 word2 word3 word4 word5"
    )  # five appends on the new stream, none twice
    assert len(server.streams) == 2
    assert (
        bytes(server.streams[1].audio) == LOUD * 4 + b"\x01\x00" * 100
    )  # all of it, on the new stream
