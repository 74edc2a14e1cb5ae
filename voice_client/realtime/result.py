"""What one transcription reports when it ends (:class:`TranscriptionResult`: the transcript and
its figures), as ``voicectl transcribe --json`` and the mic page print it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voice_client.realtime.policy import DEFAULT_SESSION_LIMIT_S


@dataclass
class TranscriptionResult:
    """Outcome of one transcription.

    Attributes:
        transcript: the joined final transcript.
        audio_seconds_sent: seconds of distinct audio delivered (resent audio counted once).
        time_to_first_delta_s: seconds from the first audio append to the first non-empty delta
            (None if none came).
        elapsed_s: seconds from the first audio append to the last ``transcription.done``.
        sessions: number of streams opened (moves, reopens and retries included).
        reopens: number of streams reopened after a cut.
        replayed_audio_s: seconds of audio sent a second time (after a cut or a ``session_limit``).
        session_limit_s: the generation limit in force at the end (lower than requested when the
            endpoint's is lower).
        rollovers: number of moves to a new stream before ``max_stream_s``.
        generations: number of generations transcribed (``transcription.done`` received).
    """

    transcript: str
    audio_seconds_sent: float
    time_to_first_delta_s: float | None
    elapsed_s: float
    sessions: int
    reopens: int
    replayed_audio_s: float = 0.0
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S
    rollovers: int = 0
    generations: int = 0

    @property
    def real_time_factor(self) -> float | None:
        """Elapsed wall time over audio duration (1.0 = as fast as real time; below 1.0 =
        faster)."""
        return self.elapsed_s / self.audio_seconds_sent if self.audio_seconds_sent else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures (seconds rounded to milliseconds)."""

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        return {
            "transcript": self.transcript,
            "time_to_first_delta_s": ms(self.time_to_first_delta_s),
            "real_time_factor": ms(self.real_time_factor),
            "audio_seconds_sent": ms(self.audio_seconds_sent),
            "elapsed_s": ms(self.elapsed_s),
            "sessions": self.sessions,
            "reopens": self.reopens,
            "rollovers": self.rollovers,
            "generations": self.generations,
            "replayed_audio_s": ms(self.replayed_audio_s),
            "session_limit_s": ms(self.session_limit_s),
        }
