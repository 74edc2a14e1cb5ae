"""The actions :class:`~voice_client.realtime.machine.TranscriptionMachine` returns: each input
(a method call) gives a list of them for the caller to carry out in order (open, send, close, show,
replaying, failed, finished)."""

from __future__ import annotations

from dataclasses import dataclass, field

from voice_client.realtime.protocol import RealtimeError


@dataclass(frozen=True)
class OpenStream:
    """Open stream number ``stream`` (then report :meth:`TranscriptionMachine.opened` or
    ``open_failed``)."""

    stream: int


@dataclass(frozen=True)
class SendEvent:
    """Send ``text`` (one JSON event) on ``stream``; ``audio_s`` is the audio it carries, for
    pacing."""

    stream: int
    text: str
    audio_s: float = 0.0


@dataclass(frozen=True)
class CloseStream:
    """Close ``stream``; nothing more is expected from it."""

    stream: int


@dataclass(frozen=True)
class ShowDelta:
    """A ``transcription.delta`` text to show (``on_delta``)."""

    text: str


@dataclass(frozen=True)
class ShowGenerationText:
    """A generation's final text (``on_session_text``), and the audio it covers: seconds from the
    start of the source's audio, ``start_s`` to ``end_s`` (not compared: an action is its text)."""

    text: str
    start_s: float = field(default=0.0, compare=False)
    end_s: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class Replaying:
    """Audio is being resent on a new stream, for ``reason`` (``on_replay``)."""

    reason: str


@dataclass(frozen=True)
class Failed:
    """The transcription cannot go on."""

    error: RealtimeError


@dataclass(frozen=True)
class Finished:
    """Every generation is done and every stream closed: the result is ready
    (:meth:`TranscriptionMachine.result`)."""


Action = (
    OpenStream
    | SendEvent
    | CloseStream
    | ShowDelta
    | ShowGenerationText
    | Replaying
    | Failed
    | Finished
)
