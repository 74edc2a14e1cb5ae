"""vLLM realtime protocol facts the bridge relies on, and the checks it makes on client frames.

Source of every event name, field and error code: vllm-project/vllm
`vllm/entrypoints/speech_to_text/realtime/protocol.py` (event models) and `.../realtime/connection.py`
(`RealtimeConnection.handle_event`: which error code answers which mistake). Errors are in-band
events `{"type": "error", "error": <message>, "code": <code>}` and the socket stays open after them.

The bridge adds its own codes in the same shape: `upstream_closed`, `upstream_unavailable`,
`server_busy`, `idle_timeout`, `session_limit`, `server_shutdown`. Where it answers a client frame in
vLLM's place, it uses the code vLLM would give (`check_client_frame`).

Client frames are checked before they are relayed, so that nothing malformed reaches vLLM:

- the hot path, `input_audio_buffer.append` written as `{"type":"input_audio_buffer.append","audio":"..."}`
  (with or without the spaces `json.dumps` puts after `:` and `,`), is recognised by an exact prefix and
  suffix match, and its audio is decoded by `binascii.a2b_base64(strict_mode=True)`, which rejects every
  byte outside the base64 alphabet (so also `"` and `\\`): a frame that passes is therefore valid JSON
  of exactly that shape, without a `json.loads` of the ~5.4 KiB text;
- every other frame goes through `json.loads` and is checked field by field.
"""

from __future__ import annotations

import binascii
import json
from dataclasses import dataclass
from typing import Any

# ---- vLLM realtime protocol (vllm realtime/protocol.py, realtime/api_router.py) -------------------------
#: Path of vLLM's realtime WebSocket endpoint (vllm `realtime/api_router.py`).
VLLM_REALTIME_PATH = "/v1/realtime"
#: vLLM's readiness endpoint: 200 once the engine can serve.
VLLM_HEALTH_PATH = "/health"
#: vLLM's model list (OpenAI-compatible), used to learn the served model name when no setting gives it.
VLLM_MODELS_PATH = "/v1/models"

SESSION_UPDATE = "session.update"
APPEND = "input_audio_buffer.append"
COMMIT = "input_audio_buffer.commit"
TRANSCRIPTION_DELTA = "transcription.delta"
TRANSCRIPTION_DONE = "transcription.done"
#: How vLLM's `transcription.done` starts: pydantic's `model_dump_json` writes `type`, its first field,
#: first and compact (realtime/protocol.py `TranscriptionDone`).
TRANSCRIPTION_DONE_PREFIX = b'{"type":"transcription.done"'

#: Audio format of `input_audio_buffer.append` (vllm realtime/protocol.py: "base64-encoded PCM16 @ 16kHz").
SAMPLE_RATE_HZ = 16_000
BYTES_PER_SAMPLE = 2  # PCM16, mono

# ---- error codes --------------------------------------------------------------------------------------
# vLLM's own (realtime/connection.py); the bridge answers these itself for frames it rejects, with the
# code vLLM would give for the same frame.
INVALID_JSON = "invalid_json"
INVALID_AUDIO = "invalid_audio"
PROCESSING_ERROR = "processing_error"
UNKNOWN_EVENT = "unknown_event"
# The bridge's, same event shape.
UPSTREAM_CLOSED = "upstream_closed"  # vLLM closed or dropped the session mid-stream
UPSTREAM_UNAVAILABLE = "upstream_unavailable"  # vLLM refused or did not answer the connection
SERVER_BUSY = "server_busy"  # MAX_STREAMS sessions are already open
IDLE_TIMEOUT = "idle_timeout"  # the client sent nothing for IDLE_TIMEOUT_S
SESSION_LIMIT = "session_limit"  # the session's audio approaches vLLM's max_model_len
SERVER_SHUTDOWN = "server_shutdown"  # the container is stopping and DRAIN_S has run out

# Byte patterns of the hot-path append (compact and json.dumps-default separators).
_APPEND_PREFIXES = (
    b'{"type":"input_audio_buffer.append","audio":"',
    b'{"type": "input_audio_buffer.append", "audio": "',
)
_APPEND_SUFFIX = b'"}'
#: JSON's names of the Python types json.loads returns, for error messages.
_JSON_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def error_event(message: str, code: str) -> bytes:
    """Serialise an error event in vLLM's shape: `{"type": "error", "error": message, "code": code}` (UTF-8)."""
    return json.dumps({"type": "error", "error": message, "code": code}, separators=(",", ":")).encode()


@dataclass(slots=True)
class FrameCheck:
    """Outcome of checking one client frame.

    Attributes:
        forward: the UTF-8 bytes to send to vLLM as a text frame, or None when the frame is rejected.
        error: the error event (bytes) to send back to the client when rejected, else None.
        audio_bytes: decoded PCM16 bytes the frame appends (0 for other events).
        event_type: the event's `type` when known (None for frames that are not JSON objects).
        final_commit: the frame is `input_audio_buffer.commit` with `"final": true` (the audio of the
            current generation is complete).
    """

    forward: bytes | None
    error: bytes | None = None
    audio_bytes: int = 0
    event_type: str | None = None
    final_commit: bool = False


def _reject(message: str, code: str, event_type: str | None = None) -> FrameCheck:
    return FrameCheck(forward=None, error=error_event(message, code), event_type=event_type)


