"""Fixtures of the bridge tests: run a scenario on a fresh event loop; fail a test that logged an
ERROR."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from bridge import legs, server
from tests.bridge.bridge_testkit import BEYOND_LIVENESS_S, bounded_runner

#: Upper bound on one scenario, seconds (each takes well under a second except the 500-cycle test).
SCENARIO_TIMEOUT_S = 30.0


@pytest.fixture
def run() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a coroutine to completion on a new event loop, bounded by SCENARIO_TIMEOUT_S."""
    return bounded_runner(SCENARIO_TIMEOUT_S)


@pytest.fixture(autouse=True)
def no_error_logs(caplog: pytest.LogCaptureFixture):
    """An ordinary disconnect must not log an ERROR or a traceback: fail any test that did."""
    caplog.set_level(logging.INFO)
    yield
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, "unexpected ERROR/traceback log lines: " + "; ".join(
        f"{r.name}: {r.getMessage()}" for r in bad
    )


@pytest.fixture
def answer_drop_beyond_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge's drop of a connection ANSWERED_LINGER_S (2 s) after a plain-HTTP answer, set past
    any liveness wait: a read of the answer then ends only because the bridge half-closed after
    answering, as it must."""
    monkeypatch.setattr(legs, "ANSWERED_LINGER_S", BEYOND_LIVENESS_S)


@pytest.fixture
def open_timeout_beyond_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge's UPSTREAM_OPEN_TIMEOUT_S (5 s), which ends a connect to vLLM (1011,
    upstream_unavailable), set past any liveness wait: what a test then sees within the wait came
    from what it did (a refusal, the client leaving)."""
    monkeypatch.setattr(server, "UPSTREAM_OPEN_TIMEOUT_S", BEYOND_LIVENESS_S)
