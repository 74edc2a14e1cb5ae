"""Helpers of the bridge tests: start a bridge in front of a fake vLLM, connect clients, build
events."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from bridge.health import http_get
from bridge.server import STREAM_PATH, Bridge
from contracts.bridge_env import BridgeEnvironment
from voice_devtools.local.fake_vllm import FakeVllm

#: 4096 bytes of PCM16 (2048 samples, 128 ms at 16 kHz), a recognisable ramp.
PCM_CHUNK = bytes(range(256)) * 16


@contextlib.asynccontextmanager
async def running_bridge(vllm_port: int, **overrides: Any) -> AsyncIterator[Bridge]:
    """A bridge on 127.0.0.1 (a free port) in front of vLLM at `vllm_port`; settings overridable by
    name.

    The health cache is filled once before yielding, so `/ping` reflects vLLM at once.
    """
    settings = BridgeEnvironment.defaults(
        **{
            "host": "127.0.0.1",
            "port": 0,
            "vllm_port": vllm_port,
            "metrics_interval_s": 3600,
            **overrides,
        }
    )
    bridge = await Bridge(settings).start()
    try:
        await bridge.health.probe_once()
        yield bridge
    finally:
        for client in _RAW_CLIENTS.pop(bridge, []):
            client.abort()
        await bridge.shutdown(drain_s=0)


#: Raw clients opened on each running bridge, hung up by ``running_bridge`` before it shuts the
#: bridge down: a raw client answers nothing by itself, so the bridge closing it would wait out
#: websockets' close_timeout for a closing handshake that never comes (2 s added to every test that
#: left one connected, asserting nothing).
_RAW_CLIENTS: dict[Bridge, list[RawClient]] = {}


@contextlib.asynccontextmanager
async def handshake_never_answered() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A "vLLM" on 127.0.0.1 that accepts TCP but never answers the WebSocket handshake; yields (its
    port, an event set once the bridge gave the connection up)."""
    given_up = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until EOF: the bridge gave up the connection
        given_up.set()
        writer.close()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], given_up
    finally:
        server.close()


#: How long a test waits for an answer before it calls the bridge stuck, seconds: a liveness bound,
#: not a latency target (latency targets, such as `/ping` under 100 ms while held, are figures
#: printed by bench/bridge_bench.py).
LIVENESS_S = 10.0
#: A fallback timer of the bridge set this long in a test (an override of running_bridge, or a
#: monkeypatched module constant), seconds: past any liveness wait, so that what a wait of
#: LIVENESS_S sees cannot have come from that timer (e.g. the open timeout ending a stream a test
#: expects the client's leaving to end).
BEYOND_LIVENESS_S = 3 * LIVENESS_S


async def open_stream(bridge: Bridge) -> ClientConnection:
    """Connect a client to the bridge's stream path (compression off, as SageMaker's side has no
    deflate)."""
    return await connect(
        f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}", compression=None, open_timeout=LIVENESS_S
    )


async def recv_event(ws: ClientConnection, timeout: float = LIVENESS_S) -> dict[str, Any]:
    """Next event from the bridge, parsed; raises TimeoutError after `timeout` seconds (a liveness
    bound: on a loaded machine an answer has taken over 1 s)."""
    async with asyncio.timeout(timeout):
        return json.loads(await ws.recv())


async def started_stream(
    bridge: Bridge, vllm: FakeVllm, index: int = 0
) -> tuple[ClientConnection, Any]:
    """A client stream past `session.created`, with `session.update` sent and a commit; returns
    (client, FakeSession)."""
    ws = await open_stream(bridge)
    created = await recv_event(ws)
    assert created["type"] == "session.created"
    await ws.send(event("session.update", model=vllm.model))
    await ws.send(event("input_audio_buffer.commit"))
    session = await vllm.wait_for_session(
        index
    )  # the fake's waits default to a liveness bound (WAIT_S)
    await session.wait_for_event("input_audio_buffer.commit")
    return ws, session


def event(event_type: str, **fields: Any) -> str:
    """A client event as JSON text (json.dumps' default separators)."""
    return json.dumps({"type": event_type, **fields})


def append(pcm: bytes = PCM_CHUNK) -> str:
    """An `input_audio_buffer.append` carrying `pcm` (base64)."""
    return event("input_audio_buffer.append", audio=base64.b64encode(pcm).decode())


async def ping_status(bridge: Bridge) -> int:
    """HTTP status of the bridge's `GET /ping`."""
    status, _ = await http_get("127.0.0.1", bridge.port, "/ping", LIVENESS_S)
    return status


