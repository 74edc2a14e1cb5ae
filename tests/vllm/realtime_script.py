"""Scripted realtime sessions, run the same way against vLLM's real server and against the fake
(`FakeVllm`).

A session is a coroutine that drives one WebSocket through a :class:`Transcript`: it sends client
events, waits for what the server must send, and marks points where the server has had time to
answer. The transcript keeps each server event's *shape* (type, field names, error code, which usage
fields are null, prompt tokens) and the marks, in order, so two servers are compared on event types,
fields and order, with ids, times and texts aside.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

#: PCM16 samples of one audio token (80 ms at 16 kHz).
TOKEN_SAMPLES = 1280
#: How long a mark waits for what the server may still send, seconds: the CPU server takes 30-300 ms
#: per token here.
SETTLE_S = 3.0
#: Longest wait for an event the server must send, seconds (a whole generation on a slow, shared
#: CPU).
EVENT_TIMEOUT_S = 120.0


def event(event_type: str, **fields: Any) -> str:
    return json.dumps({"type": event_type, **fields})


def append(tokens: float) -> str:
    """`input_audio_buffer.append` with `tokens` x 80 ms of a quiet ramp (PCM16, base64)."""
    samples = int(tokens * TOKEN_SAMPLES)
    pcm = bytes((i * 7) % 32 for i in range(2 * samples))
    return event("input_audio_buffer.append", audio=base64.b64encode(pcm).decode())


def shape(received: dict[str, Any]) -> tuple:
    """What the comparison keeps of a server event."""
    kind = received.get("type")
    fields = tuple(sorted(received))
    if kind == "error":
        return (kind, fields, received.get("code"))
    if kind == "transcription.done":
        usage = received["usage"]
        return (
            kind,
            fields,
            tuple(sorted((key, value is None) for key, value in usage.items())),
            usage["prompt_tokens"],
        )
    return (kind, fields)


class Transcript:
    """One session's record: server event shapes and marks, in order; the events themselves in
    `events`."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.entries: list[tuple] = []
        self.close_code: int | None = None

    async def send(self, message: str | bytes) -> None:
        await self.ws.send(message)

    def _record(self, message: str | bytes) -> None:
        received = json.loads(message)
        self.events.append(received)
        self.entries.append(shape(received))

    async def until(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = EVENT_TIMEOUT_S
    ) -> None:
        """Read until `done(events)` holds."""
        async with asyncio.timeout(timeout):
            while not done(self.events):
                self._record(await self.ws.recv())

    async def mark(self, label: str, settle_s: float = SETTLE_S) -> None:
        """Read what arrives within `settle_s`, then record the mark `label`."""
        try:
            async with asyncio.timeout(settle_s):
                while True:
                    self._record(await self.ws.recv())
        except TimeoutError:
            pass
        except ConnectionClosed:
            self._closed()
        self.entries.append(("mark", label))

    async def closed(self, timeout: float = EVENT_TIMEOUT_S) -> None:
        """Read until the connection ends; record its close code (1006: dropped without a close
        frame)."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._record(await self.ws.recv())
        except ConnectionClosed:
            self._closed()

    def _closed(self) -> None:
        if self.close_code is None:
            self.close_code = self.ws.protocol.close_code  # None for an abnormal closure: 1006 then
            self.close_code = 1006 if self.close_code is None else self.close_code
            self.entries.append(("closed", self.close_code))

    def deltas(self) -> list[str]:
        return [
            received["delta"]
            for received in self.events
            if received["type"] == "transcription.delta"
        ]

    def done(self, index: int = -1) -> dict[str, Any]:
        return [received for received in self.events if received["type"] == "transcription.done"][
            index
        ]

    def count(self, kind: str) -> int:
        return sum(received["type"] == kind for received in self.events)


def count_is(kind: str, n: int) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: sum(received["type"] == kind for received in events) >= n


async def open_session(url: str) -> Transcript:
    ws = await connect(url, compression=None, max_size=None, open_timeout=30, ping_interval=None)
    transcript = Transcript(ws)
    await transcript.until(count_is("session.created", 1))
    return transcript


# ---- the sessions ------------------------------------------------------------------------------


async def lifecycle(url: str, model: str) -> Transcript:
    """No delta before ~0.6 s of audio is buffered, then one per 80 ms, the rest after the final
    commit."""
    t = await open_session(url)
    await t.send(event("session.update", model=model))
    await t.send(event("input_audio_buffer.commit"))
    for _ in range(7):  # 0.56 s: not enough for a delta
        await t.send(append(1))
    await t.mark("7 tokens of audio")
    await t.send(append(1))  # 0.64 s: the first delta
    await t.until(count_is("transcription.delta", 1))
    await t.mark("8 tokens of audio")
    for _ in range(12):
        await t.send(append(1))
    await t.until(count_is("transcription.delta", 13))
    await t.mark("20 tokens of audio")
    await t.send(event("input_audio_buffer.commit", final=True))
    await t.until(count_is("transcription.done", 1))
    await t.mark("done")
    await t.ws.close()
    return t


async def second_utterance(url: str, model: str) -> Transcript:
    """A commit after `transcription.done` starts a generation whose text and usage start from
    zero."""
    t = await open_session(url)
    await t.send(event("session.update", model=model))
    for utterance in (1, 2):
        await t.send(event("input_audio_buffer.commit"))
        await t.send(append(10))
        await t.send(event("input_audio_buffer.commit", final=True))
        await t.until(count_is("transcription.done", utterance))
        await t.mark(f"utterance {utterance}")
    await t.ws.close()
    return t


async def final_values(url: str, model: str) -> Transcript:
    """`"final": "no"` is false (pydantic's bool); a value pydantic refuses is
    `processing_error`."""
    t = await open_session(url)
    await t.send(event("session.update", model=model))
    await t.send(event("input_audio_buffer.commit"))
    await t.send(append(3))
    await t.send(event("input_audio_buffer.commit", final="no"))
    await t.mark("final no")
    await t.send(event("input_audio_buffer.commit", final="maybe"))
    await t.until(count_is("error", 1))
    await t.mark("final maybe")
    await t.send(event("input_audio_buffer.commit", final="yes"))
    await t.until(count_is("transcription.done", 1))
    await t.mark("final yes")
    await t.ws.close()
    return t


#: Every in-band error, in order: (the client event, the code vLLM answers with).
ERRORS = [
    ("not json", "invalid_json"),
    (event("input_audio_buffer.commit"), "model_not_validated"),
    (event("session.update"), "invalid_event"),
    (event("session.update", model="no-such-model"), "model_not_found"),
    (event("response.create"), "unknown_event"),
    (event("input_audio_buffer.append", audio="A"), "invalid_audio"),  # not whole base64 quanta
    (
        event("input_audio_buffer.append", audio="AAAA"),
        "invalid_audio",
    ),  # 3 bytes: not whole PCM16 samples
    (event("input_audio_buffer.append", audio=""), "invalid_audio"),  # empty
    (event("input_audio_buffer.append"), "processing_error"),  # no audio field
    ("[1, 2]", "processing_error"),  # not an object
]


async def errors(url: str, model: str, unanswered: tuple[str, ...] = ()) -> Transcript:
    """Each error is answered in-band and the socket stays open; a valid session follows.
    `unanswered`: codes that cannot arise on this path (behind the bridge, which names the served
    model in every `session.update`)."""
    t = await open_session(url)
    answered = 0
    for message, code in ERRORS:
        await t.send(message)
        if code in unanswered:
            await t.mark(message[:40])
            continue
        answered += 1
        await t.until(count_is("error", answered))
        await t.mark(message[:40], settle_s=0.3)
    await t.send(event("session.update", model=model))
    await t.send(event("input_audio_buffer.commit"))
    await t.send(append(2))
    await t.send(event("input_audio_buffer.commit", final=True))
    await t.until(count_is("transcription.done", 1))
    await t.ws.close()
    return t


async def binary_frame(url: str, model: str) -> Transcript:
    """A binary frame ends the session without a close frame (the peer sees 1006)."""
    t = await open_session(url)
    await t.send(event("session.update", model=model))
    await t.send(b"\x00\x01")
    await t.closed()
    return t


async def past_max_model_len(url: str, model: str, max_model_len: int) -> Transcript:
    """Audio whose tokens pass `max_model_len`, then a final commit: what the server answers."""
    t = await open_session(url)
    await t.send(event("session.update", model=model))
    await t.send(event("input_audio_buffer.commit"))
    await t.send(append(max_model_len))
    await t.send(event("input_audio_buffer.commit", final=True))
    await t.until(
        lambda events: any(
            received["type"] in ("transcription.done", "error") for received in events
        )
    )
    await t.mark("ended")
    await t.ws.close()
    return t


SESSIONS = {
    "lifecycle": lifecycle,
    "second_utterance": second_utterance,
    "final_values": final_values,
    "errors": errors,
    "binary_frame": binary_frame,
}
