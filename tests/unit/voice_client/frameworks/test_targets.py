"""VoxtralTarget and SonicTarget: exactly one kind of Voxtral target, checked URLs, and the
WebSocket opener."""

from __future__ import annotations

import asyncio

import pytest

from voice_client.frameworks.targets import SonicTarget, VoxtralTarget
from voice_client.realtime.auth import BearerToken


@pytest.mark.parametrize("kwargs", [{}, {"endpoint_name": "voxtral", "url": "wss://example.com/x"}])
def test_a_voxtral_target_is_an_endpoint_or_a_url(kwargs):
    with pytest.raises(ValueError, match="exactly one of them"):
        VoxtralTarget(**kwargs)


def test_a_url_must_be_a_websocket_url():
    with pytest.raises(ValueError, match=r"'https://example.com' is not a WebSocket URL"):
        VoxtralTarget(url="https://example.com")


def test_the_token_is_never_shown():
    target = VoxtralTarget(url="wss://example.com/x", token=BearerToken("s3cret", "a test"))
    assert "s3cret" not in repr(target) and target.name == "wss://example.com/x"


def test_an_empty_sonic_endpoint_name_is_refused():
    with pytest.raises(ValueError, match="SonicEndpointName"):
        SonicTarget(" ")


def test_the_url_opener_sends_the_bearer_token():
    from websockets.asyncio.server import serve

    seen = []

    async def handler(connection):
        seen.append(connection.request.headers.get("Authorization"))
        await connection.send('{"type": "session.created"}')

    async def run():
        async with serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            target = VoxtralTarget(
                url=f"ws://127.0.0.1:{port}/invocations-bidirectional-stream",
                token=BearerToken("s3cret", "a test"),
            )
            async with target.opener() as opener:
                transport = await opener()
                first = await transport.receive_text()
                await transport.close()
        return first

    assert asyncio.run(run()) == '{"type": "session.created"}'
    assert seen == ["Bearer s3cret"]
