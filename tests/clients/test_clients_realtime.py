"""The realtime session logic (event order, pacing, rollover, reopen after a drop, errors) over an in-memory
server, and the SageMaker transport through the real SDK with smithy's MockHTTPClient (no network)."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
import pytest

from voicectl.audio import CHUNK_BYTES
from voicectl.realtime import (
    RealtimeError,
    join_transcripts,
    paced_chunks,
    transcribe_stream,
)

LOUD = (np.full(CHUNK_BYTES // 2, 8000, dtype="<i2")).tobytes()  # RMS 0.24: never a quiet seam
QUIET = bytes(CHUNK_BYTES)


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
    assert (result.sessions, result.reopens) == (1, 0)
    assert result.time_to_first_delta_s is not None and result.time_to_first_delta_s >= 0
    assert session.closed


def test_session_limit_starts_a_new_session_and_joins_transcripts(memory_server):
    chunks = pcm_with_index(7)
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=0.4))
    # 0.4 s holds three 128 ms chunks: sessions of 3, 3 and 1 chunks, every one ended with a final commit.
    assert [len(s.audio) // CHUNK_BYTES for s in memory_server.sessions] == [3, 3, 1]
    assert all(s.types()[-1] == "input_audio_buffer.commit" and s.events[-1]["final"] for s in memory_server.sessions)
    assert b"".join(bytes(s.audio) for s in memory_server.sessions) == b"".join(chunks)
    assert result.transcript == "w1.0 w1.1 w1.2 w2.0 w2.1 w2.2 w3.0 "
    assert result.sessions == 3


def test_rollover_prefers_a_quiet_chunk_near_the_limit(memory_server):
    chunks = [LOUD] * 8 + [QUIET] + [LOUD] * 3
    asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open, session_limit_s=1.28))
    # The limit fits 10 chunks; the window (20 % of it) starts at chunk 8, so the quiet chunk 9 opens session 2.
    assert [len(s.audio) // CHUNK_BYTES for s in memory_server.sessions] == [8, 4]
    assert bytes(memory_server.sessions[1].audio).startswith(QUIET)


def test_a_dropped_stream_is_reopened_once_and_the_unsent_audio_resent(memory_server):
    chunks = pcm_with_index(6)
    memory_server.drop_at = (1, 2)  # session 1 drops when its third append is sent
    result = asyncio.run(transcribe_stream(chunks_of(*chunks), memory_server.open))
    first, second = memory_server.sessions
    assert bytes(first.audio) == b"".join(chunks[:2])
    assert bytes(second.audio) == b"".join(chunks[2:])
    assert second.types()[:2] == ["session.update", "input_audio_buffer.commit"]
    assert result.transcript == "w1.0 w1.1 w2.0 w2.1 w2.2 w2.3 "
    assert (result.sessions, result.reopens) == (2, 1)
    assert result.audio_seconds_sent == pytest.approx(6 * 0.128)


def test_a_second_drop_ends_with_an_error(memory_server):
    memory_server.drop_at = (1, 1)

    async def scenario():
        async def chunks():
            for index, chunk in enumerate(pcm_with_index(5)):
                if index == 3:
                    memory_server.drop_at = (2, 2)  # chunk 3 is the third append of session 2
                yield chunk
        await transcribe_stream(chunks(), memory_server.open)

    with pytest.raises(RealtimeError, match="dropped again after a reopen") as raised:
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


def test_pacing_follows_an_absolute_schedule():
    now = [0.0]
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds + 0.01  # every sleep overshoots by 10 ms

    async def collect(speed: float):
        return [c async for c in paced_chunks(bytes(CHUNK_BYTES * 4), speed, clock=lambda: now[0], sleep=fake_sleep)]

    assert len(asyncio.run(collect(2.0))) == 4
    # Chunk n is due at n x 0.128 / 2 s after the first; overshoot is absorbed, not accumulated.
    assert sleeps == pytest.approx([0.064, 0.054, 0.054])
    sleeps.clear()
    asyncio.run(collect(0))
    assert sleeps == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="speed must be 0"):
        asyncio.run(collect(-1))


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

    from voicectl.sagemaker_stream import BotocoreCredentialsResolver, SageMakerStreamTransport, create_client

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

    from voicectl.sagemaker_stream import BotocoreCredentialsResolver, SageMakerStreamTransport, create_client

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

    from voicectl.sagemaker_stream import BotocoreCredentialsResolver

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

    with pytest.raises(SmithyIdentityError, match="no AWS credentials found"):
        asyncio.run(BotocoreCredentialsResolver(Empty()).get_identity(properties={}))
