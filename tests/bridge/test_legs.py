"""What a hostile client tried against the bridge (a review on loopback), one test per case, each a
whole kind.

Every test runs the real bridge in front of the fake vLLM over real sockets on 127.0.0.1, and
`/ping` must answer 200 all through the attack (`ping_during`). How fast it answers is a figure, not
an assertion: bench/bridge_bench.py prints `/ping` while streams are held (target under 100 ms,
services/bridge/README.md).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
import types

import pytest
from websockets.frames import Opcode

import bridge.protocol
from bridge import legs
from bridge.legs import (
    FRAME_BUDGET,
    HOLD_BYTES,
    MAX_CONTROL_FRAMES_PER_S,
    MAX_FRAGMENTS,
    SMALL_FEED_BYTES,
    ClientLeg,
)
from bridge.protocol import MAX_OTHER_EVENT_BYTES
from tests.bridge.bridge_testkit import (
    BEYOND_LIVENESS_S,
    LIVENESS_S,
    PCM_CHUNK,
    RawClient,
    append,
    event,
    frame,
    handshake_never_answered,
    http_exchange,
    ping_during,
    ping_status,
    recv_event,
    running_bridge,
    started_stream,
)
from voice_devtools.local.fake_vllm import FakeVllm

#: One masked frame header with no payload is 6 bytes: the smallest frame a client can send.
SMALLEST_FRAME_BYTES = 6


def spy_on_bridge_json(monkeypatch) -> list[int]:
    """Record the size of every text the bridge's protocol module parses with json.loads (the fake
    vLLM, in the same process, parses with its own import)."""
    sizes: list[int] = []

    def loads(text, *args, **kwargs):
        sizes.append(len(text))
        return json.loads(text, *args, **kwargs)

    spy = types.SimpleNamespace(loads=loads, dumps=json.dumps, JSONDecodeError=json.JSONDecodeError)
    monkeypatch.setattr(bridge.protocol, "json", spy)
    return sizes


async def flood(client: RawClient, unit: bytes, count: int) -> None:
    """Write `unit` (one or more frames) `count` times, in blocks of about 64 KiB as the socket
    drains: the attacker sends without pause, yet its own work stays small, as the test's event loop
    is the bridge's."""
    block = unit * max(1, 64 * 1024 // len(unit))
    per_block = len(block) // len(unit)
    transport = client.writer.transport
    sent = 0
    while sent < count and not transport.is_closing():
        while transport.get_write_buffer_size() > 64 * 1024:
            await asyncio.sleep(0.005)
        blocks = min(per_block, count - sent)
        transport.write(block if blocks == per_block else unit * blocks)
        sent += blocks


async def push_frames(client: RawClient, payload: bytes, count: int) -> None:
    """Write `count` copies of one pre-serialised frame, 64 KiB at a time as the socket drains, so
    that the attacker's own work stays small: the test's event loop is also the bridge's."""
    view = memoryview(payload)
    transport = client.writer.transport
    for _ in range(count):
        for offset in range(0, len(view), 64 * 1024):
            while transport.get_write_buffer_size() > 64 * 1024:
                await asyncio.sleep(0.005)
            transport.write(view[offset : offset + 64 * 1024])


async def started_raw(bridge_, vllm: FakeVllm, index: int = 0) -> tuple[RawClient, object]:
    """A raw client past session.update and a commit, and its FakeSession."""
    client = await RawClient.open(bridge_)
    client.write(
        frame(Opcode.TEXT, event("session.update", model=vllm.model).encode())
        + frame(Opcode.TEXT, event("input_audio_buffer.commit").encode())
    )
    session = await vllm.wait_for_session(index)
    await session.wait_for_event("input_audio_buffer.commit")
    return client, session


# ---- frames the per-turn budget did not count --------------------------------------------------


@pytest.mark.parametrize("payload", [b"", b"x"], ids=["empty", "1-byte"])
def test_a_message_in_more_than_max_fragments_closes_1008_and_ping_answers(
    run, monkeypatch, payload
):
    # The client never answers the bridge's close: dropping its connection CLIENT_CLOSE_TIMEOUT_S (2
    # s) later would free the stream too. Set past the wait, so that the stream is seen to end when
    # the client hangs up.
    monkeypatch.setattr(legs, "CLIENT_CLOSE_TIMEOUT_S", BEYOND_LIVENESS_S)

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)

            async def attack():
                client.write(frame(Opcode.TEXT, payload, fin=False))
                # 1.2 MB; RUF006: the flood ends when the transport closes (its sleep timer holds it
                # till then).
                unit = frame(Opcode.CONT, payload, fin=False)
                asyncio.ensure_future(flood(client, unit, 200_000))  # noqa: RUF006
                return await client.close_frame(timeout=5)

            task = asyncio.ensure_future(attack())
            await ping_during(bridge_, task)
            code, reason = task.result()
            assert (code, reason) == (1008, f"more than {MAX_FRAGMENTS} fragments in one message")
            await session.wait_closed(timeout=LIVENESS_S)
            assert session.event_types() == [
                "session.update",
                "input_audio_buffer.commit",
            ]  # nothing relayed
            client.abort()
            async with asyncio.timeout(LIVENESS_S):
                while bridge_.active_streams:
                    await asyncio.sleep(0.02)

    run(scenario())


