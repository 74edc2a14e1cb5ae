"""What unauthenticated peers can hold in the front door (voice_devtools.local.bounds), over HTTP/2
with TLS on loopback, driven frame by frame: streams the caller never lets the server send on are
reset and freed, an oversized header block ends the connection with GOAWAY and one log line, and the
limits on connections, streams, idle time and request bodies hold. After each, a normal call
through the SDK still works."""

from __future__ import annotations

import logging
import ssl
import time

import h2.events
import h2.settings
import pytest
from h2.errors import ErrorCodes
from hpack.hpack import encode_integer
from hyperframe.frame import ContinuationFrame, DataFrame, HeadersFrame

from tests.e2e.local.conftest import E2E_ACCEPT_S, VOXTRAL, front_door_env
from tests.e2e.local.test_local_access_log import access_lines
from tests.e2e.local.test_local_refusals import RawH2, answer
from tests.e2e.local.test_local_streams import RECORDING
from tests.unit.voice_client.clients_testkit import client_parser
from voice_devtools.local.bidi import StreamSettings
from voice_devtools.local.bounds import CONNECTION_LOGGER, Held, ServerBounds, ServerLimits
from voice_devtools.local.runtime import ACCESS_LOGGER
from voicectl.commands import transcribe

STREAM_PATH = f"/endpoints/{VOXTRAL}/invocations-bidirectional-stream"
RESPONSE_STREAM_PATH = "/endpoints/sonic-tts/invocations-response-stream"
NOTHING_HELD = Held(connections=0, streams=0, buffers=0, buffered_bytes=0, h2_streams=0)
WAIT_S = 15.0  # the longest any test waits for the server; never a figure asserted


@pytest.fixture
def bounded_stack(stack_factory, monkeypatch, tmp_path):
    """Start a stack whose front door has the given limits (ServerLimits' keywords), with the
    clients' environment for it."""

    def start(**limits):
        stack = stack_factory(
            StreamSettings(accept_timeout_s=E2E_ACCEPT_S), ServerBounds(ServerLimits(**limits))
        )
        return front_door_env(stack, monkeypatch, tmp_path)

    return start


