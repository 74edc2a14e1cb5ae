"""The Bedrock ConverseStream stand-in: boto3's own client parses its event stream, and every event
it sends matches botocore's ``bedrock-runtime`` service model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer

from voice_devtools.local.fake_bedrock import REPLY, FakeBedrock, encode_message, event, reply_words


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    fake = FakeBedrock(first_token_s=0.0, token_interval_s=0.0)
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(10)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def client(url: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIALOCAL",
        aws_secret_access_key="local",
        config=Config(retries={"max_attempts": 1}),
    )


REQUEST = {
    "modelId": "amazon.nova-lite-v1:0",
    "messages": [{"role": "user", "content": [{"text": "What time is it?"}]}],
    "system": [{"text": "Be brief."}],
}


def test_boto3_parses_the_stream_unmodified(bedrock: FakeBedrock) -> None:
    response = client(bedrock.url).converse_stream(**REQUEST)
    events = list(response["stream"])
    kinds = [next(iter(item)) for item in events]
    assert kinds[0] == "messageStart" and events[0]["messageStart"] == {"role": "assistant"}
    assert kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    text = "".join(
        item["contentBlockDelta"]["delta"]["text"] for item in events if "contentBlockDelta" in item
    )
    assert text == "You said: What time is it. " + REPLY
    assert events[-2]["messageStop"] == {"stopReason": "end_turn"}
    usage = events[-1]["metadata"]["usage"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert bedrock.calls[0].model_id == "amazon.nova-lite-v1:0"
    assert bedrock.calls[0].request["system"] == [{"text": "Be brief."}]
    assert bedrock.calls[0].client_closed is False


def _check(shape: Any, value: Any, path: str) -> None:
    """``value`` fits botocore's ``shape``: known members, required ones present, scalar types."""
    if shape.type_name == "structure":
        assert isinstance(value, dict), path
        assert set(value) <= set(shape.members), (path, set(value) - set(shape.members))
        assert set(shape.required_members) <= set(value), (path, shape.required_members)
        for name, member in value.items():
            _check(shape.members[name], member, f"{path}.{name}")
    elif shape.type_name == "string":
        assert isinstance(value, str), path
        if shape.enum:
            assert value in shape.enum, (path, value)
    elif shape.type_name in ("integer", "long"):
        assert isinstance(value, int), path
    else:
        raise AssertionError(f"{path}: shape type {shape.type_name} not expected")


def test_every_event_fits_the_service_model() -> None:
    import json

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    operation = model.operation_model("ConverseStream")
    assert operation.http["requestUri"] == "/model/{modelId}/converse-stream"
    stream = operation.output_shape.members["stream"]
    buffer = EventStreamBuffer()
    request = {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}
    for kind, body in (
        ("messageStart", {"role": "assistant"}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "end_turn"}),
        (
            "metadata",
            {
                "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4},
                "metrics": {"latencyMs": 12},
            },
        ),
    ):
        buffer.add_data(event(kind, body))
        (message,) = list(buffer)
        assert message.headers == {
            ":event-type": kind,
            ":content-type": "application/json",
            ":message-type": "event",
        }
        _check(stream.members[kind], json.loads(message.payload), kind)
    assert reply_words(request)[:2] == ["You", "said:"]


def test_encoding_matches_botocores_fixture() -> None:
    # botocore's tests/unit/test_eventstream.py, EMPTY_MESSAGE: total 16, no headers, no payload.
    assert encode_message({}, b"") == b"\x00\x00\x00\x10\x00\x00\x00\x00\x05\xc2H\xeb}\x98\xc8\xff"
    buffer = EventStreamBuffer()
    buffer.add_data(encode_message({"a": "b"}, b"{}"))
    (message,) = list(buffer)
    assert (message.headers, message.payload) == ({"a": "b"}, b"{}")


def test_closing_the_stream_is_seen(bedrock: FakeBedrock) -> None:
    bedrock.token_interval_s = 0.05
    response = client(bedrock.url).converse_stream(**REQUEST)
    stream = response["stream"]
    for item in stream:
        if "contentBlockDelta" in item:
            break
    stream.close()
    deadline = time.monotonic() + 5
    while not bedrock.calls[0].client_closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert bedrock.calls[0].client_closed is True
    assert len(bedrock.calls[0].text) < len(REPLY)


def test_malformed_body_is_a_validation_exception(bedrock: FakeBedrock) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{bedrock.url}/model/m/converse-stream", data=b"[1]", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 400
    assert caught.value.headers["x-amzn-errortype"] == "ValidationException"
