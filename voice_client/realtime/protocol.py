"""vLLM's realtime protocol as the client speaks it: the events the client sends, what to try for
each error code, and the bounds on what it accepts.

Protocol (vLLM ``vllm/entrypoints/speech_to_text/realtime/connection.py`` and ``protocol.py``; held
against the real server by tests/vllm/test_vllm_contract.py): the server sends ``session.created``
on accept; the client sends ``session.update {model}`` (required before any commit), an
``input_audio_buffer.commit`` that starts a generation, ``input_audio_buffer.append {audio}`` events
carrying base64 PCM16 at 16 kHz mono, and a final ``input_audio_buffer.commit {final: true}`` that
ends the generation's audio. The server answers with ``transcription.delta {delta}`` events and one
``transcription.done {text, usage}`` per generation. Errors arrive in-band as ``error {error,
code}`` with, from the container's bridge, machine-readable fields (``session_limit``: ``limit_s``,
``audio_s``); the client reads those fields, never the English message. The event names, error codes
and fields are the contract's (:mod:`contracts.realtime`), which the bridge uses too; the names
below are bound to it (``SESSION_LIMIT_CODE`` is its ``SESSION_LIMIT``, and so on).
"""

from __future__ import annotations

import base64
import json

from contracts import realtime
from contracts.model import DEFAULT_REPO_ID
from contracts.realtime import (
    APPEND,
    BRIDGE_ERROR_CODES,
    CLIENT_EVENT_TYPES,
    COMMIT,
    ERROR,
    IDLE_TIMEOUT as IDLE_TIMEOUT_CODE,
    SERVER_BUSY as SERVER_BUSY_CODE,
    SERVER_EVENT_TYPES,
    SESSION_CREATED,
    SESSION_LIMIT as SESSION_LIMIT_CODE,
    SESSION_UPDATE,
    TRANSCRIPTION_DELTA,
    TRANSCRIPTION_DONE,
    VLLM_ERROR_CODES,
)
from voice_client.bounded_json import DEFAULT_MAX_DEPTH

__all__ = [
    "APPEND",
    "BRIDGE_ERROR_CODES",
    "CLIENT_EVENT_TYPES",
    "COMMIT",
    "DEFAULT_MODEL",
    "ERROR",
    "ERROR_FIELDS_READ",
    "ERROR_HINTS",
    "IDLE_TIMEOUT_CODE",
    "MAX_EVENT_BYTES",
    "MAX_EVENT_DEPTH",
    "REOPEN_CODES",
    "SERVER_BUSY_CODE",
    "SERVER_EVENT_TYPES",
    "SESSION_CREATED",
    "SESSION_LIMIT_CODE",
    "SESSION_UPDATE",
    "TRANSCRIPTION_DELTA",
    "TRANSCRIPTION_DONE",
    "VLLM_ERROR_CODES",
    "RealtimeError",
    "append_event",
    "commit_event",
    "decode_frame",
    "session_update_event",
]

DEFAULT_MODEL = DEFAULT_REPO_ID
"""Model name sent in ``session.update``; vLLM accepts only its served model name (error
``model_not_found``), which the Voxtral stack sets to the model hub repository id
(``voxtral.model_id``, by default this one)."""

ERROR_FIELDS_READ: dict[str, tuple[str, ...]] = {SESSION_LIMIT_CODE: ("limit_s", "audio_s")}
"""The machine-readable fields of the bridge's error events this client reads (seconds of audio; the
bridge writes them: :data:`contracts.realtime.ERROR_FIELDS`)."""

REOPEN_CODES = frozenset(
    {
        realtime.UPSTREAM_CLOSED,
        realtime.SERVER_SHUTDOWN,
        "InternalStreamFailure",
        "ModelStreamError",
    }
)
"""Error codes that end a stream but not the endpoint's ability to serve a new one, so they count as
a cut: the bridge's ``upstream_closed`` (vLLM ended the session) and ``server_shutdown`` (the
container is stopping: on SageMaker a new stream lands on a healthy instance), and SageMaker's
stream failures."""

