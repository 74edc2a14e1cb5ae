"""config/models.py: the facts of what the app deploys (Voxtral behind the bridge, the Sonic model
package). The streams that fit a GPU's KV cache: test_capacity_plan.py."""

from __future__ import annotations

from config.models import (
    VOXTRAL_DEFAULT_TRANSCRIPTION_DELAY_MS,
    VOXTRAL_TRANSCRIPTION_DELAYS_MS,
    first_delta_floor_ms,
)


def test_the_transcription_delays_are_the_model_cards():
    """Every multiple of 80 ms from 80 to 1200, and 2400; the checkpoint's 480 among them."""
    assert VOXTRAL_TRANSCRIPTION_DELAYS_MS == (
        80,
        160,
        240,
        320,
        400,
        480,
        560,
        640,
        720,
        800,
        880,
        960,
        1040,
        1120,
        1200,
        2400,
    )
    assert VOXTRAL_DEFAULT_TRANSCRIPTION_DELAY_MS in VOXTRAL_TRANSCRIPTION_DELAYS_MS


def test_the_first_delta_waits_for_the_delay_a_token_and_the_look_ahead():
    """What the real server showed (tests/vllm): with whole 80 ms appends, the first delta after
    the 4th, 8th and 32nd token at 160, 480 and 2400 ms, the first whole token count whose audio
    passes the floor."""
    assert [first_delta_floor_ms(delay) for delay in (160, 480, 2400)] == [242.5, 562.5, 2482.5]
    assert [-(-first_delta_floor_ms(delay) // 80) for delay in (160, 480, 2400)] == [4, 8, 32]
