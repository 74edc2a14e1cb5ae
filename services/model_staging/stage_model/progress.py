"""Transfer progress on a text stream: bytes done, rate and time left.

s3transfer reports progress from its worker threads (``on_progress(bytes_transferred=...)``,
negative when a part is retried), so :class:`Progress` is thread-safe. It prints at most one line
per ``interval_s`` to keep CodeBuild and CI logs readable; on a terminal the line is rewritten in
place.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from s3transfer.subscribers import BaseSubscriber

#: Seconds between two progress lines.
DEFAULT_INTERVAL_S = 2.0


def human_bytes(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def human_duration(seconds: float) -> str:
    """``3725`` -> ``"1h02m05s"``; ``65`` -> ``"1m05s"``."""
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Counts bytes sent against ``total`` bytes (those not skipped) and prints bytes, rate and time
    left.

    Args:
        total: bytes this run has to send, > 0 for a meaningful percentage.
        stream: where to print (default stderr).
        interval_s: minimum seconds between two lines.
        clock: monotonic clock in seconds (injectable for tests).
    """

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock=time.monotonic,
    ) -> None:
        self.total = total
        self.sent = 0
        self._stream = stream if stream is not None else sys.stderr
        self._interval_s = interval_s
        self._clock = clock
        self._start = clock()
        self._last_print = float("-inf")
        self._lock = threading.Lock()
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())

    def add(self, count: int) -> None:
        """Record ``count`` more bytes sent (negative when s3transfer rewinds a retried part)."""
        with self._lock:
            self.sent += count
            now = self._clock()
            if now - self._last_print >= self._interval_s:
                self._last_print = now
                self._print(now, end="\r" if self._tty else "\n")

    def line(self, now: float | None = None) -> str:
        """The current progress line, e.g. ``"1.2 GiB / 8.3 GiB (14.5%), 210.3 MiB/s, 34s
        left"``."""
        now = self._clock() if now is None else now
        elapsed = max(now - self._start, 1e-9)
        rate = self.sent / elapsed
        percent = 100.0 * self.sent / self.total if self.total else 100.0
        left = (self.total - self.sent) / rate if rate > 0 else float("inf")
        left_text = human_duration(left) if left != float("inf") else "?"
        return (
            f"{human_bytes(self.sent)} / {human_bytes(self.total)} ({percent:.1f}%), "
            f"{human_bytes(rate)}/s, {left_text} left"
        )

    def finish(self) -> None:
        """Print the final line (always)."""
        with self._lock:
            self._print(self._clock(), end="\n")

    def subscriber(self) -> BaseSubscriber:
        """An s3transfer subscriber feeding this counter."""
        return _ProgressSubscriber(self)

    def _print(self, now: float, end: str) -> None:
        print(f"  upload: {self.line(now)}", end=end, file=self._stream, flush=True)


class _ProgressSubscriber(BaseSubscriber):
    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def on_progress(self, future, bytes_transferred, **kwargs):  # s3transfer's callback signature
        self._progress.add(bytes_transferred)