MAX_EVENT_BYTES = 1024 * 1024
"""Largest server event accepted, in bytes (1 MiB): a ``transcription.done`` of a 50-minute
generation holds some 50 KB of text (150 words a minute); anything larger is refused (code
``message_too_large``) before it is parsed."""

MAX_EVENT_DEPTH = DEFAULT_MAX_DEPTH
"""Deepest JSON nesting accepted in a server event (the protocol's events nest 3 levels)."""

ERROR_HINTS: dict[str, str] = {
    realtime.MODEL_NOT_FOUND: (
        "pass --model with the model name the endpoint serves (vLLM --served-model-name)"
    ),
    realtime.MODEL_NOT_VALIDATED: "the server did not accept session.update; check --model",
    realtime.INVALID_AUDIO: (
        "the audio chunk was rejected; this is a client bug, please report it with the input file"
    ),
    realtime.INVALID_JSON: (
        "the server could not parse a message; check that nothing between client and vLLM "
        "rewrites it"
    ),
    realtime.INVALID_EVENT: (
        "the server rejected an event; check that the endpoint runs the expected vLLM version"
    ),
    realtime.UNKNOWN_EVENT: (
        "the server does not know an event type; check that the endpoint runs a vLLM realtime "
        "server"
    ),
    realtime.PROCESSING_ERROR: (
        "the model failed while transcribing; see the endpoint's CloudWatch logs"
    ),
    # Codes the container's bridge adds.
    realtime.UPSTREAM_CLOSED: (
        "the model server ended the session; retry, and see the endpoint's CloudWatch logs if "
        "it repeats"
    ),
    realtime.UPSTREAM_UNAVAILABLE: (
        "the model server is not reachable (still loading, or crashed); retry in a minute"
    ),
    realtime.SERVER_BUSY: (
        "every stream slot of the endpoint is in use; retry later or scale the endpoint out"
    ),
    realtime.IDLE_TIMEOUT: "the endpoint closed the stream because no audio arrived for a while",
    realtime.SESSION_LIMIT: (
        "the session reached the endpoint's audio limit; pass a --session-limit below it"
    ),
    realtime.SERVER_SHUTDOWN: (
        "the endpoint's container is stopping (deployment or scale-in); retry"
    ),
    realtime.RATE_LIMITED: (
        "audio was sent faster than the endpoint's AUDIO_RATE_LIMIT allows; this is a client bug"
    ),
    realtime.EVENT_TOO_LARGE: "an event was larger than the endpoint accepts; this is a client bug",
}
"""What to try for each error code: vLLM's (``realtime/connection.py``) and the bridge's."""


class RealtimeError(Exception):
    """The transcription cannot go on: a server ``error`` event, a stream failure, or a timeout.

    The message says what happened and what to try. ``code`` is the vLLM error code or the SageMaker
    error name.
    """

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


def decode_frame(frame: bytes, source: str) -> str:
    """Decode a binary frame as UTF-8 text (the realtime protocol is JSON text).

    Raises:
        RealtimeError: the frame is not UTF-8 (code ``bad_message``).
    """
    try:
        return frame.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RealtimeError(
            f"{source} sent a {len(frame)}-byte binary frame that is not UTF-8 text ({error}); the "
            "realtime protocol is JSON text: check what answers at that address",
            code="bad_message",
        ) from None


def session_update_event(model: str) -> str:
    """JSON of the ``session.update`` event selecting ``model``."""
    return json.dumps({"type": SESSION_UPDATE, "model": model})


def commit_event(final: bool = False) -> str:
    """JSON of ``input_audio_buffer.commit``; ``final=True`` marks the end of the audio."""
    return json.dumps({"type": COMMIT, "final": True} if final else {"type": COMMIT})


def append_event(pcm16: bytes) -> str:
    """JSON of ``input_audio_buffer.append`` carrying ``pcm16`` (16 kHz mono PCM16 bytes) as
    base64."""
    return json.dumps({"type": APPEND, "audio": base64.b64encode(pcm16).decode("ascii")})