def held_when(stack, predicate) -> Held:
    """What the front door holds, once ``predicate`` is true of it (or after WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while not predicate(held := stack.call(_held(stack))) and time.monotonic() < deadline:
        time.sleep(0.02)
    return held


async def _held(stack) -> Held:
    return stack.bounds.held()


def read_events(client: RawH2, until, seconds: float = WAIT_S) -> tuple[list, bool]:
    """Events read until ``until(events)`` is true, the server closes the connection, or
    ``seconds``; and whether the connection is still open."""
    events: list = []
    client.sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    while not until(events) and time.monotonic() < deadline:
        try:
            data = client.sock.recv(65536)
        except (TimeoutError, ConnectionError, OSError):
            return events, False
        if not data:
            return events, False
        events += client.conn.receive_data(data)
        client.flush()
    return events, True


def resets(events) -> dict[int, ErrorCodes]:
    return {
        event.stream_id: event.error_code
        for event in events
        if isinstance(event, h2.events.StreamReset)
    }


def normal_call_works(stack) -> None:
    """A whole transcription through the SDK (HTTP/2, TLS, SigV4): the front door serves."""
    assert (
        transcribe.run(
            client_parser().parse_args(
                [
                    "transcribe",
                    RECORDING,
                    "--endpoint",
                    VOXTRAL,
                    "--endpoint-url",
                    stack.url,
                    "--speed",
                    "0",
                ]
            )
        )
        == 0
    )


def window_zero_client(stack) -> RawH2:
    client = RawH2(stack.url, stack.ca_file)
    client.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    client.flush()
    return client


def no_traceback(caplog) -> None:
    assert not [record for record in caplog.records if record.exc_info]
    assert "Traceback" not in caplog.text


def test_streams_whose_window_stays_at_zero_are_reset_and_the_stream_table_empties(
    bounded_stack, caplog
):
    stack = bounded_stack(stalled_send_timeout_s=0.5)
    caplog.set_level(logging.INFO)
    client = window_zero_client(stack)
    try:
        opened = [client.request(STREAM_PATH, body=b"") for _ in range(5)]
        # The 403's headers arrive (they are not flow-controlled); its body cannot.
        events, open_ = read_events(client, lambda seen: len(resets(seen)) == 5)
        assert open_
        assert resets(events) == dict.fromkeys(opened, ErrorCodes.CANCEL)
        assert (
            sorted(
                event.stream_id for event in events if isinstance(event, h2.events.ResponseReceived)
            )
            == opened
        )
        # The connection is still open; the server holds nothing for its streams.
        assert held_when(stack, lambda held: held.streams == 0) == Held(
            connections=1, streams=0, buffers=0, buffered_bytes=0, h2_streams=0
        )
    finally:
        client.close()
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    assert (
        access_lines(caplog, 5)
        == [
            {
                "operation": "InvokeEndpointWithBidirectionalStream",
                "target": f"{VOXTRAL}/-",
                "status": "403",
                "outcome": "MissingAuthenticationTokenException; reset (CANCEL): the "
                "caller's flow-control window stayed at 0 for 0.5 s",
            }
        ]
        * 5
    )
    no_traceback(caplog)
    normal_call_works(stack)


def test_a_stalled_stream_whose_caller_keeps_sending_is_freed_and_the_connection_goes_on(
    bounded_stack, caplog
):
    stack = bounded_stack(stalled_send_timeout_s=0.5)
    # The answer waits on the window while the caller sends more than the application's input
    # queue takes: hypercorn stopped reading the whole connection then, for good.
    caplog.set_level(logging.INFO)
    client = window_zero_client(stack)
    try:
        stuck = client.request(STREAM_PATH)  # the request stream stays open
        client.sock.sendall(
            b"".join(DataFrame(stuck, data=b"audio" * 100).serialize() for _ in range(30))
        )
        events, open_ = read_events(client, lambda seen: stuck in resets(seen))
        assert open_ and resets(events) == {stuck: ErrorCodes.CANCEL}
        # The same connection serves the next call (its window opened for this stream).
        second = client.request("/no/such/operation", body=b"")
        client.conn.increment_flow_control_window(65535, stream_id=second)
        client.flush()
        events, open_ = read_events(
            client,
            lambda seen: any(
                isinstance(event, h2.events.StreamEnded) and event.stream_id == second
                for event in seen
            ),
        )
        assert open_ and answer(events, second)[0] == 404
        assert held_when(stack, lambda held: held.streams == 0).buffers == 0
    finally:
        client.close()
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    no_traceback(caplog)


def header_block_frames(client: RawH2, extra: bytes) -> bytes:
    """HEADERS and CONTINUATION frames of a request to STREAM_PATH on stream 1, its header
    block followed by the encoded fields ``extra`` (the client's h2 is told of the stream, so
    that it reads the answer; what it would send for it is dropped)."""
    pseudo = [
        (":method", "POST"),
        (":path", STREAM_PATH),
        (":scheme", "https"),
        (":authority", client.host),
    ]
    block = bytes(client.conn.encoder.encode(pseudo)) + extra
    client.conn.send_headers(1, pseudo, end_stream=True)
    client.conn.data_to_send()
    frames = []
    for offset in range(0, len(block), 16384):
        frame = HeadersFrame(1) if offset == 0 else ContinuationFrame(1)
        frame.data = block[offset : offset + 16384]
        if offset == 0:
            frame.flags.add("END_STREAM")
        if offset + 16384 >= len(block):
            frame.flags.add("END_HEADERS")
        frames.append(frame.serialize())
    return b"".join(frames)


def literal(name: bytes, value: bytes) -> bytes:
    """A field as an HPACK literal without indexing, not Huffman-coded (RFC 7541 section 6.2.2)."""
    return (
        b"\x00"
        + bytes(encode_integer(len(name), 7))
        + name
        + bytes(encode_integer(len(value), 7))
        + value
    )


def indexed_bomb(client: RawH2) -> bytes:
    """One 4000-byte field added to the dynamic table, then referred to 20 times (one byte each):
    about 4 KB encoded, 80 KB decoded."""
    name, value = b"x-large", b"a" * 4000
    incremental = (
        b"\x40"
        + bytes(encode_integer(len(name), 7))
        + name
        + bytes(encode_integer(len(value), 7))
        + value
    )
    newest = 62  # RFC 7541 section 2.3.3: the static table has 61 entries, then the newest entry
    return incremental + bytes([0x80 | newest]) * 20  # indexed fields (section 6.1)


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ("one 1 MiB literal", "a header block of over 65536 bytes (MAX_HEADER_LIST_SIZE)"),
        ("4 KB referred to 20 times", "Oversized header block"),
    ],
    ids=["encoded", "decoded"],
)
def test_an_oversized_header_block_gets_goaway_and_one_log_line(
    bounded_stack, caplog, shape, reason
):
    stack = bounded_stack()
    caplog.set_level(logging.INFO)
    client = RawH2(stack.url, stack.ca_file)
    try:
        extra = (
            literal(b"x-large", b"a" * (1 << 20))
            if shape.startswith("one")
            else indexed_bomb(client)
        )
        client.sock.sendall(header_block_frames(client, extra))
        events, _ = read_events(
            client,
            lambda seen: any(isinstance(event, h2.events.ConnectionTerminated) for event in seen),
        )
    finally:
        client.close()
    (goaway,) = [event for event in events if isinstance(event, h2.events.ConnectionTerminated)]
    assert (goaway.error_code, goaway.last_stream_id) == (ErrorCodes.ENHANCE_YOUR_CALM, 0)
    lines = [record.getMessage() for record in caplog.records if record.name == CONNECTION_LOGGER]
    assert len(lines) == 1, lines
    assert lines[0].startswith("closed the HTTP/2 connection from 127.0.0.1:")
    assert f" with GOAWAY ENHANCE_YOUR_CALM: {reason}" in lines[0]
    assert not [record for record in caplog.records if record.name == ACCESS_LOGGER]
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    no_traceback(caplog)
    normal_call_works(stack)


def test_a_header_list_under_the_limit_is_served(bounded_stack, caplog):
    stack = bounded_stack()
    caplog.set_level(logging.INFO)
    client = RawH2(stack.url, stack.ca_file)
    try:
        # 60 KiB of value, 32 + 7 bytes counted for the field: under 64 KiB decoded.
        client.sock.sendall(header_block_frames(client, literal(b"x-large", b"a" * 61440)))
        events, open_ = read_events(
            client, lambda seen: any(isinstance(event, h2.events.StreamEnded) for event in seen)
        )
    finally:
        client.close()
    assert open_ and answer(events, 1)[0] == 403  # unsigned: refused by the application
    assert not [record for record in caplog.records if record.name == CONNECTION_LOGGER]


def test_the_settings_announce_the_limits_and_a_stream_over_them_ends_the_connection(
    bounded_stack, caplog
):
    stack = bounded_stack()
    caplog.set_level(logging.INFO)
    client = window_zero_client(stack)  # the answers cannot end: every stream stays open
    try:
        # Sent before the server's SETTINGS are read, so the client's h2 does not hold them back.
        opened = [client.request(STREAM_PATH) for _ in range(101)]
        events, _ = read_events(
            client,
            lambda seen: any(isinstance(event, h2.events.ConnectionTerminated) for event in seen),
        )
    finally:
        client.close()
    (settings,) = [event for event in events if isinstance(event, h2.events.RemoteSettingsChanged)]
    announced = {code: change.new_value for code, change in settings.changed_settings.items()}
    assert (
        announced[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS],
        announced[h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE],
    ) == (100, 65536)
    (goaway,) = [event for event in events if isinstance(event, h2.events.ConnectionTerminated)]
    assert goaway.error_code == ErrorCodes.PROTOCOL_ERROR and opened[-1] == 201
    (line,) = [record.getMessage() for record in caplog.records if record.name == CONNECTION_LOGGER]
    assert line.endswith("with GOAWAY PROTOCOL_ERROR: Max inbound streams is 100, 100 open")
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    no_traceback(caplog)


def test_a_connection_over_the_limit_is_closed_with_one_log_line(bounded_stack, caplog):
    stack = bounded_stack(max_connections=2)
    caplog.set_level(logging.INFO)
    first, second = RawH2(stack.url, stack.ca_file), RawH2(stack.url, stack.ca_file)
    try:
        for client in (first, second):
            assert read_events(client, lambda seen: bool(seen))[1]  # its SETTINGS: served
        try:
            third = RawH2(stack.url, stack.ca_file)  # the TLS handshake completes first
        except (ConnectionError, ssl.SSLError):
            events, open_ = [], False  # closed before the client's preface was written
        else:
            events, open_ = read_events(third, lambda seen: False)
            third.close()
        assert (events, open_) == ([], False)
        (line,) = [
            record.getMessage() for record in caplog.records if record.name == CONNECTION_LOGGER
        ]
        assert line.startswith("refused a connection from 127.0.0.1:")
        assert line.endswith(": 2 connections are open (at most 2)")
        first.close()
        assert held_when(stack, lambda held: held.connections == 1).connections == 1
        fourth = RawH2(stack.url, stack.ca_file)
        stream = fourth.request("/no/such/operation", body=b"")
        events, open_ = read_events(
            fourth, lambda seen: any(isinstance(event, h2.events.StreamEnded) for event in seen)
        )
        fourth.close()
        assert open_ and answer(events, stream)[0] == 404
    finally:
        first.close()
        second.close()
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    no_traceback(caplog)


def test_an_idle_connection_is_closed(bounded_stack, caplog):
    stack = bounded_stack(idle_connection_timeout_s=0.5)
    caplog.set_level(logging.INFO)
    client = RawH2(stack.url, stack.ca_file)
    try:
        stream = client.request("/no/such/operation", body=b"")
        events, open_ = read_events(
            client, lambda seen: any(isinstance(event, h2.events.StreamEnded) for event in seen)
        )
        assert open_ and answer(events, stream)[0] == 404
        _, open_ = read_events(client, lambda seen: False)  # nothing more, until the close
        assert not open_
    finally:
        client.close()
    assert held_when(stack, lambda held: held.connections == 0) == NOTHING_HELD
    no_traceback(caplog)


def test_a_response_stream_body_over_the_models_maximum_is_refused(bounded_stack):
    stack = bounded_stack()
    client = RawH2(stack.url, stack.ca_file)
    try:
        stream = client.request(RESPONSE_STREAM_PATH, [("content-type", "application/json")])
        sent, events = 0, []
        while sent <= 6 * 1024 * 1024 and not ended(events, stream):
            if min(client.conn.local_flow_control_window(stream), 16384) == 16384:
                client.conn.send_data(stream, b"x" * 16384)
                client.flush()
                sent += 16384
            else:  # wait for the server's WINDOW_UPDATE (or its answer)
                events += read_events(client, lambda seen: bool(seen))[0]
        events += read_events(client, lambda seen: ended(events + seen, stream))[0]
    finally:
        client.close()
    assert answer(events, stream) == (
        400,
        {
            "message": "1 validation error detected: Value at 'body' failed to satisfy constraint: "
            "Member must have length less than or equal to 6291456"
        },
    )


def ended(events, stream: int) -> bool:
    return any(
        isinstance(event, h2.events.StreamEnded | h2.events.StreamReset)
        and event.stream_id == stream
        for event in events
    )


def test_a_response_stream_body_that_stops_arriving_is_answered_408(bounded_stack):
    stack = bounded_stack()
    stack.runtime.body_timeout_s = 0.5
    client = RawH2(stack.url, stack.ca_file)
    try:
        stream = client.request(RESPONSE_STREAM_PATH, [("content-type", "application/json")])
        client.conn.send_data(stream, b'{"transcript": ')  # and nothing more
        client.flush()
        events, _ = read_events(
            client, lambda seen: any(isinstance(event, h2.events.StreamEnded) for event in seen)
        )
    finally:
        client.close()
    assert answer(events, stream) == (
        408,
        {"message": "No request body data arrived for 0.5 s; the call was ended."},
    )


def test_limits_must_be_positive():
    with pytest.raises(
        ValueError,
        match=r"^server limits must be positive numbers: "
        r"max_connections=0, stalled_send_timeout_s=-1$",
    ):
        ServerLimits(max_connections=0, stalled_send_timeout_s=-1)
