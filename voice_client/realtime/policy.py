"""The numbers of the transcription's policy, which
:class:`~voice_client.realtime.machine.TranscriptionMachine` runs: how much audio a generation and
how long a stream may hold, what counts as a quiet chunk to end one at, and how long and how often
the client waits and retries; and the two measures of a PCM16 chunk the machine decides on (its
length, its loudness).
"""

from __future__ import annotations

import numpy as np

from voice_client.audio import PCM16_BYTES_PER_SAMPLE, TARGET_SAMPLE_RATE_HZ

DEFAULT_SESSION_LIMIT_S = 3000.0
"""Audio seconds per generation at most: 50 min, below the 1 h (45000 tokens x 80 ms) context of the
model card's example ``--max-model-len``; the bridge's ``session_limit`` lowers it when the endpoint
serves a shorter context."""

DEFAULT_MAX_STREAM_S = 1500.0
"""Seconds a stream is used before the client moves to a new one: 25 min, below the 30 min a vendor
documents as SageMaker's cap on one bidirectional stream (unconfirmed: AWS documentation found so
far is silent)."""

MIN_MAX_STREAM_S = 10.0
"""Shortest ``max_stream_s``: a stream must live long enough to open the next one."""

STREAM_WINDOW_S = 30.0
"""Seconds before ``max_stream_s`` from which the next stream is open and the move waits for a quiet
chunk (kept well below the stream's idle timeout, :data:`contracts.realtime.IDLE_TIMEOUT_S`, 60 s,
as the next stream waits idle meanwhile)."""

GENERATION_TARGET_S = 30.0
"""Audio seconds after which a generation ends at the first quiet chunk: the most audio a cut
usually resends."""

ROLLOVER_WINDOW_S = 10.0
"""Seconds before the generation limit in which the client ends the generation at the first quiet
chunk."""

ROLLOVER_WINDOW_MAX_FRACTION = 0.2
"""The windows never exceed this fraction of their limit (short limits keep long generations and
streams)."""

QUIET_RMS = 0.01
"""RMS (full scale = 1.0, i.e. -40 dBFS) under which a 128 ms chunk counts as quiet."""

QUIET_FRACTION = 0.25
"""A chunk also counts as quiet below this fraction of its generation's mean RMS (speech over a
noise floor)."""

DONE_TIMEOUT_S = 60.0
"""Seconds to wait for ``transcription.done`` after a final commit before giving up."""

DONE_TIMEOUT_FAIL = "fail"
"""``on_done_timeout``: a missing ``transcription.done`` fails the transcription (a file: the caller
retries)."""

DONE_TIMEOUT_GO_ON = "go_on"
"""``on_done_timeout``: a missing ``transcription.done`` gives up on that stream only. vLLM's
realtime server can leave a final commit unanswered while every delta was sent
(vllm-project/vllm#33962: the generator waits for audio forever), so the deltas are the generation's
text; resending the audio would hang the same way."""

MAX_REOPENS = 1
"""Streams reopened after a cut with no ``transcription.done`` in between before the client gives
up."""

SESSION_LIMIT_MARGIN = 0.9
"""Fraction of the endpoint's limit the client uses after a ``session_limit`` error (room for audio
in flight)."""

MAX_LIMIT_REPLAYS = 3
"""Times a generation is resent under a lowered limit after ``session_limit`` errors before giving
up."""

MIN_SESSION_LIMIT_S = 1.0
"""Smallest session limit in seconds: a generation must hold several 128 ms chunks to be worth
one."""

BUSY_RETRY_DELAYS_S = (1.0, 2.0, 4.0)
"""Pauses before opening a stream again after ``server_busy`` (every slot of the instance in use);
then give up."""

MAX_BUFFERED_S = 30.0
"""Audio seconds held unsent (a stream opening, a generation finishing) before the client stops
reading the source."""


def chunk_seconds(pcm16: bytes) -> float:
    """Duration of 16 kHz mono PCM16 bytes in seconds."""
    return len(pcm16) / PCM16_BYTES_PER_SAMPLE / TARGET_SAMPLE_RATE_HZ


def chunk_rms(pcm16: bytes) -> float:
    """Root mean square of PCM16 bytes with full scale = 1.0 (0.0 for an empty chunk)."""
    samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
    return float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0
