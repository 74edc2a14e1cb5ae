"""voice_client.sonic: request building and the event-stream parser (property-based), with its
bounds."""

from __future__ import annotations

import base64
import itertools
import json

import pytest
from hypothesis import given, settings, strategies as st

from voice_client.sonic import (
    SonicAudio,
    SonicEventParser,
    SonicRequest,
    SonicStreamError,
    TruncatedStreamError,
    assemble_audio,
    check_complete,
)


def event_line(event: dict) -> bytes:
    return json.dumps(event).encode() + b"\n"


def stream_of(chunks: list[bytes], extra_events: bool = True) -> bytes:
    """A valid Sonic response: chunk events (interleaved with timestamp events), then done."""
    lines = []
    for index, chunk in enumerate(chunks):
        lines.append(
            event_line(
                {
                    "type": "chunk",
                    "data": base64.b64encode(chunk).decode(),
                    "done": False,
                    "status_code": 206,
                    "context_id": "c",
                    "step_time": 0.01,
                }
            )
        )
        if extra_events and index % 3 == 1:
            lines.append(
                event_line(
                    {
                        "type": "timestamps",
                        "done": False,
                        "status_code": 206,
                        "word_timestamps": {"words": ["é"], "start": [0.0], "end": [0.1]},
                    }
                )
            )
    lines.append(event_line({"type": "done", "done": True, "status_code": 200, "context_id": "c"}))
    return b"".join(lines)


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(cut, 0), len(data)) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


audio_chunks = st.lists(
    st.binary(min_size=0, max_size=64).map(lambda b: b[: len(b) // 2 * 2]), min_size=0, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_any_split_of_a_valid_stream_yields_the_same_audio(chunks, cuts):
    stream = stream_of(chunks)
    audio = assemble_audio(split_at(stream, cuts))
    assert bytes(audio.pcm16) == b"".join(chunks)
    assert audio.chunks == len(chunks)
    assert audio.done


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, data=st.data())
def test_a_truncated_stream_is_reported_with_the_audio_received(chunks, data):
    stream = stream_of(chunks)
    cut = data.draw(st.integers(min_value=0, max_value=len(stream) - 1), label="cut")
    parts = split_at(
        stream[:cut], data.draw(st.lists(st.integers(0, cut), max_size=10), label="cuts")
    )
    with pytest.raises(TruncatedStreamError) as raised:
        assemble_audio(parts)
    # What was decoded before the cut is kept, and it is a prefix of the full audio.
    assert b"".join(chunks).startswith(raised.value.audio)


def test_several_events_packed_in_one_part_and_one_event_across_parts():
    stream = stream_of([b"\x01\x00\x02\x00", b"\x03\x00"], extra_events=False)
    middle = stream.index(b"\n") + 5  # first event plus the start of the second in one part
    parser, audio = SonicEventParser(), SonicAudio()
    first = parser.feed(stream[:middle])
    assert [event["type"] for event in first] == ["chunk"]
    for event in first + parser.feed(stream[middle:]):
        audio.add(event)
    check_complete(parser, audio)
    assert bytes(audio.pcm16) == b"\x01\x00\x02\x00\x03\x00"


def test_sse_data_prefix_and_blank_lines_are_accepted():
    chunk = base64.b64encode(b"\x05\x00").decode()
    stream = (
        f'data: {{"type":"chunk","data":"{chunk}"}}\n\ndata: {{"type":"done","done":true}}\n\n'
    ).encode()
    assert bytes(assemble_audio([stream]).pcm16) == b"\x05\x00"


# ---- Server-Sent Events framing ----------------------------------------------------------------


def sonic_events(chunks: list[bytes]) -> list[dict]:
    """The events of a valid Sonic response (as stream_of writes them, one timestamps event), as
    dicts."""
    return [json.loads(line) for line in stream_of(chunks).splitlines()]


@st.composite
def sse_framing(draw, events: list[dict]) -> tuple[bytes, str, int | None]:
    """``events`` written as a Server-Sent Events stream with framing choices drawn by hypothesis:
    one line end for the stream (LF, CRLF or a lone CR), an optional byte-order mark, comments,
    ``event:`` lines (sometimes instead of the JSON's ``type``), ``id:`` and ``retry:`` lines,
    unknown fields, and each event's JSON spread over several ``data:`` lines. Returns (stream, last
    id written, last retry written)."""
    end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]), label="line end")
    lines: list[bytes] = [b"\xef\xbb\xbf: stream start"] if draw(st.booleans(), label="BOM") else []
    last_id, last_retry = "", None
    for number, event in enumerate(events):
        if draw(st.booleans(), label="comment"):
            lines.append(b": keep-alive")
        if draw(st.booleans(), label="event line"):
            lines.append(b"event: " + event["type"].encode())
            if draw(st.booleans(), label="type only in event line"):
                event = {key: value for key, value in event.items() if key != "type"}
        if draw(st.booleans(), label="id"):
            last_id = f"evt-{number}"
            lines.append(f"id: {last_id}".encode())
        if draw(st.booleans(), label="retry"):
            last_retry = draw(st.integers(0, 10_000), label="retry ms")
            lines.append(f"retry: {last_retry}".encode())
        if draw(st.booleans(), label="unknown field"):
            lines.append(b"x-trace: 1")
        indent = draw(st.sampled_from([None, 0, 1, 2]), label="indent")
        space = draw(st.sampled_from([b"", b" "]), label="space after colon")
        lines.extend(
            b"data:" + space + line.encode()
            for line in json.dumps(event, indent=indent).split("\n")
        )
        lines.append(b"")  # the empty line that dispatches the event
    return b"".join(line + end for line in lines), last_id, last_retry


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, data=st.data())
def test_any_split_of_a_server_sent_events_stream_yields_the_same_audio(chunks, data):
    stream, last_id, last_retry = data.draw(sse_framing(sonic_events(chunks)), label="stream")
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40), label="cuts")
    parser, audio = SonicEventParser(), SonicAudio()
    for part in split_at(stream, cuts):
        for event in parser.feed(part):
            audio.add(event)
    check_complete(parser, audio)
    assert bytes(audio.pcm16) == b"".join(chunks)
    assert (audio.chunks, audio.done) == (len(chunks), True)
    assert (parser.last_event_id, parser.retry_ms) == (last_id, last_retry)