def _pcm16_length(audio: bytes | str | memoryview) -> int | str:
    """Decoded length in bytes of base64 PCM16 `audio`, or an error message saying what is wrong.

    Line breaks (CR, LF: MIME-style base64, e.g. Python's `base64.encodebytes`) are allowed, as vLLM
    allows them; any other character outside the RFC 4648 alphabet is refused. vLLM decodes with
    `pybase64.b64decode` without validation, which silently skips such characters and transcribes what
    remains; refusing them keeps a corrupted payload from becoming wrong audio.
    """
    if isinstance(audio, str) and ("\n" in audio or "\r" in audio):
        audio = audio.replace("\r", "").replace("\n", "")
    try:
        pcm_bytes = len(binascii.a2b_base64(audio, strict_mode=True))
    except (binascii.Error, ValueError):
        return "audio is not valid base64 (RFC 4648 standard alphabet, padded; line breaks are allowed, nothing else)"
    if pcm_bytes == 0:
        return "audio is empty; send at least one PCM16 sample (2 bytes)"
    if pcm_bytes % BYTES_PER_SAMPLE:
        return f"audio decodes to {pcm_bytes} bytes, not a whole number of PCM16 samples (2 bytes each)"
    return pcm_bytes


def check_client_frame(frame: bytes, served_model: str | None) -> FrameCheck:
    """Check one client frame (text frame payload as UTF-8 bytes) and decide what to relay.

    Args:
        frame: the frame's payload bytes (a binary frame's payload is treated the same way: as UTF-8 JSON).
        served_model: vLLM's served model name; `session.update` is rewritten to carry it (None: unchanged).

    Returns:
        FrameCheck: `forward` is `frame` itself for every accepted event, except `session.update`,
        which is re-serialised with `model` set to `served_model`. Rejections carry the code vLLM gives
        for the same frame: `invalid_json` (not JSON; also not UTF-8, which vLLM's WebSocket layer would
        refuse outright), `processing_error` (JSON but not an object; an append without a string
        `audio`; JSON nested too deeply or with a number too long for Python's parser), `unknown_event`
        (no string `type`), `invalid_audio` (audio not base64, empty, or an odd number of bytes).
    """
    # Hot path: an append in the canonical layout; strict base64 decoding validates the whole middle.
    if frame.endswith(_APPEND_SUFFIX):
        for prefix in _APPEND_PREFIXES:
            if frame.startswith(prefix):
                pcm_bytes = _pcm16_length(memoryview(frame)[len(prefix) : -len(_APPEND_SUFFIX)])
                if isinstance(pcm_bytes, int):
                    return FrameCheck(forward=frame, audio_bytes=pcm_bytes, event_type=APPEND)
                break  # may still be valid JSON (e.g. an escaped "\/"): decide on the full parse below
    try:
        event = json.loads(frame.decode("utf-8"))
    except UnicodeDecodeError:
        return _reject("frame is not UTF-8 text; send each event as JSON in a text frame", INVALID_JSON)
    except json.JSONDecodeError as exc:
        return _reject(f"Invalid JSON: {exc.msg} at position {exc.pos}", INVALID_JSON)
    except (ValueError, RecursionError) as exc:
        # Valid JSON that Python's parser refuses: nesting deeper than the recursion limit, or an integer
        # of more than 4300 digits (sys.get_int_max_str_digits). vLLM's json.loads fails the same way
        # and answers processing_error (realtime/connection.py: any exception other than JSONDecodeError).
        reason = "nests too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
        return _reject(f"the event {reason} to be parsed ({type(exc).__name__})", PROCESSING_ERROR)
    # The codes below are the ones vLLM answers for the same frame (realtime/connection.py), so that a
    # client sees the same errors with or without the bridge.
    if not isinstance(event, dict):  # vLLM: event.get() raises AttributeError -> processing_error
        return _reject(f"an event must be a JSON object, got {_JSON_NAMES.get(type(event), 'null')}", PROCESSING_ERROR)
    event_type = event.get("type")
    if not isinstance(event_type, str):  # vLLM: no handler for the type -> unknown_event
        return _reject(
            f"Unknown event type: {json.dumps(event_type)}; an event needs a string field \"type\" "
            f"({SESSION_UPDATE}, {APPEND} or {COMMIT})",
            UNKNOWN_EVENT,
        )
    if event_type == APPEND:
        audio = event.get("audio")
        if not isinstance(audio, str):  # vLLM: pydantic validation of InputAudioBufferAppend -> processing_error
            return _reject(
                f'{APPEND} needs a string field "audio" (base64 PCM16, 16 kHz, mono)', PROCESSING_ERROR, APPEND
            )
        pcm_bytes = _pcm16_length(audio)
        if isinstance(pcm_bytes, str):
            return _reject(pcm_bytes, INVALID_AUDIO, APPEND)
        return FrameCheck(forward=frame, audio_bytes=pcm_bytes, event_type=APPEND)
    if event_type == SESSION_UPDATE and served_model is not None and event.get("model") != served_model:
        event["model"] = served_model
        return FrameCheck(forward=json.dumps(event, separators=(",", ":")).encode(), event_type=SESSION_UPDATE)
    if event_type == COMMIT:
        return FrameCheck(forward=frame, event_type=COMMIT, final_commit=event.get("final") is True)
    return FrameCheck(forward=frame, event_type=event_type)


def parse_served_model(models_body: bytes) -> str | None:
    """The first model id in vLLM's `GET /v1/models` answer (`{"data": [{"id": ...}, ...]}`), or None."""
    try:
        data: Any = json.loads(models_body)
        return str(data["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None
