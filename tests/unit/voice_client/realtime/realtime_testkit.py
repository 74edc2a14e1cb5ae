"""Events, audio chunks and a started machine, shared by the realtime client's tests."""

from __future__ import annotations

import base64
import json

import numpy as np

from voice_client.audio import CHUNK_BYTES
from voice_client.realtime import SendEvent, TranscriptionMachine

LOUD = (np.full(CHUNK_BYTES // 2, 8000, dtype="<i2")).tobytes()  # RMS 0.24: never a quiet seam
QUIET = bytes(CHUNK_BYTES)
CHUNK_S = 0.128
UPDATE = json.dumps({"type": "session.update", "model": "m"})
COMMIT = json.dumps({"type": "input_audio_buffer.commit"})
FINAL = json.dumps({"type": "input_audio_buffer.commit", "final": True})


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


def append(chunk: bytes) -> SendEvent:
    return SendEvent(
        0,
        json.dumps(
            {"type": "input_audio_buffer.append", "audio": base64.b64encode(chunk).decode()}
        ),
        CHUNK_S,
    )


def sent(actions, stream: int | None = None) -> list[str]:
    """The events the actions send (on ``stream``, if given), as 'update', 'commit', 'final' or
    'append <index>'."""
    names = []
    for action in actions:
        if isinstance(action, SendEvent) and (stream is None or action.stream == stream):
            event = json.loads(action.text)
            if event["type"] == "input_audio_buffer.append":
                names.append(
                    f"append {np.frombuffer(base64.b64decode(event['audio']), dtype='<i2')[0]}"
                )
            else:
                names.append(
                    {
                        "session.update": "update",
                        "input_audio_buffer.commit": "final" if event.get("final") else "commit",
                    }[event["type"]]
                )
    return names


def delta(text: str) -> str:
    return json.dumps({"type": "transcription.delta", "delta": text})


def done(text: str) -> str:
    return json.dumps({"type": "transcription.done", "text": text, "usage": {}})


def error(code: str, message: str = "boom", **fields) -> str:
    return json.dumps({"type": "error", "error": message, "code": code, **fields})


def started(now: float = 0.0, **options) -> tuple[TranscriptionMachine, list]:
    """A machine with its first stream open (its opening actions returned)."""
    machine = TranscriptionMachine(model="m", **options)
    actions = machine.start(now) + machine.opened(1, now)
    return machine, actions