def test_pings_beyond_the_limit_close_1008_and_ping_answers(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)

            async def attack():
                # 13 MB of pings; RUF006: the flood ends when the transport closes (its sleep timer
                # holds it till then).
                asyncio.ensure_future(flood(client, frame(Opcode.PING, b"p" * 125), 100_000))  # noqa: RUF006
                return await client.close_frame(timeout=5)

            task = asyncio.ensure_future(attack())
            await ping_during(bridge_, task)
            assert task.result() == (
                1008,
                f"more than {MAX_CONTROL_FRAMES_PER_S} ping or pong frames in one second",
            )
            pongs = [received for received in client.frames if received.opcode is Opcode.PONG]
            # The protocol answers a ping as it parses it: those in the piece that passed the limit
            # too.
            ping_bytes = len(frame(Opcode.PING, b"p" * 125))
            assert MAX_CONTROL_FRAMES_PER_S < len(pongs) <= legs.FEED_BYTES // ping_bytes + 1
            assert pongs[0].data == b"p" * 125
            await session.wait_closed(timeout=LIVENESS_S)

    run(scenario())


def test_pings_at_sagemakers_pace_are_answered_and_the_stream_goes_on(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)
            for index in range(MAX_CONTROL_FRAMES_PER_S):  # ten in a second: the most allowed
                client.write(frame(Opcode.PING, str(index).encode()))
            client.write(frame(Opcode.TEXT, append().encode()))
            await session.wait_for_event("input_audio_buffer.append")
            await client.read_for(0.2)
            assert [
                received.data for received in client.frames if received.opcode is Opcode.PONG
            ] == [str(index).encode() for index in range(MAX_CONTROL_FRAMES_PER_S)]
            assert bytes(session.audio) == PCM_CHUNK

    run(scenario())


def test_every_frame_and_fragment_counts_against_the_turn_budget(run, monkeypatch):
    frames_at_tick: list[int] = []
    messages_at_tick: list[int] = []
    tick = 0
    real_frame_received = ClientLeg._frame_received
    real_handle = ClientLeg._handle

    def frame_received(self, received):
        frames_at_tick.append(tick)
        real_frame_received(self, received)

    def handle(self, message):
        messages_at_tick.append(tick)
        real_handle(self, message)

    monkeypatch.setattr(ClientLeg, "_frame_received", frame_received)
    monkeypatch.setattr(ClientLeg, "_handle", handle)
    count = 600
    text = b'{"type":"input_audio_buffer.append","audio":"AAA="}'  # 2 PCM16 bytes, in two fragments

    async def scenario():
        nonlocal tick
        async with FakeVllm(record_audio=True) as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)
            frames_at_tick.clear()
            messages_at_tick.clear()
            burst = (
                frame(Opcode.TEXT, text[:20], fin=False) + frame(Opcode.CONT, text[20:])
            ) * count
            client.write(burst)  # 1200 frames in one write
            async with asyncio.timeout(5):
                while len(messages_at_tick) < count:
                    tick += 1  # one turn of the event loop per tick
                    await asyncio.sleep(0)
            await session.wait_for_event("input_audio_buffer.append", count=count)
            assert bytes(session.audio) == b"\x00\x00" * count
            assert await ping_status(bridge_) == 200

    run(scenario())
    per_tick = {t: frames_at_tick.count(t) for t in set(frames_at_tick)}
    _first, *rest = sorted(per_tick)
    # After the first read (parsed in large pieces until the flood is recognised), each turn parses
    # at most the budget plus one small piece of the smallest frames; messages handled per turn stay
    # within the budget.
    assert max(per_tick[t] for t in rest) <= FRAME_BUDGET + SMALL_FEED_BYTES // SMALLEST_FRAME_BYTES
    assert max(messages_at_tick.count(t) for t in set(messages_at_tick)) <= FRAME_BUDGET
    assert len(rest) >= 2 * count // (FRAME_BUDGET + SMALL_FEED_BYTES // SMALLEST_FRAME_BYTES)


