"""vLLM's realtime protocol as the client speaks it: event names, error codes, the events the client
sends, and the bounds on what it accepts.

Protocol (vLLM ``vllm/entrypoints/speech_to_text/realtime/connection.py`` and ``protocol.py``; see
design.md): the server sends ``session.created`` on accept; the client sends ``session.update
{model}`` (required before any commit), an ``input_audio_buffer.commit`` that starts a generation,
``input_audio_buffer.append {audio}`` events carrying base64 PCM16 at 16 kHz mono, and a final
``input_audio_buffer.commit {final: true}`` that ends the generation's audio. The server answers
with ``transcription.delta {delta}`` events and one ``transcription.done {text, usage}`` per
generation. Errors arrive in-band as ``error {error, code}`` with, from the container's bridge,
machine-readable fields (``session_limit``: ``limit_s``, ``audio_s``); the client reads those
fields, never the English message. The event names, error codes and fields the client relies on are
listed here (``CLIENT_EVENT_TYPES``, ``SERVER_EVENT_TYPES``, ``VLLM_ERROR_CODES``,
``BRIDGE_ERROR_CODES``, ``ERROR_FIELDS_READ``); a test compares them with the bridge's
(``container/bridge/protocol.py``).
"""

from __future__ import annotations

import base64
import json

from constructs_lib.artifacts.model_staging_build.stage_model.constants import DEFAULT_REPO_ID
from voicectl.clients.bounded_json import DEFAULT_MAX_DEPTH

DEFAULT_MODEL = DEFAULT_REPO_ID
"""Model name sent in ``session.update``; vLLM accepts only its served model name (error
``model_not_found``), which the Voxtral stack sets to the model hub repository id
(``voxtral.model_id``, by default this one)."""

# ---- the protocol contract (compared with container/bridge/protocol.py by
# tests/bridge/test_protocol.py)
SESSION_UPDATE = "session.update"
APPEND = "input_audio_buffer.append"
COMMIT = "input_audio_buffer.commit"
SESSION_CREATED = "session.created"
TRANSCRIPTION_DELTA = "transcription.delta"
TRANSCRIPTION_DONE = "transcription.done"
ERROR = "error"
CLIENT_EVENT_TYPES = frozenset({SESSION_UPDATE, APPEND, COMMIT})
"""Every event type the client sends."""
SERVER_EVENT_TYPES = frozenset({SESSION_CREATED, TRANSCRIPTION_DELTA, TRANSCRIPTION_DONE, ERROR})
"""Every event type the client understands from the server."""

VLLM_ERROR_CODES = frozenset(
    {
        "invalid_json",
        "invalid_event",
        "model_not_found",
        "invalid_audio",
        "model_not_validated",
        "unknown_event",
        "processing_error",
    }
)
"""vLLM's error codes (``realtime/connection.py``)."""
BRIDGE_ERROR_CODES = frozenset(
    {
        "upstream_closed",
        "upstream_unavailable",
        "server_busy",
        "idle_timeout",
        "session_limit",
        "server_shutdown",
        "rate_limited",
        "event_too_large",
    }
)
"""The container's bridge's own error codes (``container/bridge/protocol.py``)."""
SESSION_LIMIT_CODE = "session_limit"
SERVER_BUSY_CODE = "server_busy"
IDLE_TIMEOUT_CODE = "idle_timeout"
ERROR_FIELDS_READ: dict[str, tuple[str, ...]] = {SESSION_LIMIT_CODE: ("limit_s", "audio_s")}
"""The machine-readable fields of the bridge's error events this client reads (seconds of audio)."""

REOPEN_CODES = frozenset(
    {"upstream_closed", "server_shutdown", "InternalStreamFailure", "ModelStreamError"}
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
    "model_not_found": "pass --model with the model name the endpoint serves (vLLM "
    "--served-model-name)",
    "model_not_validated": "the server did not accept session.update; check --model",
    "invalid_audio": "the audio chunk was rejected; this is a client bug, please report it with "
    "the input file",
    "invalid_json": "the server could not parse a message; check that nothing between client and "
    "vLLM rewrites it",
    "invalid_event": "the server rejected an event; check that the endpoint runs the expected "
    "vLLM version",
    "unknown_event": "the server does not know an event type; check that the endpoint runs a "
    "vLLM realtime server",
    "processing_error": "the model failed while transcribing; see the endpoint's CloudWatch logs",
    # Codes the container's bridge adds (container/bridge/protocol.py).
    "upstream_closed": "the model server ended the session; retry, and see the endpoint's "
    "CloudWatch logs if it repeats",
    "upstream_unavailable": "the model server is not reachable (still loading, or crashed); "
    "retry in a minute",
    "server_busy": "every stream slot of the endpoint is in use; retry later or scale the "
    "endpoint out",
    "idle_timeout": "the endpoint closed the stream because no audio arrived for a while",
    "session_limit": "the session reached the endpoint's audio limit; pass a --session-limit "
    "below it",
    "server_shutdown": "the endpoint's container is stopping (deployment or scale-in); retry",
    "rate_limited": "audio was sent faster than the endpoint's AUDIO_RATE_LIMIT allows; this is "
    "a client bug",
    "event_too_large": "an event was larger than the endpoint accepts; this is a client bug",
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
    return json.dumps({"type": "session.update", "model": model})


def commit_event(final: bool = False) -> str:
    """JSON of ``input_audio_buffer.commit``; ``final=True`` marks the end of the audio."""
    return json.dumps(
        {"type": "input_audio_buffer.commit", "final": True}
        if final
        else {"type": "input_audio_buffer.commit"}
    )


def append_event(pcm16: bytes) -> str:
    """JSON of ``input_audio_buffer.append`` carrying ``pcm16`` (16 kHz mono PCM16 bytes) as
    base64."""
    return json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm16).decode("ascii")}
    )