@settings(max_examples=300, deadline=None)
@given(chunks=audio_chunks, data=st.data())
def test_a_truncated_server_sent_events_stream_is_reported_with_the_audio_received(chunks, data):
    stream, _, _ = data.draw(sse_framing(sonic_events(chunks)), label="stream")
    cut = data.draw(st.integers(min_value=0, max_value=len(stream) - 1), label="cut")
    parts = split_at(
        stream[:cut], data.draw(st.lists(st.integers(0, cut), max_size=10), label="cuts")
    )
    if stream.endswith(b"\r\n") and cut == len(stream) - 1:
        # Only the LF of the final CRLF is missing: the lone CR left is a complete line end of its
        # own.
        assert bytes(assemble_audio(parts).pcm16) == b"".join(chunks)
        return
    with pytest.raises(TruncatedStreamError) as raised:
        assemble_audio(parts)
    assert b"".join(chunks).startswith(raised.value.audio)


def test_server_sent_events_fields_each_parse():
    """Each of these lines used to fail with "not valid JSON"."""
    chunk = base64.b64encode(b"\x05\x00").decode()
    stream = (
        ": connected\r\n"
        "retry: 3000\r\n"
        "id: 1\r\n"
        "event: chunk\r\n"
        f'data: {{"data": "{chunk}",\r\n'
        'data:  "done": false}\r\n'
        "\r\n"
        "event: done\r\n"
        "id: 2\r\n"
        'data: {"done": true}\r\n'
        "\r\n"
    ).encode()
    parser = SonicEventParser()
    events = parser.feed(stream)
    assert events == [
        {"data": chunk, "done": False, "type": "chunk"},
        {"done": True, "type": "done"},
    ]
    assert (parser.last_event_id, parser.retry_ms) == ("2", 3000)
    assert parser.finish() == []


def test_server_sent_events_edge_cases():
    parser = SonicEventParser()
    # An empty line without data dispatches nothing; a retry that is not a number is ignored; an id
    # with NUL too.
    assert parser.feed(b"event: ping\n\nretry: soon\nid: a\x00b\n\n") == []
    assert (parser.retry_ms, parser.last_event_id) == (None, "")
    # The type inside the JSON wins over the event name.
    assert parser.feed(b'event: chunk\ndata: {"type": "timestamps"}\n\n') == [
        {"type": "timestamps"}
    ]
    # A CRLF cut between two parts is one line end, not two (which would dispatch early).
    assert parser.feed(b'data: {"type": "done",\r') == []
    assert parser.feed(b'\ndata: "done": true}\r') == []
    assert parser.feed(b"\n\r\n") == [{"type": "done", "done": True}]


def test_an_sse_error_event_with_text_data_is_reported():
    with pytest.raises(
        SonicStreamError, match="Sonic reported an error \\(status None\\): model overloaded"
    ):
        assemble_audio([b"event: error\ndata: model overloaded\n\n"])
    with pytest.raises(SonicStreamError, match="not valid JSON"):
        assemble_audio([b"event: chunk\ndata: not json\n\n"])


