"""The checks the bridge makes on client frames, and the accounting of a stream.

The vocabulary is the contract's (contracts/realtime.py: event names, error codes and the fields
each of the bridge's error events carries); the source of every event name, field and error code is
vLLM's realtime protocol (vllm-project/vllm `vllm/entrypoints/speech_to_text/realtime/protocol.py`
and `.../realtime/connection.py`). Where the bridge answers a client frame in vLLM's place, it uses
the code vLLM would give (`check_client_frame`).

The accounting of a stream is pure code here, apart from the sockets: `GenerationAudio` (the audio
of the current generation against vLLM's `max_model_len`) and `AudioRate` (the stream's audio rate
limit).

Client frames are checked before they are relayed, so that nothing malformed reaches vLLM:

- the hot path, `input_audio_buffer.append` written as
  `{"type":"input_audio_buffer.append","audio":"..."}` (with or without the spaces `json.dumps` puts
  after `:` and `,`), is recognised by an exact prefix and suffix match, and its audio is decoded by
  `pybase64.b64decode(validate=True)`, which rejects every byte outside the base64 alphabet (so also
  `"` and `\\`): a frame that passes is therefore valid JSON of exactly that shape, without a
  `json.loads` of the ~5.4 KiB text;
- MIME-style line breaks (`\\n`, `\\r`) and escaped slashes (`\\/`) in that audio string are removed
  with byte replacements, not a parser, so appends of any size stay off `json.loads`;
- every other frame goes through `json.loads` and is checked field by field, but only up to
  `MAX_OTHER_EVENT_BYTES`: a larger frame that is not such an append is refused unparsed
  (`event_too_large`), as parsing a 4 MiB JSON object takes a quarter of a second of the event loop.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pybase64

from contracts.realtime import (
    APPEND,
    BYTES_PER_SAMPLE,
    COMMIT,
    ERROR,
    ERROR_FIELDS,
    EVENT_TOO_LARGE,
    INVALID_AUDIO,
    INVALID_JSON,
    PCM_BYTES_PER_SECOND,
    PROCESSING_ERROR,
    SESSION_UPDATE,
    UNKNOWN_EVENT,
)

# ---- vLLM's server, as the bridge reaches it (vllm realtime/api_router.py) -----------------------
#: Path of vLLM's realtime WebSocket endpoint (vllm `realtime/api_router.py`).
VLLM_REALTIME_PATH = "/v1/realtime"
#: vLLM's readiness endpoint: 200 once the engine can serve.
VLLM_HEALTH_PATH = "/health"
#: vLLM's model list (OpenAI-compatible), used to learn the served model name when no setting gives
#: it.
VLLM_MODELS_PATH = "/v1/models"
#: How vLLM's `transcription.done` starts: pydantic's `model_dump_json` writes `type`, its first
#: field, first and compact (realtime/protocol.py `TranscriptionDone`).
TRANSCRIPTION_DONE_PREFIX = b'{"type":"transcription.done"'

#: Largest frame, in bytes, the bridge parses as JSON. Appends in the canonical layout (below) are
#: checked without a parser at any size up to MAX_FRAME_BYTES; every other event is tiny in practice
#: (`session.update`, `input_audio_buffer.commit`: tens of bytes), and a larger one is refused
#: unparsed (parsing 128 KiB of JSON takes 1-2 ms here; 4 MiB took 70-240 ms).
MAX_OTHER_EVENT_BYTES = 128 * 1024

#: Frames larger than this are checked a slice at a time (`check_large_append`), so that one 4 MiB
#: append costs the event loop well under 1 ms per turn instead of 20-50 ms at once (strict base64
#: decoding of 4 MiB takes 10-20 ms on a loaded machine).
SLICE_BYTES = 64 * 1024

# Byte patterns of the hot-path append (compact and json.dumps-default separators).
_APPEND_PREFIXES = (
    b'{"type":"input_audio_buffer.append","audio":"',
    b'{"type": "input_audio_buffer.append", "audio": "',
)
_APPEND_SUFFIX = b'"}'
#: JSON's names of the Python types json.loads returns, for error messages.
_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def error_event(message: str, code: str, **fields: float | int | str | None) -> bytes:
    """Serialise an error event in vLLM's shape, `{"type": "error", "error": message, "code": code,
    **fields}` (UTF-8).

    Raises:
        ValueError: `fields` are not exactly the ones `ERROR_FIELDS` lists for `code` (a bridge
            bug).
    """
    expected = ERROR_FIELDS.get(code, ())
    if tuple(sorted(fields)) != tuple(sorted(expected)):
        raise ValueError(f"error code {code!r} carries the fields {expected}, got {tuple(fields)}")
    return json.dumps(
        {"type": ERROR, "error": message, "code": code, **fields}, separators=(",", ":")
    ).encode()


@dataclass(slots=True)
class FrameCheck:
    """Outcome of checking one client frame.

    Attributes:
        forward: the UTF-8 bytes to send to vLLM as a text frame, or None when the frame is
            rejected.
        error: the error event (bytes) to send back to the client when rejected, else None.
        audio_bytes: decoded PCM16 bytes the frame appends (0 for other events).
        event_type: the event's `type` when known (None for frames that are not JSON objects).
        final_commit: the frame is `input_audio_buffer.commit` with `"final": true` (the audio of
            the current generation is complete).
    """

    forward: bytes | None
    error: bytes | None = None
    audio_bytes: int = 0
    event_type: str | None = None
    final_commit: bool = False


def _reject(message: str, code: str, event_type: str | None = None, **fields: int) -> FrameCheck:
    return FrameCheck(
        forward=None, error=error_event(message, code, **fields), event_type=event_type
    )


def _length_verdict(pcm_bytes: int) -> int | str:
    """`pcm_bytes` when it is a whole, non-zero number of PCM16 samples, else an error message."""
    if pcm_bytes == 0:
        return "audio is empty; send at least one PCM16 sample (2 bytes)"
    if pcm_bytes % BYTES_PER_SAMPLE:
        return (
            f"audio decodes to {pcm_bytes} bytes, not a whole number of PCM16 samples (2 bytes "
            "each)"
        )
    return pcm_bytes


_NOT_BASE64 = (
    "audio is not valid base64 (RFC 4648 standard alphabet, padded; line breaks are allowed, "
    "nothing else)"
)


def _decoded_length(audio: bytes | str | memoryview) -> int:
    """Length in bytes of the strict base64 `audio` (RFC 4648 standard alphabet, padded), decoded.

    pybase64 (the SIMD library vLLM itself decodes with) rather than `binascii.a2b_base64`: with
    `validate=True` it refuses the same bytes, and decodes a 5.4 KiB append 13 times faster (0.8 vs
    10.3 µs on this project's machine; every relayed append goes through here).

    Raises:
        binascii.Error: a byte outside the alphabet, misplaced or missing padding, or a non-ASCII
            str.
    """
    return len(pybase64.b64decode(audio, validate=True))


def _pcm16_length(audio: bytes | str | memoryview) -> int | str:
    """Decoded length in bytes of base64 PCM16 `audio`, or an error message saying what is wrong.

    Line breaks (CR, LF: MIME-style base64, e.g. Python's `base64.encodebytes`) are allowed, as vLLM
    allows them; any other character outside the RFC 4648 alphabet is refused. vLLM decodes with
    `pybase64.b64decode` without validation, which silently skips such characters and transcribes
    what remains; refusing them keeps a corrupted payload from becoming wrong audio.
    """
    if isinstance(audio, str) and ("\n" in audio or "\r" in audio):
        audio = audio.replace("\r", "").replace("\n", "")
    try:
        pcm_bytes = _decoded_length(audio)
    except (binascii.Error, ValueError):
        return _NOT_BASE64
    return _length_verdict(pcm_bytes)


def _append_span(frame: bytes) -> tuple[int, int] | None:
    """(start, end) of the audio string of an append in the canonical layout, else None."""
    if frame.endswith(_APPEND_SUFFIX):
        for prefix in _APPEND_PREFIXES:
            if frame.startswith(prefix):
                return len(prefix), len(frame) - len(_APPEND_SUFFIX)
    return None


def _append_pcm16_length(
    frame: bytes, start: int, end: int, slice_bytes: int
) -> Generator[None, None, int | str]:
    """`_pcm16_length` of the JSON string `frame[start:end]`, `slice_bytes` at a time, yielding
    between slices.

    The string may hold the JSON escapes `\\n` and `\\r` (MIME line breaks, dropped) and `\\/` (a
    slash). Without an escaped backslash (`\\\\`) every backslash starts a two-byte escape, so these
    replacements give exactly the decoded string, and any other escape leaves a backslash, which
    strict base64 decoding refuses. Slices end on whole 4-character base64 quanta; padding (`=`) is
    only allowed in the last.
    """
    escaped = frame.find(b"\\", start, end) >= 0
    if escaped and frame.find(b"\\\\", start, end) >= 0:
        return "audio holds an escaped backslash, which base64 never contains"
    view = memoryview(frame)
    total, carry, position = 0, b"", start
    while True:
        stop = min(end, position + slice_bytes)
        if escaped and stop < end and frame[stop - 1] == 0x5C:  # never split an escape
            stop += 1
        chunk: bytes | memoryview
        if escaped:
            chunk = (
                bytes(view[position:stop])
                .replace(b"\\/", b"/")
                .replace(b"\\r", b"")
                .replace(b"\\n", b"")
            )
        elif carry or stop < end:
            chunk = bytes(view[position:stop])
        else:
            chunk = view[position:stop]
        chunk = carry + chunk if carry else chunk
        position = stop
        if position < end:
            whole = len(chunk) - len(chunk) % 4
            chunk, carry = chunk[:whole], bytes(chunk[whole:])  # bytes already: position < end
            if b"=" in chunk:
                return _NOT_BASE64
        try:
            total += _decoded_length(chunk)
        except (binascii.Error, ValueError):
            return _NOT_BASE64
        if position >= end:
            return _length_verdict(total)
        yield


def _run(steps: Generator[None, None, int | str]) -> int | str:
    """Run a generator of `_append_pcm16_length` to its end (one slice when it is given the whole
    span)."""
    try:
        while True:
            next(steps)
    except StopIteration as finished:
        return finished.value


def check_large_append(frame: bytes) -> Generator[None, None, FrameCheck]:
    """`check_client_frame` for a frame above `SLICE_BYTES`, checked `SLICE_BYTES` at a time
    (yielding between).

    Only an append in the canonical layout can be that large; anything else is refused at once,
    unparsed (`event_too_large`, see `check_client_frame`).
    """
    span = _append_span(frame)
    if span is None:
        return check_client_frame(frame, None)
    pcm_bytes = yield from _append_pcm16_length(frame, *span, SLICE_BYTES)
    if isinstance(pcm_bytes, str):
        return _reject(pcm_bytes, INVALID_AUDIO, APPEND)
    return FrameCheck(forward=frame, audio_bytes=pcm_bytes, event_type=APPEND)


def check_client_frame(frame: bytes, served_model: str | None) -> FrameCheck:
    """Check one client frame (text frame payload as UTF-8 bytes) and decide what to relay.

    Args:
        frame: the frame's payload bytes (a binary frame's payload is treated the same way: as UTF-8
            JSON).
        served_model: vLLM's served model name; `session.update` is rewritten to carry it (None:
            unchanged).

    Returns:
        FrameCheck: `forward` is `frame` itself for every accepted event, except `session.update`,
        which is re-serialised with `model` set to `served_model`. Rejections carry the code vLLM
        gives for the same frame: `invalid_json` (not JSON; also not UTF-8, which vLLM's WebSocket
        layer would refuse outright), `processing_error` (JSON but not an object; an append without
        a string `audio`; JSON nested too deeply or with a number too long for Python's parser),
        `unknown_event` (no string `type`), `invalid_audio` (audio not base64, empty, or an odd
        number of bytes); and the bridge's own `event_too_large` (`max_bytes`, `bytes`) for a frame
        above `MAX_OTHER_EVENT_BYTES` that is not an append in the canonical layout, which is
        refused without being parsed.
    """
    # Hot path: an append in the canonical layout; strict base64 decoding validates the whole
    # middle.
    span = _append_span(frame)
    if span is not None:
        start, end = span
        pcm_bytes = _pcm16_length(memoryview(frame)[start:end])
        if isinstance(pcm_bytes, str) and frame.find(b"\\", start, end) >= 0:
            pcm_bytes = _run(_append_pcm16_length(frame, start, end, end - start))
        if isinstance(pcm_bytes, int):
            return FrameCheck(forward=frame, audio_bytes=pcm_bytes, event_type=APPEND)
        if len(frame) > MAX_OTHER_EVENT_BYTES:  # never json.loads a large frame
            return _reject(pcm_bytes, INVALID_AUDIO, APPEND)
        # Otherwise it may still be valid JSON (e.g. a \u escape): decide on the full parse below.
    if len(frame) > MAX_OTHER_EVENT_BYTES:
        return _reject(
            f"the event is {len(frame)} bytes; events other than an append are at most "
            f"{MAX_OTHER_EVENT_BYTES} "
            "bytes, and a large append must be written as "
            f'{{"type":"{APPEND}","audio":"<base64>"}} '
            "(this key order, nothing else in the object)",
            EVENT_TOO_LARGE,
            max_bytes=MAX_OTHER_EVENT_BYTES,
            bytes=len(frame),
        )
    try:
        event = json.loads(frame.decode("utf-8"))
    except UnicodeDecodeError:
        return _reject(
            "frame is not UTF-8 text; send each event as JSON in a text frame", INVALID_JSON
        )
    except json.JSONDecodeError as exc:
        return _reject(f"Invalid JSON: {exc.msg} at position {exc.pos}", INVALID_JSON)
    except (ValueError, RecursionError) as exc:
        # Valid JSON that Python's parser refuses: nesting deeper than the recursion limit, or an
        # integer of more than 4300 digits (sys.get_int_max_str_digits). vLLM's json.loads fails the
        # same way and answers processing_error (realtime/connection.py: any exception other than
        # JSONDecodeError).
        reason = (
            "nests too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
        )
        return _reject(f"the event {reason} to be parsed ({type(exc).__name__})", PROCESSING_ERROR)
    # The codes below are the ones vLLM answers for the same frame (realtime/connection.py), so that
    # a client sees the same errors with or without the bridge.
    if not isinstance(event, dict):  # vLLM: event.get() raises AttributeError -> processing_error
        return _reject(
            f"an event must be a JSON object, got {_JSON_NAMES.get(type(event), 'null')}",
            PROCESSING_ERROR,
        )
    event_type = event.get("type")
    if not isinstance(event_type, str):  # vLLM: no handler for the type -> unknown_event
        return _reject(
            f'Unknown event type: {json.dumps(event_type)}; an event needs a string field "type" '
            f"({SESSION_UPDATE}, {APPEND} or {COMMIT})",
            UNKNOWN_EVENT,
        )
    if event_type == APPEND:
        audio = event.get("audio")
        if not isinstance(
            audio, str
        ):  # vLLM: pydantic validation of InputAudioBufferAppend -> processing_error
            return _reject(
                f'{APPEND} needs a string field "audio" (base64 PCM16, 16 kHz, mono)',
                PROCESSING_ERROR,
                APPEND,
            )
        pcm_bytes = _pcm16_length(audio)
        if isinstance(pcm_bytes, str):
            return _reject(pcm_bytes, INVALID_AUDIO, APPEND)
        return FrameCheck(forward=frame, audio_bytes=pcm_bytes, event_type=APPEND)
    if (
        event_type == SESSION_UPDATE
        and served_model is not None
        and event.get("model") != served_model
    ):
        event["model"] = served_model
        return FrameCheck(
            forward=json.dumps(event, separators=(",", ":")).encode(), event_type=SESSION_UPDATE
        )
    if event_type == COMMIT:
        return FrameCheck(forward=frame, event_type=COMMIT, final_commit=event.get("final") is True)
    return FrameCheck(forward=frame, event_type=event_type)


def parse_served_model(models_body: bytes) -> str | None:
    """The first model id in vLLM's `GET /v1/models` answer (`{"data": [{"id": ...}, ...]}`), or
    None."""
    try:
        data: Any = json.loads(models_body)
        return str(data["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


# ---- the audio accounting of one stream (pure: no sockets, no clock of its own) ----------------


@dataclass(slots=True)
class GenerationAudio:
    """PCM16 bytes of the current generation, counted against vLLM's `max_model_len`.

    vLLM applies `max_model_len` per generation: after a final commit it sends `transcription.done`,
    clears its audio queue, and the next commit starts a fresh request (realtime/connection.py
    `_run_generation`). What the next generation can see is at most the audio appended since the
    final commit (vLLM drops what arrives between the final commit and the done, so counting it errs
    on the safe side).

    Attributes:
        limit_bytes: PCM16 bytes one generation may hold (`Settings.session_audio_limit_bytes`),
            None for no limit.
        generation_bytes: PCM16 bytes counted against the current generation.
        since_final_bytes: PCM16 bytes appended since the last final commit.
    """

    limit_bytes: int | None
    generation_bytes: int = 0
    since_final_bytes: int = 0

    def append(self, pcm_bytes: int) -> bool:
        """Count an append of `pcm_bytes`; False (and nothing counted) when it would pass the
        limit."""
        if self.limit_bytes is not None and self.generation_bytes + pcm_bytes > self.limit_bytes:
            return False
        self.generation_bytes += pcm_bytes
        self.since_final_bytes += pcm_bytes
        return True

    def final_commit(self) -> None:
        """A final commit passed: the current generation's audio is complete."""
        self.since_final_bytes = 0

    def done(self) -> None:
        """vLLM's `transcription.done` passed: the next generation starts with the audio since the
        final commit."""
        self.generation_bytes = self.since_final_bytes

    @property
    def limit_s(self) -> float | None:
        """The limit in seconds of audio (16 kHz PCM16), None for no limit."""
        return None if self.limit_bytes is None else self.limit_bytes / PCM_BYTES_PER_SECOND

    @property
    def audio_s(self) -> float:
        """Seconds of audio counted against the current generation."""
        return self.generation_bytes / PCM_BYTES_PER_SECOND


@dataclass(slots=True)
class AudioRate:
    """A token bucket on a stream's audio: at most `limit_x` x real time on average, with a burst of
    `burst_s`.

    Every event the client sends costs its audio seconds, and at least `min_event_s` (so that a
    flood of tiny appends or other events is capped too: with 10 ms, 32 x real time is 3200 events
    per second). Times are seconds of the caller's monotonic clock.

    Attributes:
        limit_x: audio seconds allowed per second of wall time.
        burst_s: audio seconds that may be sent at once (the bucket's size; it starts full).
        min_event_s: the least an event costs, seconds of audio.
        credit_s: audio seconds that may still be sent now.
        updated_at: when `credit_s` was last brought up to date (None: not yet).
    """

    limit_x: float
    burst_s: float
    min_event_s: float
    credit_s: float = 0.0
    updated_at: float | None = None

    def charge(self, audio_s: float, now: float) -> bool:
        """Spend max(`audio_s`, `min_event_s`) at time `now`; False (nothing spent) when the credit
        is short."""
        if self.updated_at is None:
            self.credit_s = self.burst_s
        else:
            self.credit_s = min(
                self.burst_s, self.credit_s + (now - self.updated_at) * self.limit_x
            )
        self.updated_at = now
        cost = audio_s if audio_s > self.min_event_s else self.min_event_s
        if cost > self.credit_s:
            return False
        self.credit_s -= cost
        return True
