"""voice_client/realtime/websocket.py: the plain-WebSocket transport against a websockets server
on loopback: text both ways, the bearer token on the upgrade, and each way a connection fails named
with what to check."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest
from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

from voice_client.realtime.auth import BearerToken
from voice_client.realtime.protocol import RealtimeError
from voice_client.realtime.websocket import WebSocketTransport

PATH = "/invocations-bidirectional-stream"


@asynccontextmanager
async def server(handler, token: str | None = None):
    """A websockets server on 127.0.0.1; with ``token`` it answers 401 to an upgrade without that
    bearer token. Yields its URL and the Authorization headers it saw."""
    seen: list[str | None] = []

    def check(connection, request):
        seen.append(request.headers.get("Authorization"))
        if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
            return Response(401, "Unauthorized", Headers(), b"")
        return None

    async with serve(handler, "127.0.0.1", 0, process_request=check) as running:
        port = running.sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}{PATH}", seen


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_text_goes_both_ways_and_a_clean_close_ends_the_stream():
    async def echo_then_close(connection):
        await connection.send(await connection.recv())
        await connection.send("é".encode())  # a binary frame of UTF-8 text
        await connection.close()

    async def scenario():
        async with server(echo_then_close) as (url, seen):
            transport = await WebSocketTransport.connect(url)
            await transport.send_text('{"type": "session.update"}')
            received = [
                await transport.receive_text(),
                await transport.receive_text(),
                await transport.receive_text(),
            ]
            await transport.close()
            return received, seen

    received, seen = run(scenario())
    assert received == ['{"type": "session.update"}', "é", None]
    assert seen == [None]  # no token, no Authorization header


def test_the_token_goes_on_the_upgrade_and_a_refusal_names_where_it_came_from():
    async def idle(connection):
        await connection.wait_closed()

    async def scenario():
        async with server(idle, token="right") as (url, seen):
            transport = await WebSocketTransport.connect(
                url, token=BearerToken("right", source="variable T")
            )
            await transport.close()
            with pytest.raises(RealtimeError) as refused:
                await WebSocketTransport.connect(
                    url, token=BearerToken("wrong", source="variable T")
                )
            with pytest.raises(RealtimeError) as missing:
                await WebSocketTransport.connect(url)
            return url, seen, refused.value, missing.value

    url, seen, refused, missing = run(scenario())
    assert seen == ["Bearer right", "Bearer wrong", None]
    assert (
        refused.code == "unauthorized"
        and f"the bridge at {url} refused the bearer token from variable T" in str(refused)
    )
    assert missing.code == "unauthorized" and "requires a bearer token" in str(missing)


def test_a_bad_url_and_a_closed_port_say_what_to_check():
    async def scenario():
        with pytest.raises(RealtimeError) as bad:
            await WebSocketTransport.connect("http://127.0.0.1:1/x")
        async with server(lambda connection: connection.wait_closed()) as (url, _):
            pass  # the server is gone: its port refuses connections now
        with pytest.raises(RealtimeError) as closed:
            await WebSocketTransport.connect(url)
        return bad.value, closed.value, url

    bad, closed, url = run(scenario())
    assert bad.code == "bad_url" and str(bad) == (
        "'http://127.0.0.1:1/x' is not a WebSocket URL; use "
        "ws://HOST:PORT/invocations-bidirectional-stream"
    )
    port = url.split(":")[2].split("/")[0]
    assert closed.code == "connect_failed" and str(closed).startswith(
        f"cannot open a WebSocket to {url} ("
    )
    assert str(closed).endswith(f"`curl http://127.0.0.1:{port}/ping` must answer 200")


def test_a_message_over_the_limit_is_refused_before_it_is_buffered_whole():
    async def flood(connection):
        await connection.send("x" * (WebSocketTransport.MAX_MESSAGE_BYTES + 1))
        await connection.wait_closed()

    async def scenario():
        async with server(flood) as (url, _):
            transport = await WebSocketTransport.connect(url)
            with pytest.raises(RealtimeError) as caught:
                await transport.receive_text()
            await transport.close()
            return caught.value

    error = run(scenario())
    assert (
        error.code == "message_too_large"
        and "larger than the 1,048,576 bytes the client accepts" in str(error)
    )