def test_an_sse_event_without_its_closing_empty_line_is_truncated():
    chunk = base64.b64encode(b"\x01\x00").decode()
    with pytest.raises(TruncatedStreamError, match="ended inside a server-sent event") as raised:
        assemble_audio(
            [f'data: {{"type": "chunk", "data": "{chunk}"}}\n\ndata: {{"type": "done"}}\n'.encode()]
        )
    assert raised.value.audio == b"\x01\x00"


def test_error_event_and_malformed_events_are_reported():
    ok = event_line({"type": "chunk", "data": base64.b64encode(b"\x07\x00").decode()})
    with pytest.raises(SonicStreamError, match=r"status 500.*out of memory") as raised:
        assemble_audio(
            [ok + event_line({"type": "error", "status_code": 500, "error": "out of memory"})]
        )
    assert raised.value.audio == b"\x07\x00"
    with pytest.raises(SonicStreamError, match="not valid JSON"):
        assemble_audio([b"{oops\n"])
    with pytest.raises(SonicStreamError, match="not valid base64"):
        assemble_audio([event_line({"type": "chunk", "data": "***"})])


def test_request_body_and_invoke_arguments():
    request = SonicRequest(
        "Hello there.", "voice-123", language="fr", sample_rate_hz=24000, context_id="ctx-1"
    )
    kwargs = request.invoke_kwargs("sonic-endpoint")
    assert kwargs["EndpointName"] == "sonic-endpoint"
    assert kwargs["ContentType"] == "application/json"
    assert kwargs["Accept"] == "text/event-stream"
    assert json.loads(kwargs["Body"]) == {
        "context_id": "ctx-1",
        "transcript": "Hello there.",
        "voice": {"mode": "id", "id": "voice-123"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        "language": "fr",
    }
    assert SonicRequest("a", "v").context_id != SonicRequest("a", "v").context_id


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transcript": "  "}, "text to speak is empty"),
        ({"voice_id": ""}, "voice ID is empty"),
        ({"language": "xx"}, "language 'xx' is not supported"),
        ({"sample_rate_hz": 11025}, "11025 Hz is not supported; use one of 8000, 16000"),
    ],
)
def test_bad_request_values_are_named(kwargs, message):
    values = {"transcript": "Hi", "voice_id": "v"} | kwargs
    with pytest.raises(ValueError, match=message):
        SonicRequest(**values)


def test_events_after_done_and_done_on_a_chunk_are_accepted_with_a_warning():
    audio = SonicAudio()
    audio.add({"type": "chunk", "data": base64.b64encode(b"\x01\x00").decode(), "done": True})
    assert audio.done
    audio.add({"type": "chunk", "data": base64.b64encode(b"\x02\x00").decode()})
    audio.add({"type": "timestamps"})
    assert bytes(audio.pcm16) == b"\x01\x00\x02\x00"
    assert audio.warnings == [
        "2 events arrived after the done event; their audio (2 bytes) was kept"
    ]


# ---- a hostile endpoint: deep JSON, endless events, too much audio, a many-line error ----------


def test_deeply_nested_json_is_a_clear_error_not_a_recursion_error():
    deep = b'{"type": "timestamps", "x": ' + b"[" * 2000 + b"]" * 2000 + b"}\n"
    with pytest.raises(SonicStreamError, match="nests deeper than 32 levels"):
        assemble_audio([deep])


def test_an_event_that_never_ends_is_refused_once_past_the_bound():
    from voice_client import sonic

    parser = SonicEventParser()
    part = b'{"type": "chunk", "data": "' + b"A" * (64 * 1024)
    with pytest.raises(SonicStreamError, match="grew past 1,048,576 bytes without a line break"):
        for _ in range(sonic.MAX_EVENT_BYTES // len(part) + 2):
            parser.feed(part)
    sse = SonicEventParser()
    with pytest.raises(
        SonicStreamError, match="server-sent event's data grew past 1,048,576 bytes"
    ):
        for _ in range(sonic.MAX_EVENT_BYTES // 1000 + 2):
            sse.feed(b"data: " + b"A" * 1000 + b"\n")


def test_audio_past_the_bound_fails_with_the_audio_kept(monkeypatch):
    from voice_client import sonic

    monkeypatch.setattr(sonic, "MAX_AUDIO_BYTES", 4)
    chunk = event_line({"type": "chunk", "data": base64.b64encode(b"\x01\x00\x02\x00").decode()})
    with pytest.raises(SonicStreamError, match="more than 4 bytes of audio") as raised:
        assemble_audio([chunk + chunk])
    assert raised.value.audio == b"\x01\x00\x02\x00"