# ---- large frames that are not canonical appends -----------------------------------------------


@pytest.mark.parametrize("kind", ["json-object", "append-keys-reordered"])
def test_large_events_other_than_a_canonical_append_are_refused_unparsed(run, monkeypatch, kind):
    parsed_sizes = spy_on_bridge_json(monkeypatch)
    size = 4 * 1024 * 1024 - 64
    if kind == "json-object":
        big = (
            json.dumps({"type": "session.update", "pad": [{"k": "v"}] * ((size - 40) // 12)})[
                : size - 2
            ]
            + "]}"
        )
    else:
        audio = base64.b64encode(bytes((size - 60) // 4 * 3)).decode()
        big = json.dumps({"audio": audio, "type": "input_audio_buffer.append"})

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)
            payload = frame(Opcode.TEXT, big.encode())

            async def attack():
                await push_frames(client, payload, 4)
                await client.read_for(1.0)

            await ping_during(bridge_, attack())
            errors = [e for e in client.events() if e["type"] == "error"]
            assert [e["code"] for e in errors] == ["event_too_large"] * 4
            assert (errors[0]["max_bytes"], errors[0]["bytes"]) == (
                MAX_OTHER_EVENT_BYTES,
                len(big.encode()),
            )
            assert "input_audio_buffer.append" in errors[0]["error"]
            assert (
                max(parsed_sizes) <= MAX_OTHER_EVENT_BYTES
            )  # nothing large went through json.loads
            assert session.event_types() == ["session.update", "input_audio_buffer.commit"]
            assert bridge_.health.healthy  # the bridge's own probe never stalled
            client.write(frame(Opcode.TEXT, append().encode()))  # the stream goes on
            await session.wait_for_event("input_audio_buffer.append")

    run(scenario())


def test_a_4_mib_canonical_append_with_line_breaks_is_accepted_without_a_parser(run, monkeypatch):
    parsed_sizes = spy_on_bridge_json(monkeypatch)
    pcm = bytes(range(256)) * (3 * 1024 * 1024 // 256 - 1024)
    big = json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.encodebytes(pcm).decode()}
    )

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            ws, session = await started_stream(bridge_, vllm)
            await ws.send(big)
            await session.wait_for_event("input_audio_buffer.append", timeout=5)
            assert bytes(session.audio) == pcm
            assert all(size < 1024 for size in parsed_sizes)

    run(scenario())


# ---- held messages are weighed, not counted ----------------------------------------------------


def test_streams_held_by_a_hung_vllm_hold_bytes_not_frames(run):
    streams = 8
    pcm_bytes = 3 * 1024 * 1024 - 96  # a 4 MiB append frame
    big = json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(bytes(pcm_bytes)).decode()},
        separators=(",", ":"),
    ).encode()
    payload = frame(Opcode.TEXT, big)

    async def scenario():
        async with (
            FakeVllm(record_audio=False) as vllm,
            running_bridge(
                vllm.port,
                upstream_stall_s=60,
                audio_rate_limit=10_000,
                audio_burst_s=10_000,
            ) as bridge_,
        ):
            clients = []
            for index in range(streams):
                client, session = await started_raw(bridge_, vllm, index)
                session.hang()  # vLLM stops reading: the bridge's writes to it back up
                clients.append(client)
            pushers = [asyncio.create_task(push_frames(client, payload, 10)) for client in clients]

            async def every_stream_held() -> None:
                # However long a loaded machine takes to fill vLLM's socket (the runner's liveness
                # bound ends a hang); a fixed wait could end before the bridge holds.
                while len(bridge_._streams) < streams or not all(
                    stream.client.hold_reasons & legs.HOLD_UPSTREAM_FULL
                    for stream in bridge_._streams
                ):
                    await asyncio.sleep(0.05)

            try:
                # Held, and the pushers kept pushing for 2 s at least: the bounds below hold while
                # they do.
                await ping_during(bridge_, every_stream_held(), at_least_s=2.0)
                assert len(bridge_._streams) == streams
                for stream in bridge_._streams:
                    client = stream.client
                    assert client.hold_reasons & legs.HOLD_UPSTREAM_FULL
                    # At most HOLD_BYTES of messages, plus the one that completed last, wait in
                    # order ...
                    assert client._held_bytes <= HOLD_BYTES + len(big)
                    # ... the rest is unparsed: at most what two reads bring (asyncio reads 256 KiB
                    # at most) ...
                    assert len(client._unparsed) <= 2 * 256 * 1024
                    # ... and vLLM's socket holds its write buffer, one frame at most past the mark.
                    assert (
                        stream.upstream.transport.get_write_buffer_size()
                        <= legs.WRITE_LIMIT_BYTES + len(big) + 64
                    )
            finally:
                for task in pushers:
                    task.cancel()
                for session in vllm.sessions:
                    session.resume()

    run(scenario())


