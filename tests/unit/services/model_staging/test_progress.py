"""stage_model.progress: the progress line."""

from __future__ import annotations

import io

from model_staging.stage_model.progress import Progress


def test_progress_line_shows_bytes_rate_and_time_left():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(
        total=100 * 1024 * 1024, stream=stream, interval_s=2.0, clock=lambda: now[0]
    )
    now[0] = 10.0
    progress.add(25 * 1024 * 1024)
    assert stream.getvalue() == "  upload: 25.0 MiB / 100.0 MiB (25.0%), 2.5 MiB/s, 30s left\n"
    now[0] = 11.0
    progress.add(1024 * 1024)  # within the interval: no new line
    assert stream.getvalue().count("\n") == 1
