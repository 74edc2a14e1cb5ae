"""A real browser for the e2e tests of the local pages (``voicectl mic``, ``voicectl talk``):
Debian's Chromium, headless, driven by Playwright for Python with the system browser (never a
downloaded build), its fake microphone playing a WAV file; and a condition poller.

Skipped, with the reason, when Chromium or Playwright is missing (``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

BROWSER_ENV = "VOICECTL_TEST_CHROMIUM"
"""Path of the Chromium binary to drive; by default the first of :data:`CHROMIUM_NAMES` on PATH."""

CHROMIUM_NAMES = ("chromium", "chromium-browser")

CHROMIUM_FLAGS = (
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",  # no update checks, field trials, safe-browsing lists
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--use-fake-ui-for-media-stream",  # grant the microphone without a prompt
    "--use-fake-device-for-media-stream",
)
"""Every test browser's flags; :func:`chromium` adds the fake microphone's file."""


def chromium_path() -> str | None:
    return os.environ.get(BROWSER_ENV) or next(
        filter(None, map(shutil.which, CHROMIUM_NAMES)), None
    )


requires_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="Chromium is not installed (apt-get install chromium, as .ci/run does; or set "
    "VOICECTL_TEST_CHROMIUM)",
)
"""A module's ``pytestmark`` for tests that drive the browser."""


@contextlib.contextmanager
def chromium(microphone_wav: Path, extra_flags: Sequence[str] = ()) -> Iterator[Any]:
    """A headless Chromium whose fake microphone plays ``microphone_wav``, looped from the start of
    each capture."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright is not installed (make test installs requirements-mic.lock)",
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            args=[
                *CHROMIUM_FLAGS,
                *extra_flags,
                f"--use-file-for-fake-audio-capture={microphone_wav}",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def wait_until(predicate, timeout_s: float, step_s: float = 0.01):
    """Poll ``predicate`` until it returns a true value (returned) or ``timeout_s`` passes
    (AssertionError)."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"not true within {timeout_s} s"
        time.sleep(step_s)
    return value
