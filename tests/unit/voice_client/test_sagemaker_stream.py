"""voice_client.sagemaker_stream: the SageMaker transport through the real SDK with smithy's
MockHTTPClient (no network), its credentials and its errors."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from tests.unit.voice_client.realtime.realtime_testkit import LOUD, chunks_of
from voice_client.realtime import RealtimeError, transcribe_stream

# ---- the SageMaker transport through the real SDK -----------------------------------------------


class StaticCredentialsSession:
    """Stands in for a botocore Session: returns fixed credentials."""

    def get_credentials(self):
        from botocore.credentials import Credentials

        return Credentials(
            "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "session-token"
        )


def response_part(text: str, completion_state: str = "COMPLETE") -> bytes:
    from tests.unit.voice_client.clients_testkit import event_stream_message

    return event_stream_message(
        {
            ":message-type": "event",
            ":event-type": "PayloadPart",
            ":content-type": "application/octet-stream",
            "DataType": "UTF8",
            "CompletionState": completion_state,
        },
        text.encode(),
    )


def exception_event(name: str, body: dict) -> bytes:
    from tests.unit.voice_client.clients_testkit import event_stream_message

    return event_stream_message(
        {
            ":message-type": "exception",
            ":exception-type": name,
            ":content-type": "application/json",
        },
        json.dumps(body).encode(),
    )


async def open_mock_stream(response_body: bytes, status: int = 200, headers=None):
    from smithy_http.testing import MockHTTPClient

    from voice_client.sagemaker_client import BotocoreCredentialsResolver, create_client
    from voice_client.sagemaker_stream import SageMakerStreamTransport

    mock = MockHTTPClient()
    mock.add_response(
        status, headers or [("content-type", "application/vnd.amazon.eventstream")], response_body
    )
    client = await create_client(
        "eu-west-1", BotocoreCredentialsResolver(StaticCredentialsSession()), http_transport=mock
    )
    transport = await SageMakerStreamTransport.open(
        client, "voxtral-ep", target_variant="AllTraffic"
    )
    request = mock.captured_requests[0]
    sent = bytearray()

    async def drain():
        async for piece in request.body:
            sent.extend(piece)

    return transport, request, sent, asyncio.create_task(drain())


def decode_sent_events(raw: bytes) -> list:
    """Unwrap the signed envelopes of the request stream into (headers, payload) of the inner
    messages."""
    from smithy_aws_event_stream.events import Event

    source, inner = io.BytesIO(raw), []
    while (envelope := Event.decode(source)) is not None:
        if envelope.message.payload:
            message = Event.decode(io.BytesIO(envelope.message.payload)).message
            inner.append((message.headers, message.payload, envelope.message.headers))
    return inner


def test_sagemaker_request_is_signed_for_sagemaker_on_port_8443_and_payloads_are_utf8():
    async def scenario():
        transport, request, sent, drain = await open_mock_stream(
            response_part('{"type":"session.created"}')
        )
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
        "POST",
        "https",
        "runtime.sagemaker.eu-west-1.amazonaws.com",
        8443,
    )
    assert destination.path == "/endpoints/voxtral-ep/invocations-bidirectional-stream"
    fields = {field.name.lower(): field.values for field in request.fields.entries.values()}
    assert fields["x-amzn-sagemaker-target-variant"] == ["AllTraffic"]
    assert fields["x-amz-content-sha256"] == ["STREAMING-AWS4-HMAC-SHA256-EVENTS"]
    assert fields["x-amz-security-token"] == ["session-token"]
    assert fields["authorization"][0].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/sagemaker/aws4_request" in fields["authorization"][0]
    events = decode_sent_events(sent)
    assert [payload for _, payload, _ in events] == [
        b'{"type":"session.update","model":"m"}',
        b'{"type":"input_audio_buffer.commit"}',
    ]
    assert all(
        headers["DataType"] == "UTF8" and headers[":event-type"] == "PayloadPart"
        for headers, _, _ in events
    )
    assert all(":chunk-signature" in envelope for _, _, envelope in events)  # each event is signed
    assert (received, end) == ('{"type":"session.created"}', None)


def test_sagemaker_partial_payload_parts_are_joined_into_one_frame():
    async def scenario():
        body = response_part('{"type":"transcription.', "PARTIAL") + response_part(
            'delta","delta":"hé"}'
        )
        transport, *_, drain = await open_mock_stream(body)
        try:
            return await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    assert asyncio.run(scenario()) == '{"type":"transcription.delta","delta":"hé"}'


def test_sagemaker_partial_parts_past_the_event_cap_are_refused_before_the_frame_is_whole():
    """A server that never ends its PARTIAL parts cannot grow the joined frame past
    MAX_EVENT_BYTES."""
    from voice_client.realtime import MAX_EVENT_BYTES

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

    with pytest.raises(
        RealtimeError, match=r"more than 1,048,576 bytes in PARTIAL parts"
    ) as raised:
        asyncio.run(scenario())
    assert raised.value.code == "message_too_large"


@pytest.mark.parametrize(
    ("event", "pattern", "code"),
    [
        (
            exception_event(
                "ModelStreamError", {"Message": "socket closed", "ErrorCode": "ModelStreamError"}
            ),
            r"ModelStreamError from endpoint 'voxtral-ep' \(ModelStreamError\): socket "
            r"closed.*CloudWatch",
            "ModelStreamError",
        ),
        (
            exception_event("InternalStreamFailure", {"Message": "lost"}),
            r"InternalStreamFailure on endpoint 'voxtral-ep': lost\. SageMaker lost the stream; "
            r"retry",
            "InternalStreamFailure",
        ),
    ],
)
def test_sagemaker_stream_errors_become_realtime_errors(event, pattern, code):
    async def scenario():
        transport, *_, drain = await open_mock_stream(
            response_part('{"type":"session.created"}') + event
        )
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
        body = json.dumps(
            {
                "Message": "Received server error",
                "OriginalStatusCode": 500,
                "OriginalMessage": "handshake refused",
                "ErrorCode": "ModelError",
            }
        ).encode()
        transport, *_, drain = await open_mock_stream(
            body,
            status=424,
            headers=[("content-type", "application/json"), ("x-amzn-errortype", "ModelError")],
        )
        try:
            await transport.receive_text()
        finally:
            await transport.close()
            drain.cancel()

    with pytest.raises(
        RealtimeError,
        match=r"ModelError from endpoint 'voxtral-ep' \(container status 500\): "
        r"handshake refused",
    ):
        asyncio.run(scenario())


def test_a_full_transcription_through_the_sagemaker_transport():
    """The session logic over the SDK: the response is canned, the request stream is checked event
    by event."""
    from smithy_http.testing import MockHTTPClient

    from voice_client.sagemaker_client import BotocoreCredentialsResolver, create_client
    from voice_client.sagemaker_stream import SageMakerStreamTransport

    async def scenario():
        mock = MockHTTPClient()
        mock.add_response(
            200,
            [("content-type", "application/vnd.amazon.eventstream")],
            response_part('{"type":"session.created"}')
            + response_part('{"type":"transcription.delta","delta":"Hello"}')
            + response_part('{"type":"transcription.done","text":"Hello","usage":{}}'),
        )
        client = await create_client(
            "us-east-1",
            BotocoreCredentialsResolver(StaticCredentialsSession()),
            http_transport=mock,
        )
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
    assert types == [
        "session.update",
        "input_audio_buffer.commit",
        "input_audio_buffer.append",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
    ]


# ---- every wait on a failed stream is bounded --------------------------------------------------


class EndThatSwallowsTheCancellation:
    """A request stream whose close behaves as smithy-aws-event-stream's ``AWSEventPublisher.close``
    does on a connection a peer stopped reading: the end frame's write never completes, and when it
    is cancelled its ``finally`` awaits the writer's close, which never completes either."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def close(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            await asyncio.Event().wait()


