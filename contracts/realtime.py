"""The realtime stream between a client and the bridge: where it is served, its events, its error
codes and the fields they carry, and the limits a stream is held to (which the clients pace
against).

The events and vLLM's error codes are vLLM's realtime protocol (vllm-project/vllm
``vllm/entrypoints/speech_to_text/realtime/protocol.py``, the event models, and
``.../realtime/connection.py``, ``RealtimeConnection.handle_event``: which code answers which
mistake). Errors are in-band events ``{"type": "error", "error": <message>, "code": <code>}`` and
the socket stays open after them. The bridge adds its own codes in the same shape
(:data:`BRIDGE_ERROR_CODES`), each with the machine-readable fields of :data:`ERROR_FIELDS`, so that
no client has to read the English message.
"""

from __future__ import annotations

from typing import Final

# ---- where the stream is served (the SageMaker container contract the bridge implements)
# ------------------------
#: Port SageMaker sends ``/ping`` and the bidirectional stream to (SageMaker developer guide, "Use
#: your own inference code with hosting services":
#: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
CONTAINER_PORT: Final = 8080
#: The WebSocket path of the bidirectional stream (SageMaker's, and the ECS load balancer's route to
#: the bridge).
STREAM_PATH: Final = "/invocations-bidirectional-stream"
#: The health path: 200 once the container can serve.
PING_PATH: Final = "/ping"

# ---- events (vllm realtime/protocol.py)
# --------------------------------------------------------------------------- Client to server:
SESSION_UPDATE: Final = "session.update"
APPEND: Final = "input_audio_buffer.append"
COMMIT: Final = "input_audio_buffer.commit"
# Server to client:
SESSION_CREATED: Final = "session.created"
TRANSCRIPTION_DELTA: Final = "transcription.delta"
TRANSCRIPTION_DONE: Final = "transcription.done"
ERROR: Final = "error"
#: Every event type a client sends.
CLIENT_EVENT_TYPES: Final = frozenset({SESSION_UPDATE, APPEND, COMMIT})
#: Every event type the server sends, vLLM's and the bridge's (the bridge sends only ``error``).
SERVER_EVENT_TYPES: Final = frozenset(
    {SESSION_CREATED, TRANSCRIPTION_DELTA, TRANSCRIPTION_DONE, ERROR}
)

#: Audio format of ``input_audio_buffer.append`` (vllm realtime/protocol.py: "base64-encoded PCM16 @
#: 16kHz"), mono.
SAMPLE_RATE_HZ: Final = 16_000
#: Bytes per sample of signed 16-bit PCM.
BYTES_PER_SAMPLE: Final = 2
#: PCM16 bytes in one second of audio.
PCM_BYTES_PER_SECOND: Final = SAMPLE_RATE_HZ * BYTES_PER_SAMPLE

