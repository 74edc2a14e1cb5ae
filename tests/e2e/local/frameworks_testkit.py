"""Helpers of the framework tests (Pipecat and LiveKit) against the local runtime."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], limit_s: float = 10.0) -> bool:
    """Whether ``condition()`` holds within ``limit_s`` seconds (a bound on waiting, not a measured time)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