# ---- the hand-written parts of the HTTP layer --------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["²", "1" * 5000, "-1", "+5", "1e3", "0x10", "12, 13", "", "٣"],
    ids=[
        "superscript-two",
        "5000-digits",
        "negative",
        "plus",
        "exponent",
        "hex",
        "list",
        "empty",
        "arabic-digit",
    ],
)
def test_a_bad_content_length_gets_400_and_no_traceback(run, value):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            head, body = await http_exchange(
                bridge_,
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: "
                + value.encode()
                + b"\r\n\r\nbody",
            )
            assert head.startswith(b"HTTP/1.1 400 ")
            assert json.loads(body) == {
                "error": "Content-Length must be one value of 1 to 10 ASCII digits",
                "code": "bad_request",
            }
            assert await ping_status(bridge_) == 200

    run(scenario())


def test_two_different_content_lengths_get_400(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            head, body = await http_exchange(
                bridge_,
                b"POST /invocations HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody",
            )
            assert head.startswith(b"HTTP/1.1 400 ") and json.loads(body)["code"] == "bad_request"

    run(scenario())


@pytest.mark.parametrize(
    "after",
    [b"\r\n", b"\r\n\r\n", b"GET /ping HTTP/1.1\r\n\r\n", b"\x00\xff garbage"],
    ids=["crlf", "two-crlf", "pipelined", "garbage"],
)
@pytest.mark.usefixtures(
    "answer_drop_beyond_wait"
)  # the read ends at the bridge's half-close, not its drop
def test_ping_followed_by_anything_is_answered_once(run, after):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            head, body = await http_exchange(
                bridge_, b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" + after, LIVENESS_S
            )
            assert (head + body).count(b"HTTP/1.1 ") == 1
            assert head.startswith(b"HTTP/1.1 200 ")
            assert json.loads(body) == {"status": "healthy"}

    run(scenario())


def test_a_request_head_over_16_kib_gets_431(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            for method in (b"GET", b"POST"):
                head, _ = await http_exchange(
                    bridge_, method + b" /ping HTTP/1.1\r\nX-Pad: " + b"a" * 17_000 + b"\r\n"
                )
                assert head.startswith(b"HTTP/1.1 431 "), head[:40]
            assert await ping_status(bridge_) == 200

    run(scenario())


def test_idle_and_slow_connections_are_dropped_after_the_open_timeout(run, monkeypatch):
    monkeypatch.setattr(legs, "OPEN_TIMEOUT_S", 0.3)

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            idle = await asyncio.open_connection("127.0.0.1", bridge_.port)
            slow = await asyncio.open_connection("127.0.0.1", bridge_.port)

            async def slowloris():
                for byte in b"GET /ping HTTP/1.1\r\nHost: x\r\n":
                    slow[1].write(bytes([byte]))
                    await asyncio.sleep(0.05)

            dripping = asyncio.create_task(slowloris())
            for reader, _ in (idle, slow):
                # Dropped, nothing answered: end of stream, or a reset when the drop meets a byte
                # still in flight.
                with contextlib.suppress(ConnectionResetError):
                    assert await asyncio.wait_for(reader.read(), LIVENESS_S) == b""
            # Dropped before the slow client finished its request line and headers (30 bytes, one
            # per 50 ms): the open timeout, not the client, ended it (an ordering, not a timing: it
            # holds at any machine speed).
            assert not dripping.done()
            dripping.cancel()
            assert not bridge_.legs

    run(scenario())


def test_smuggled_second_request_in_a_post_body_is_never_parsed(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            smuggled = (
                b"GET /invocations-bidirectional-stream HTTP/1.1\r\nHost: x\r\nUpgrade: "
                b"websocket\r\n\r\n"
            )
            head, body = await http_exchange(
                bridge_,
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: "
                b"4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
                3.0,
            )
            assert (head + body).count(b"HTTP/1.1 ") == 1 and head.startswith(b"HTTP/1.1 400 ")
            assert bridge_.active_streams == 0 and not vllm.sessions

    run(scenario())


def test_permessage_deflate_is_never_negotiated(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client = await RawClient.open(
                bridge_,
                extra_headers={
                    "Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits"
                },
            )
            assert "Sec-WebSocket-Extensions" not in client.response.headers
            client.abort()

    run(scenario())


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (bytes([0x81, 0x05]) + b"hello", 1002),  # an unmasked client frame
        (bytes([0x83, 0x80]) + b"\x00\x00\x00\x00", 1002),  # a reserved opcode
        (bytes([0xC1, 0x80]) + b"\x00\x00\x00\x00", 1002),  # RSV1 without an extension
        (frame(Opcode.CONT, b"x"), 1002),  # a continuation with no message started
        (bytes([0x89, 0xFE, 0x00, 0x7E]) + b"\x00" * 4 + b"p" * 126, 1002),  # a ping over 125 bytes
    ],
    ids=["unmasked", "reserved-opcode", "rsv1", "stray-continuation", "long-ping"],
)
def test_frame_violations_close_with_1002(run, raw, code):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client, session = await started_raw(bridge_, vllm)
            client.write(raw)
            assert (await client.close_frame(timeout=LIVENESS_S))[0] == code
            await session.wait_closed(timeout=LIVENESS_S)
            assert await ping_status(bridge_) == 200

    run(scenario())


# ---- the audio rate limit ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "append_pcm", [PCM_CHUNK, b"\x00\x00"], ids=["128-ms-appends", "2-byte-appends"]
)
def test_a_stream_sending_faster_than_the_rate_limit_is_ended_with_rate_limited(run, append_pcm):
    async def scenario():
        async with (
            FakeVllm(record_audio=False) as vllm,
            running_bridge(
                vllm.port,
                audio_rate_limit=8,
                audio_burst_s=2,
            ) as bridge_,
        ):
            client, session = await started_raw(bridge_, vllm)
            one = frame(Opcode.TEXT, append(append_pcm).encode())

            async def attack():
                # Unthrottled; RUF006: the flood ends when the transport closes (its sleep timer
                # holds it till then).
                asyncio.ensure_future(flood(client, one, 20_000))  # noqa: RUF006
                return await client.close_frame(timeout=5)

            task = asyncio.ensure_future(attack())
            await ping_during(bridge_, task)
            assert task.result() == (1008, "rate_limited")
            (error,) = [e for e in client.events() if e["type"] == "error"]
            assert (error["code"], error["limit_x"], error["burst_s"]) == ("rate_limited", 8, 2)
            assert "8 x real time" in error["error"]
            # The burst and the rate got through, no more: 2 s of credit, each event at least 10 ms.
            cost_s = max(len(append_pcm) / 32000, 0.01)
            assert (
                session.event_types().count("input_audio_buffer.append") <= (2 + 8 * 1.0) / cost_s
            )

    run(scenario())


def test_a_stream_paced_below_the_rate_limit_is_never_limited(run):
    async def scenario():
        async with (
            FakeVllm() as vllm,
            running_bridge(vllm.port, audio_rate_limit=4, audio_burst_s=1) as bridge_,
        ):
            ws, session = await started_stream(bridge_, vllm)
            for _ in range(40):  # 5.1 s of audio in ~1.7 s: 3 x real time
                await ws.send(append())
                await asyncio.sleep(0.128 / 3)
            await session.wait_for_event("input_audio_buffer.append", count=40)
            assert not [e for e in session.sent if e["type"] == "error"]
            assert bridge_.active_streams == 1

    run(scenario())


# ---- ModelInvocationPath -----------------------------------------------------------------------


def test_the_v1_realtime_path_is_the_same_stream(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client = await RawClient.open(bridge_, path="/v1/realtime?language=en")
            client.write(
                frame(Opcode.TEXT, event("session.update", model="x").encode())
                + frame(Opcode.TEXT, append().encode())
            )
            session = await vllm.wait_for_session()
            await session.wait_for_event("input_audio_buffer.append")
            assert session.model == vllm.model and bytes(session.audio) == PCM_CHUNK
            await client.read_for(0.1)
            assert client.events()[0]["type"] == "session.created"

    run(scenario())


@pytest.mark.usefixtures(
    "answer_drop_beyond_wait"
)  # the read ends at the bridge's half-close, not its drop
def test_any_other_websocket_path_gets_404_naming_the_paths_to_use(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            with pytest.raises(AssertionError) as refused:
                await RawClient.open(bridge_, path="/v1/audio/speech/stream")
            assert "404" in str(refused.value)
            head, body = await http_exchange(
                bridge_,
                b"GET /v1/listen HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: "
                b"Upgrade\r\nSec-WebSocket-Key: "
                b"dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                LIVENESS_S,
            )
            assert head.startswith(b"HTTP/1.1 404 ")
            answer = json.loads(body)
            assert answer["code"] == "unknown_path"
            assert (
                "/invocations-bidirectional-stream" in answer["error"]
                and "v1/realtime" in answer["error"]
            )
            assert "ModelInvocationPath" in answer["error"]
            assert not vllm.sessions

    run(scenario())


@pytest.mark.usefixtures("open_timeout_beyond_wait")  # only the client's close can free the stream
def test_a_client_closing_while_vllm_accepts_completes_the_closing_handshake(run):
    """Close frames are handled while the bridge holds the client's messages for vLLM."""

    async def scenario():
        async with handshake_never_answered() as (port, _), running_bridge(port) as bridge_:
            client = await RawClient.open(bridge_)
            client.write(frame(Opcode.TEXT, append().encode()) + frame(Opcode.CLOSE, b"\x03\xe8"))
            assert (await client.close_frame(timeout=LIVENESS_S))[
                0
            ] == 1000  # the client's close answered, not 1011
            async with asyncio.timeout(LIVENESS_S):
                while bridge_.active_streams:
                    await asyncio.sleep(0.02)
            assert bridge_.metrics.upstream_errors == 0  # the connect cancelled, not failed

    run(scenario())


def test_a_stall_of_the_bridges_own_event_loop_is_not_blamed_on_vllm_or_the_client(run):
    """When the bridge's event loop is held up (here: a blocking 1.5 s inside it), vLLM's and the
    client's data sit unread in the sockets; neither may be taken for silent."""

    async def scenario():
        async with (
            FakeVllm() as vllm,
            running_bridge(vllm.port, upstream_stall_s=0.4, idle_timeout_s=0.8) as bridge_,
        ):
            ws, session = await started_stream(bridge_, vllm)
            await ws.send(append())
            await session.wait_for_event("input_audio_buffer.append")
            await asyncio.sleep(0.15)
            time.sleep(1.5)  # noqa: ASYNC251 (the event loop stalls on purpose: longer than both limits)
            await asyncio.sleep(0.3)  # the sweep runs (late) before the client sends again
            await ws.send(append())
            await session.wait_for_event("input_audio_buffer.append", count=2)
            await session.send_delta("still here")
            assert await recv_event(ws) == {"type": "transcription.delta", "delta": "still here"}
            assert bridge_.metrics.upstream_errors == 0 and bridge_.active_streams == 1
            assert bridge_.health.healthy

    run(scenario())