def test_bounded_gives_up_on_an_operation_that_swallows_its_cancellation():
    """asyncio.wait_for (Python 3.12+) cancels the caller's own task once and then waits for the
    operation: this one would keep it waiting forever. The outer wait_for only keeps a regression
    from hanging the suite."""
    from voice_client.sagemaker_stream import _bounded

    end = EndThatSwallowsTheCancellation()

    async def scenario():
        with pytest.raises(TimeoutError):
            await _bounded(end.close(), 0.05)
        return end.cancelled

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == 1


def test_bounded_returns_the_result_or_raises_the_error_of_an_operation_that_ends_in_time():
    from voice_client.sagemaker_stream import _bounded

    async def answer():
        return 42

    async def fail():
        raise OSError("reset by peer")

    async def scenario():
        assert await _bounded(answer(), 5) == 42
        with pytest.raises(OSError, match="reset by peer"):
            await _bounded(fail(), 5)

    asyncio.run(scenario())


def test_closing_a_failed_stream_whose_end_never_completes_returns_and_retires_its_connection():
    """The hang `tests/e2e/local/test_local_streams.py`'s wedge test met about one run in two: a
    refused stream, never reset by its peer, whose request end could not be written."""
    from voice_client import sagemaker_stream
    from voice_client.sagemaker_stream import SageMakerStreamTransport

    class Stream:
        input_stream = EndThatSwallowsTheCancellation()

    class Connection:
        closed = False

        async def close(self):
            Connection.closed = True

    connection = Connection()
    client = type("Client", (), {})()
    transport = SageMakerStreamTransport(
        stream=Stream(), endpoint_name="voxtral", client=client, connection=connection
    )
    sagemaker_stream.OPEN_STREAMS[id(client)] = 1
    sagemaker_stream.RETIRED_CONNECTIONS[id(client)] = [
        connection
    ]  # as _retire leaves it (no pool to take it from)
    transport._failed = True
    asyncio.run(asyncio.wait_for(transport.close(), 30))
    assert Stream.input_stream.cancelled == 1
    assert Connection.closed and id(client) not in sagemaker_stream.OPEN_STREAMS