# ---- error codes
# --------------------------------------------------------------------------------------------------
# vLLM's own (realtime/connection.py); the bridge answers some of these itself for frames it
# rejects, with the code vLLM would give for the same frame.
INVALID_JSON: Final = "invalid_json"
INVALID_EVENT: Final = "invalid_event"
MODEL_NOT_FOUND: Final = "model_not_found"
INVALID_AUDIO: Final = "invalid_audio"
MODEL_NOT_VALIDATED: Final = "model_not_validated"
UNKNOWN_EVENT: Final = "unknown_event"
PROCESSING_ERROR: Final = "processing_error"
#: Every code vLLM's realtime endpoint sends.
VLLM_ERROR_CODES: Final = frozenset(
    {
        INVALID_JSON,
        INVALID_EVENT,
        MODEL_NOT_FOUND,
        INVALID_AUDIO,
        MODEL_NOT_VALIDATED,
        UNKNOWN_EVENT,
        PROCESSING_ERROR,
    }
)
# The bridge's, same event shape.
#: vLLM closed or dropped the session mid-stream.
UPSTREAM_CLOSED: Final = "upstream_closed"
#: vLLM refused or did not answer the connection.
UPSTREAM_UNAVAILABLE: Final = "upstream_unavailable"
#: MAX_STREAMS sessions are already open.
SERVER_BUSY: Final = "server_busy"
#: The client sent nothing for IDLE_TIMEOUT_S.
IDLE_TIMEOUT: Final = "idle_timeout"
#: The generation's audio approaches vLLM's max_model_len.
SESSION_LIMIT: Final = "session_limit"
#: The container is stopping and DRAIN_S has run out.
SERVER_SHUTDOWN: Final = "server_shutdown"
#: The stream sent audio faster than AUDIO_RATE_LIMIT x real time.
RATE_LIMITED: Final = "rate_limited"
#: An event other than a canonical append, above the bridge's parse limit.
EVENT_TOO_LARGE: Final = "event_too_large"
#: Every code the bridge itself adds.
BRIDGE_ERROR_CODES: Final = frozenset(
    {
        UPSTREAM_CLOSED,
        UPSTREAM_UNAVAILABLE,
        SERVER_BUSY,
        IDLE_TIMEOUT,
        SESSION_LIMIT,
        SERVER_SHUTDOWN,
        RATE_LIMITED,
        EVENT_TOO_LARGE,
    }
)
#: The machine-readable fields each of the bridge's error events carries besides ``error`` and
#: ``code`` (numbers; seconds are audio seconds for ``limit_s``/``audio_s``, wall seconds for
#: ``idle_timeout_s``). The bridge refuses to send any other set, so this table is what clients
#: read.
ERROR_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    UPSTREAM_CLOSED: ("upstream_close_code",),
    UPSTREAM_UNAVAILABLE: (),
    SERVER_BUSY: ("max_streams",),
    IDLE_TIMEOUT: ("idle_timeout_s",),
    SESSION_LIMIT: ("limit_s", "audio_s"),
    SERVER_SHUTDOWN: (),
    RATE_LIMITED: ("limit_x", "burst_s"),
    EVENT_TOO_LARGE: ("max_bytes", "bytes"),
    INVALID_JSON: (),
    INVALID_AUDIO: (),
    UNKNOWN_EVENT: (),
    PROCESSING_ERROR: (),
}

# ---- the limits a stream is held to (the bridge's defaults; its environment may change them)
# ----------------------
#: Seconds a client may stay silent before its session is ended (``idle_timeout``; SageMaker's own
#: idle limit is longer). Clients that hold a stream open in advance send within it.
IDLE_TIMEOUT_S: Final = 60.0
#: Largest WebSocket frame accepted, bytes (4 MiB: over two minutes of base64 PCM16 in one append).
#: Larger frames close the connection with 1009.
MAX_FRAME_BYTES: Final = 4 * 1024 * 1024
#: Audio a stream may send, as a multiple of real time averaged over time; above it the stream is
#: ended with ``rate_limited``, so that one client cannot make vLLM queue audio faster than any
#: model transcribes it (a hostile client on loopback relayed ~26,000 appends per second before this
#: limit).
AUDIO_RATE_LIMIT_X: Final = 32.0
#: Audio seconds a stream may send at once above the rate limit: a short file sent unpaced, the
#: replay of a cut generation, and one append of the largest frame (4 MiB of base64 holds 3 MiB of
#: PCM16: 98 s) fit in it.
AUDIO_BURST_S: Final = 120.0

# ---- how the clients pace against those limits
# ----------------------------------------------------------------------
#: Audio a client sends per stream at most, as a multiple of real time (after
#: :data:`CLIENT_BURST_S`): half the stream's rate limit, so that unpaced files and replays are
#: never refused.
CLIENT_SEND_SPEED_X: Final = AUDIO_RATE_LIMIT_X / 2
#: Audio seconds a client sends at once before :data:`CLIENT_SEND_SPEED_X` applies: half the
#: stream's burst.
CLIENT_BURST_S: Final = AUDIO_BURST_S / 2
