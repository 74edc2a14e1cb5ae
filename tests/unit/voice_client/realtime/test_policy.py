"""voice_client.realtime.policy: the measures of a chunk the machine decides on, and the numbers
held against what each one's docstring says it stays below."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.realtime import IDLE_TIMEOUT_S
from voice_client.audio import CHUNK_BYTES
from voice_client.realtime.policy import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_SESSION_LIMIT_S,
    GENERATION_TARGET_S,
    MIN_MAX_STREAM_S,
    QUIET_RMS,
    STREAM_WINDOW_S,
    chunk_rms,
    chunk_seconds,
)


def test_a_chunk_lasts_its_samples_at_16_khz():
    assert chunk_seconds(bytes(CHUNK_BYTES)) == pytest.approx(0.128)
    assert chunk_seconds(bytes(32000)) == 1.0
    assert chunk_seconds(b"") == 0.0


def test_a_chunks_rms_is_on_full_scale():
    assert chunk_rms(b"") == 0.0
    assert chunk_rms(bytes(CHUNK_BYTES)) == 0.0
    assert chunk_rms(np.full(2048, 8192, dtype="<i2").tobytes()) == pytest.approx(0.25)
    alternating = np.tile(np.array([16384, -16384], dtype="<i2"), 1024).tobytes()
    assert chunk_rms(alternating) == pytest.approx(0.5)


def test_quiet_is_minus_40_dbfs():
    at_the_line = np.full(2048, round(QUIET_RMS * 32768), dtype="<i2").tobytes()
    assert chunk_rms(at_the_line) == pytest.approx(0.01, abs=1e-4)
    assert 20 * np.log10(QUIET_RMS) == pytest.approx(-40.0)


def test_the_limits_stay_below_what_they_guard():
    assert DEFAULT_SESSION_LIMIT_S < 45000 * 0.08  # the model card's 1 h context
    assert DEFAULT_MAX_STREAM_S < 30 * 60  # the 30-minute stream cap a vendor documents
    assert STREAM_WINDOW_S < IDLE_TIMEOUT_S  # the next stream waits idle meanwhile
    assert MIN_MAX_STREAM_S < STREAM_WINDOW_S < DEFAULT_MAX_STREAM_S
    assert GENERATION_TARGET_S < DEFAULT_SESSION_LIMIT_S