async def closed_within(ws: ClientConnection, timeout: float) -> tuple[int | None, str | None]:
    """Wait for the client connection to close; return (close code, reason)."""
    async with asyncio.timeout(timeout):
        await ws.wait_closed()
    return ws.close_code, ws.close_reason


async def http_exchange(
    bridge: Bridge, request: bytes, timeout: float = 2.0
) -> tuple[bytes, bytes]:
    """Write raw `request` bytes on a new connection, read until the bridge closes it; return (head,
    body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
    try:
        writer.write(request)
        response = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return head, body


async def ping_during(
    bridge: Bridge, attack: Awaitable[Any], at_least_s: float = 0.5
) -> list[float]:
    """Ask `/ping` every 50 ms while `attack` runs (and for at least `at_least_s`); return the
    latencies, seconds.

    What a test asserts from this holds at any machine speed: every `/ping` asked during the attack
    was answered 200 (the event loop was never starved, nor the health state flipped). The latencies
    are returned for a caller to print; their target lives in bench/bridge_bench.py (`/ping while
    held`), not in a timed assertion.

    Raises:
        AssertionError: an answer was not 200 (TimeoutError from `http_get` when none came within
            `LIVENESS_S`).
    """
    task = asyncio.ensure_future(attack)
    latencies: list[float] = []
    started = time.monotonic()
    try:
        while not task.done() or time.monotonic() - started < at_least_s:
            asked = time.perf_counter()
            status = await ping_status(bridge)
            latencies.append(time.perf_counter() - asked)
            assert status == 200, f"/ping answered {status} during the attack"
            await asyncio.sleep(0.05)
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return latencies


def frame(opcode: Opcode, payload: bytes = b"", fin: bool = True) -> bytes:
    """One masked client frame, serialised."""
    return Frame(opcode, payload, fin).serialize(mask=True)


class RawClient:
    """A WebSocket client that writes raw frames (the handshake through websockets'
    `ClientProtocol`) and parses what the bridge sends with the same protocol object."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: ClientProtocol
    ) -> None:
        self.reader, self.writer, self.protocol = reader, writer, protocol
        self.frames: list[Frame] = []

    @classmethod
    async def open(
        cls, bridge: Bridge, path: str = STREAM_PATH, extra_headers: dict[str, str] | None = None
    ) -> RawClient:
        """Connect and complete the handshake; raises AssertionError unless the bridge answers
        101."""
        protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{bridge.port}{path}"))
        request = protocol.connect()
        for name, value in (extra_headers or {}).items():
            request.headers[name] = value
        protocol.send_request(request)
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge.port)
        writer.write(b"".join(protocol.data_to_send()))
        client = cls(reader, writer, protocol)
        _RAW_CLIENTS.setdefault(bridge, []).append(client)
        async with asyncio.timeout(LIVENESS_S):
            while protocol.handshake_exc is None and protocol.state is State.CONNECTING:
                client._feed(await reader.read(65536))
        assert protocol.handshake_exc is None, protocol.handshake_exc
        return client

    def _feed(self, data: bytes) -> None:
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        for event in self.protocol.events_received():
            if isinstance(event, Frame):
                self.frames.append(event)
            else:
                self.response = event

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def close_frame(self, timeout: float) -> tuple[int, str]:
        """Read until the bridge's close frame; return its (code, reason)."""
        async with asyncio.timeout(timeout):
            while True:
                for received in self.frames:
                    if received.opcode is Opcode.CLOSE:
                        close = Close.parse(received.data)
                        return close.code, close.reason
                data = await self.reader.read(65536)
                self._feed(data)
                if not data:
                    raise AssertionError("the connection ended without a close frame")

    def events(self) -> list[dict[str, Any]]:
        """The JSON events received so far (text frames)."""
        return [
            json.loads(received.data) for received in self.frames if received.opcode is Opcode.TEXT
        ]

    async def read_for(self, seconds: float) -> None:
        """Read what the bridge sends for `seconds` (or until it closes)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while data := await self.reader.read(65536):
                    self._feed(data)

    def abort(self) -> None:
        self.writer.transport.abort()


def bounded_runner(timeout_s: float) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """A function that runs a coroutine to completion on a new event loop, bounded by ``timeout_s``
    seconds (a liveness bound: the ``run`` fixture of tests/bridge and tests/vllm)."""

    def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
        async def bounded() -> Any:
            async with asyncio.timeout(timeout_s):
                return await coroutine

        return asyncio.run(bounded())

    return _run
