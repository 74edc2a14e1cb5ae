"""The transcript as it grows, one segment per generation, and how generations' texts are joined."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_TRANSCRIPT_CHARS = 16 * 1024 * 1024
"""Characters of transcript (deltas and done texts) one run keeps at most (16 Mi, some 290 hours of
speech at 150 words a minute); a server that sends more ends the run (code ``transcript_too_large``)
instead of filling memory."""


def join_transcripts(parts: Iterable[str]) -> str:
    """Join session transcripts, adding one space where neither side already has whitespace at the
    seam."""
    joined = ""
    for part in parts:
        if not part:
            continue
        if joined and not joined[-1].isspace() and not part[0].isspace():
            joined += " "
        joined += part
    return joined


class Transcript:
    """The transcript as it grows: one segment per generation, in audio order.

    :func:`transcribe_stream` updates it as events arrive, so a caller that keeps a reference can
    show or print the text received so far even when the transcription fails or is interrupted. A
    segment holds the generation's deltas, then its ``transcription.done`` text; a generation resent
    after a cut has its segment discarded (the resent audio is transcribed again).
    """

    def __init__(self) -> None:
        self._segments: list[_Segment] = []
        self.chars = 0
        """Characters held: every kept segment's deltas and done text (bounded by
        :data:`MAX_TRANSCRIPT_CHARS`)."""

    @property
    def text(self) -> str:
        """Every segment's text (done text, else the deltas so far) joined with
        :func:`join_transcripts`."""
        return join_transcripts(segment.text for segment in self._segments)

    @property
    def finished(self) -> list[str]:
        """The texts of the generations that are done, in order."""
        return [segment.text for segment in self._segments if segment.done_text is not None]

    def open_segment(self) -> _Segment:
        """Add an empty segment at the end (a new generation) and return it."""
        segment = _Segment()
        self._segments.append(segment)
        return segment

    def discard(self, segment: _Segment) -> None:
        """Drop ``segment`` (its audio is being resent)."""
        with contextlib.suppress(ValueError):
            self._segments.remove(segment)
            self.chars -= segment.chars

    def add_delta(self, segment: _Segment, delta: str) -> None:
        """Append ``delta`` to ``segment``."""
        segment.deltas.append(delta)
        segment.chars += len(delta)
        self.chars += len(delta)

    def set_done(self, segment: _Segment, text: str) -> None:
        """Set ``segment``'s done text; its deltas, replaced by it, are no longer kept."""
        self.chars -= segment.chars
        segment.done_text, segment.deltas = text, [text]
        segment.chars = len(text)
        self.chars += segment.chars


@dataclass
class _Segment:
    deltas: list[str] = field(default_factory=list)
    done_text: str | None = None
    chars: int = 0

    @property
    def text(self) -> str:
        return self.done_text if self.done_text is not None else "".join(self.deltas)
