"""The transcription shared by ``transcribe``, ``mic`` and the Connect consumer: vLLM's realtime
protocol over any text transport, with long audio, stream moves and cuts handled inside.

One concern per module:

- :mod:`~voice_client.realtime.protocol`: the wire vocabulary (event names, error codes and the
  fields read, the events the client sends, :class:`RealtimeError`, the bounds on what the client
  accepts).
- :mod:`~voice_client.realtime.transport`: what a stream must offer
  (:class:`RealtimeTransport`).
- :mod:`~voice_client.realtime.transcript`: the transcript as it grows (:class:`Transcript`).
- :mod:`~voice_client.realtime.machine`: the policy as a state machine with no I/O
  (:class:`TranscriptionMachine`: generations, moves to a new stream, recovery from cuts);
  :mod:`~voice_client.realtime.policy` its numbers, :mod:`~voice_client.realtime.actions` the
  actions it returns, :mod:`~voice_client.realtime.result` what a transcription reports
  (:class:`TranscriptionResult`).
- :mod:`~voice_client.realtime.driver`: :func:`transcribe_stream`, which runs the machine with
  real transports and paces the audio it sends.
- :mod:`~voice_client.realtime.websocket` and :mod:`~voice_client.realtime.auth`: the plain
  WebSocket transport (``--url``) and the bearer token a bridge on ECS requires. The SageMaker
  transport is :mod:`voice_client.sagemaker_stream`.

The names below are the package's public API.
"""

from voice_client.realtime.actions import (
    Action,
    CloseStream,
    Failed,
    Finished,
    OpenStream,
    Replaying,
    SendEvent,
    ShowDelta,
    ShowGenerationText,
)
from voice_client.realtime.auth import HTTP_UNAUTHORIZED, BearerToken, unauthorized_message
from voice_client.realtime.driver import (
    MAX_SEND_SPEED,
    SEND_BURST_S,
    SETTLE_AFTER_CLOSE_S,
    paced_chunks,
    send_delay_s,
    transcribe_stream,
)
from voice_client.realtime.machine import TranscriptionMachine
from voice_client.realtime.policy import (
    BUSY_RETRY_DELAYS_S,
    DEFAULT_MAX_STREAM_S,
    DEFAULT_SESSION_LIMIT_S,
    DONE_TIMEOUT_S,
    GENERATION_TARGET_S,
    MAX_BUFFERED_S,
    MAX_LIMIT_REPLAYS,
    MAX_REOPENS,
    MIN_MAX_STREAM_S,
    MIN_SESSION_LIMIT_S,
    QUIET_FRACTION,
    QUIET_RMS,
    ROLLOVER_WINDOW_MAX_FRACTION,
    ROLLOVER_WINDOW_S,
    SESSION_LIMIT_MARGIN,
    STREAM_WINDOW_S,
    chunk_rms,
    chunk_seconds,
)
from voice_client.realtime.protocol import (
    APPEND,
    BRIDGE_ERROR_CODES,
    CLIENT_EVENT_TYPES,
    COMMIT,
    DEFAULT_MODEL,
    ERROR,
    ERROR_FIELDS_READ,
    ERROR_HINTS,
    IDLE_TIMEOUT_CODE,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    REOPEN_CODES,
    SERVER_BUSY_CODE,
    SERVER_EVENT_TYPES,
    SESSION_CREATED,
    SESSION_LIMIT_CODE,
    SESSION_UPDATE,
    TRANSCRIPTION_DELTA,
    TRANSCRIPTION_DONE,
    VLLM_ERROR_CODES,
    RealtimeError,
    append_event,
    commit_event,
    decode_frame,
    session_update_event,
)
from voice_client.realtime.result import TranscriptionResult
from voice_client.realtime.transcript import MAX_TRANSCRIPT_CHARS, Transcript, join_transcripts
from voice_client.realtime.transport import RealtimeTransport, TransportClosed, TransportOpener
from voice_client.realtime.websocket import WebSocketTransport

__all__ = [  # noqa: RUF022 (grouped by module, as the imports)
    # protocol
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
    # transport, transcript
    "RealtimeTransport",
    "TransportClosed",
    "TransportOpener",
    "MAX_TRANSCRIPT_CHARS",
    "Transcript",
    "join_transcripts",
    # machine, its numbers, actions and result
    "BUSY_RETRY_DELAYS_S",
    "DEFAULT_MAX_STREAM_S",
    "DEFAULT_SESSION_LIMIT_S",
    "DONE_TIMEOUT_S",
    "GENERATION_TARGET_S",
    "MAX_BUFFERED_S",
    "MAX_LIMIT_REPLAYS",
    "MAX_REOPENS",
    "MIN_MAX_STREAM_S",
    "MIN_SESSION_LIMIT_S",
    "QUIET_FRACTION",
    "QUIET_RMS",
    "ROLLOVER_WINDOW_MAX_FRACTION",
    "ROLLOVER_WINDOW_S",
    "SESSION_LIMIT_MARGIN",
    "STREAM_WINDOW_S",
    "Action",
    "CloseStream",
    "Failed",
    "Finished",
    "OpenStream",
    "Replaying",
    "SendEvent",
    "ShowDelta",
    "ShowGenerationText",
    "TranscriptionMachine",
    "TranscriptionResult",
    "chunk_rms",
    "chunk_seconds",
    # driver, transports
    "MAX_SEND_SPEED",
    "SEND_BURST_S",
    "SETTLE_AFTER_CLOSE_S",
    "paced_chunks",
    "send_delay_s",
    "transcribe_stream",
    "HTTP_UNAUTHORIZED",
    "BearerToken",
    "unauthorized_message",
    "WebSocketTransport",
]
