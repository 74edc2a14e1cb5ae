"""Frames and peers that tried to break the bridge (a review's findings), each over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket

import pytest
from websockets.asyncio.client import connect
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

import bridge.protocol
from bridge.health import MAX_RESPONSE_BYTES, http_get
from bridge.server import STREAM_PATH
from tests.bridge.bridge_testkit import (
    PCM_CHUNK,
    append,
    closed_within,
    handshake_never_answered,
    open_stream,
    recv_event,
    running_bridge,
    started_stream,
)
from voicectl.local.fake_vllm import FakeVllm

ONE_SECOND = 1.0


@pytest.mark.parametrize(
    "frame",
    ["[" * 100_000, '{"type": "session.update", "n": ' + "1" * 5000 + "}"],
    ids=["deep-nesting", "5000-digit-integer"],
)
def test_json_python_cannot_parse_gets_an_error_event_and_the_stream_stays_open(run, frame):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            ws, session = await started_stream(bridge, vllm)
            await ws.send(frame)
            error = await recv_event(ws)
            assert error["type"] == "error"
            assert error["code"] == "processing_error"  # what vLLM answers for the same frame
            await ws.send(append())  # the stream goes on
            await session.wait_for_event("input_audio_buffer.append")
            assert bytes(session.audio) == PCM_CHUNK
            assert session.event_types() == ["session.update", "input_audio_buffer.commit", "input_audio_buffer.append"]

    run(scenario())


def test_an_unexpected_exception_ends_only_that_stream_with_1011(run, monkeypatch, caplog):
    real_check = bridge.protocol.check_client_frame

    def check(frame: bytes, served_model: str | None):
        if b"boom" in frame:
            raise RuntimeError("boom")
        return real_check(frame, served_model)

    monkeypatch.setattr(bridge.protocol, "check_client_frame", check)

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            broken, broken_session = await started_stream(bridge_, vllm, 0)
            other, other_session = await started_stream(bridge_, vllm, 1)
            await broken.send(json.dumps({"type": "boom"}))
            error = await recv_event(broken)
            assert error["code"] == "processing_error"
            assert "RuntimeError" in error["error"]
            assert await closed_within(broken, ONE_SECOND) == (1011, "processing_error")
            await broken_session.wait_closed(timeout=ONE_SECOND)
            await other.send(append())  # the other stream is untouched
            await other_session.wait_for_event("input_audio_buffer.append")
            await other_session.send_delta("ok")
            assert await recv_event(other) == {"type": "transcription.delta", "delta": "ok"}
            assert bridge_.active_streams == 1

    run(scenario())
    warnings = [r for r in caplog.records if r.name == "bridge" and r.levelname == "WARNING"]
    assert any("RuntimeError" in r.getMessage() for r in warnings)


# Frames the bridge answers in vLLM's place: the code must be the one vLLM itself gives (the fake mirrors
# vllm realtime/connection.py), and a frame vLLM accepts must not be rejected.
SAME_AS_VLLM = {
    "json-array": ("[1, 2]", "processing_error"),
    "json-string": ('"hello"', "processing_error"),
    "no-type": ('{"audio": "AAAA"}', "unknown_event"),
    "numeric-type": ('{"type": 7}', "unknown_event"),
    "append-without-audio": ('{"type": "input_audio_buffer.append"}', "processing_error"),
    "append-audio-not-a-string": ('{"type": "input_audio_buffer.append", "audio": 42}', "processing_error"),
    "not-json": ("{nope", "invalid_json"),
    "odd-bytes": ('{"type": "input_audio_buffer.append", "audio": "AAAA"}'.replace("AAAA", "AQID"), "invalid_audio"),
    "mime-line-breaks": (json.dumps({"type": "input_audio_buffer.append",
                                     "audio": base64.encodebytes(PCM_CHUNK).decode()}), None),
}


@pytest.mark.parametrize("case", SAME_AS_VLLM, ids=list(SAME_AS_VLLM))
def test_bridge_answers_with_the_code_vllm_gives(run, case):
    frame, code = SAME_AS_VLLM[case]

    async def first_error_or_none(ws) -> str | None:
        await ws.send(json.dumps({"type": "input_audio_buffer.commit", "final": True}))  # a marker after the frame
        while True:
            answer = await recv_event(ws)
            if answer["type"] == "error":
                return answer["code"]
            if answer["type"] == "transcription.done":
                return None

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            ws, session = await started_stream(bridge_, vllm, 0)
            await ws.send(frame)
            via_bridge = await first_error_or_none(ws)
            direct = await connect(vllm.url, compression=None)
            await recv_event(direct)  # session.created
            await direct.send(json.dumps({"type": "session.update", "model": vllm.model}))
            await direct.send(json.dumps({"type": "input_audio_buffer.commit"}))
            await direct.send(frame)
            from_vllm = await first_error_or_none(direct)
            await direct.close()
            assert via_bridge == from_vllm == code
            if code is None:  # accepted: vLLM got the same audio
                assert bytes(session.audio) == PCM_CHUNK

    run(scenario())


def test_session_limit_counts_audio_per_generation_not_per_websocket(run):
    # vLLM applies max_model_len per generation: after a final commit it sends transcription.done, clears its
    # audio queue, and the next commit starts a fresh request (vllm realtime/connection.py). Limit here:
    # (74 - 49 tokens of the stream format) x 0.8 = 20 tokens = 1.6 s = 51200 PCM16 bytes, 12 appends of 4096 bytes.
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, max_model_len=74, session_limit_fraction=0.8) as bridge_:
            ws, session = await started_stream(bridge_, vllm)
            for _ in range(10):
                await ws.send(append())
            await ws.send(json.dumps({"type": "input_audio_buffer.commit", "final": True}))
            assert (await recv_event(ws))["type"] == "transcription.done"
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))  # the next utterance
            for _ in range(12):  # 22 appends on this WebSocket, 12 in this generation: within the limit
                await ws.send(append())
            await ws.send(json.dumps({"type": "input_audio_buffer.commit", "final": True}))
            assert (await recv_event(ws))["type"] == "transcription.done"
            assert session.audio_bytes == 22 * len(PCM_CHUNK)
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            for _ in range(13):  # the 13th append of one generation is over the limit
                await ws.send(append())
            error = await recv_event(ws)
            assert error["code"] == "session_limit"
            assert await closed_within(ws, ONE_SECOND) == (1000, "session_limit")
            assert session.audio_bytes == 34 * len(PCM_CHUNK)

    run(scenario())


def test_frames_sent_in_the_same_tcp_write_as_the_upgrade_request_are_relayed(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            client = ClientProtocol(parse_uri(f"ws://127.0.0.1:{bridge_.port}{STREAM_PATH}"))
            client.send_request(client.connect())
            texts = [json.dumps({"type": "session.update", "model": vllm.model}), '{"type": "input_audio_buffer.commit"}',
                     append()]
            frames = b"".join(Frame(Opcode.TEXT, text.encode()).serialize(mask=True) for text in texts)
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge_.port)
            writer.write(b"".join(client.data_to_send()) + frames)  # the request and three frames in one write
            session = await vllm.wait_for_session()
            await session.wait_for_event("input_audio_buffer.append")
            assert session.event_types() == ["session.update", "input_audio_buffer.commit", "input_audio_buffer.append"]
            assert bytes(session.audio) == PCM_CHUNK
            await session.send_delta("early")
            events = []
            async with asyncio.timeout(ONE_SECOND):
                while len(events) < 2:
                    client.receive_data(await reader.read(65536))
                    events += [json.loads(e.data) for e in client.events_received() if isinstance(e, Frame)]
            assert events[0]["type"] == "session.created"
            assert events[1] == {"type": "transcription.delta", "delta": "early"}
            writer.transport.abort()

    run(scenario())


def test_hung_vllm_mid_stream_is_detected_and_the_client_told_upstream_closed_not_idle_timeout(run):
    # vLLM stops (SIGSTOP) while a client streams: the bridge's writes to vLLM back up, so the bridge stops
    # reading the client. The client is not idle; vLLM is stalled, and the client must be told so.
    idle_s, stall_s = 0.5, 1.5

    async def keep_sending(ws) -> None:
        for _ in range(2000):  # bounded; blocks as soon as the bridge stops reading
            await ws.send(append())

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, idle_timeout_s=idle_s, upstream_stall_s=stall_s) as bridge_:
            ws, session = await started_stream(bridge_, vllm)
            (stream,) = bridge_._streams
            stream.upstream.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            session.hang()
            sender = asyncio.create_task(keep_sending(ws))
            try:
                error = await recv_event(ws, timeout=stall_s + 3)
            finally:
                sender.cancel()
            assert error["code"] == "upstream_closed"
            assert f"{stall_s:g} s" in error["error"]
            code, _ = await closed_within(ws, ONE_SECOND + 2)  # the client's side is still sending: close handshake
            assert code == 1011
            assert bridge_.metrics.upstream_errors == 1
            session.resume()  # SIGCONT: the fake sees that the bridge has dropped the connection
            await session.wait_closed(timeout=ONE_SECOND)
            assert bridge_.active_streams == 0

    run(scenario())


def test_quiet_but_alive_vllm_is_not_taken_for_a_hung_one(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, upstream_stall_s=0.4) as bridge_:
            ws, session = await started_stream(bridge_, vllm)
            vllm.silent = True  # answers no events, but its WebSocket layer answers pings
            for _ in range(12):  # 1.2 s, three times the stall limit
                await ws.send(append())
                await asyncio.sleep(0.1)
            await session.wait_for_event("input_audio_buffer.append", count=12)
            assert not session.closed.is_set()
            assert bridge_.metrics.upstream_errors == 0
            vllm.silent = False
            await session.send_delta("alive")
            assert await recv_event(ws) == {"type": "transcription.delta", "delta": "alive"}

    run(scenario())


@pytest.mark.parametrize("how", ["close frame", "tcp drop"])
def test_client_leaving_while_vllm_has_not_accepted_cancels_the_connect_within_1s(run, how):
    # A vLLM that accepts TCP but never answers the WebSocket handshake (UPSTREAM_OPEN_TIMEOUT_S is 5 s).
    async def scenario():
        async with handshake_never_answered() as (port, upstream_gone), running_bridge(port) as bridge_:
            ws = await open_stream(bridge_)
            await asyncio.sleep(0.1)  # the bridge is waiting for vLLM's handshake answer
            assert bridge_.active_streams == 1
            if how == "close frame":
                await ws.close()
            else:
                ws.transport.abort()
            async with asyncio.timeout(ONE_SECOND):
                await upstream_gone.wait()
                while bridge_.active_streams:
                    await asyncio.sleep(0.02)

    run(scenario())


def test_health_probe_reads_at_most_max_response_bytes(run):
    # A misbehaving server behind VLLM_PORT sending an endless answer must not fill the bridge's memory.
    async def scenario():
        async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * (4 * MAX_RESPONSE_BYTES))
            with contextlib.suppress(OSError):
                await writer.drain()
            writer.close()

        server_ = await asyncio.start_server(flood, "127.0.0.1", 0)
        try:
            with pytest.raises(ValueError, match="larger than"):
                await http_get("127.0.0.1", server_.sockets[0].getsockname()[1], "/health", 2.0)
        finally:
            server_.close()

    run(scenario())


def test_post_invocations_body_in_later_reads_is_discarded_not_parsed_as_a_request(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge_:
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge_.port)
            writer.write(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + b"A" * 100)
            await writer.drain()
            await asyncio.sleep(0.05)  # the rest of the body comes in another read
            writer.write(b"B" * 19_900)
            response = await asyncio.wait_for(reader.read(), 2.0)
            writer.close()
            assert response.count(b"HTTP/1.1 ") == 1  # only the bridge's answer, no second (bogus) one
            assert response.startswith(b"HTTP/1.1 400 ")
            assert json.loads(response.partition(b"\r\n\r\n")[2])["code"] == "use_bidirectional_stream"

    run(scenario())
