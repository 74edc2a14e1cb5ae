"""voicectl talk's relay on loopback: the URL check, the page and its guard, an unreachable bot."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

from voice_client.errors import UsageError
from voice_client.talk import RELAY_PATH, TalkRelay, check_url


@pytest.mark.parametrize("url", ["ws://127.0.0.1:8100/", "wss://agent.example.com/"])
def test_a_websocket_url_is_taken_as_given(url):
    assert check_url(url) == url


@pytest.mark.parametrize("url", ["http://127.0.0.1:8100/", "ws:///nohost", "127.0.0.1:8100"])
def test_anything_else_is_refused_naming_what_is_allowed(url):
    with pytest.raises(UsageError) as refused:
        check_url(url)
    assert "ws://HOST:PORT/ or wss://HOST/" in str(refused.value)
    assert repr(url) in str(refused.value)


def raw_get(port: int, path: str, host: str) -> tuple[int, bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


def test_the_page_its_guard_and_the_routes():
    async def scenario():
        lines: list[str] = []
        relay = await TalkRelay("ws://127.0.0.1:9/", port=0, log=lines.append).start()
        try:
            port = relay.port
            page = await asyncio.to_thread(raw_get, port, "/", f"127.0.0.1:{port}")
            foreign = await asyncio.to_thread(raw_get, port, "/", "attacker.example:80")
            unknown = await asyncio.to_thread(raw_get, port, "/upload", f"localhost:{port}")
        finally:
            await relay.stop()
        return page, foreign, unknown, lines

    page, foreign, unknown, lines = asyncio.run(scenario())
    status, head, body = page
    assert status == 200
    assert b"content-type: text/html; charset=utf-8" in head.lower()
    assert b"connect-src 'self'" in head
    assert b"<html" in body.lower()
    assert foreign[0] == 403
    assert unknown[0] == 404
    assert any("'/upload' is not a route of this page" in line for line in lines)


def test_an_unreachable_bot_ends_the_page_with_an_error_and_an_end():
    async def scenario():
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        dead_port = listener.getsockname()[1]
        listener.close()  # nothing listens there now: the connect is refused
        relay = await TalkRelay(f"ws://127.0.0.1:{dead_port}/", port=0, log=lambda _: None).start()
        try:
            url = f"ws://127.0.0.1:{relay.port}{RELAY_PATH}"
            async with connect(url, origin=f"http://127.0.0.1:{relay.port}") as page:
                return [json.loads(message) async for message in page], relay.relayed
        finally:
            await relay.stop()

    events, relayed = asyncio.run(scenario())
    assert [event["type"] for event in events] == ["error", "end"]
    assert events[0]["message"].startswith("could not reach the agent at ws://127.0.0.1:")
    assert events[1]["reason"] == "the agent is unreachable"
    assert relayed == 0


def test_messages_are_copied_both_ways_unchanged():
    async def scenario():
        async def bot(ws):
            async for message in ws:
                await ws.send(
                    message
                    if isinstance(message, bytes)
                    else json.dumps({"type": "echo", "of": json.loads(message)})
                )

        async with serve(bot, "127.0.0.1", 0) as server:
            bot_port = server.sockets[0].getsockname()[1]
            relay = await TalkRelay(
                f"ws://127.0.0.1:{bot_port}/", port=0, log=lambda _: None
            ).start()
            try:
                url = f"ws://127.0.0.1:{relay.port}{RELAY_PATH}"
                async with connect(url, origin=f"http://127.0.0.1:{relay.port}") as page:
                    await page.send(b"\x01\x00\x02\x00")
                    audio = await page.recv()
                    await page.send(json.dumps({"type": "hello"}))
                    text = json.loads(await page.recv())
                return audio, text, relay.relayed
            finally:
                await relay.stop()

    audio, text, relayed = asyncio.run(scenario())
    assert audio == b"\x01\x00\x02\x00"
    assert text == {"type": "echo", "of": {"type": "hello"}}
    assert relayed == 1