def test_bounded_holds_an_operation_it_left_behind_until_it_ends():
    """The event loop holds tasks weakly: an abandoned operation waiting on a future only it holds
    would be collected mid-run ("Task was destroyed but it is pending!") without the reference
    _bounded keeps."""
    import gc
    import weakref

    from voice_client.sagemaker_stream import _OPERATIONS, _bounded

    tasks: list[weakref.ref] = []
    release: list[asyncio.Future] = []

    async def stubborn():
        tasks.append(weakref.ref(asyncio.current_task()))
        for _ in range(3):  # takes two cancellations and waits again; ends on its own afterwards
            future = asyncio.get_running_loop().create_future()
            release[:] = [weakref.ref(future)]
            try:
                await future
                return "ended"
            except asyncio.CancelledError:
                pass
        return "never"

    async def scenario():
        with pytest.raises(TimeoutError):
            await _bounded(stubborn(), 0.05)
        gc.collect()
        task = tasks[0]()
        assert task is not None and not task.done() and task in _OPERATIONS
        release[0]().set_result(None)
        assert await task == "ended"
        assert task not in _OPERATIONS

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_bounded_returns_what_an_operation_made_after_taking_its_cancellation():
    """An operation that takes the cancellation at its deadline and still ends with a result (an
    open stream, say) returns it, late: raising TimeoutError would leave it unclosed."""
    from voice_client.sagemaker_stream import _bounded

    async def opens_anyway():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "stream"

    async def scenario():
        return await _bounded(opens_anyway(), 0.05)

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == "stream"
