"""container/bridge/settings.py: the bridge's settings from its environment (SM_VLLM_* fallbacks,
defaults), and a bad value named with its variable and rule. (The settings of one feature sit with
its tests: the token in test_auth.py, task protection in test_task_protection.py.)"""

from __future__ import annotations

import pytest

from bridge.settings import Settings, SettingsError


def test_settings_defaults_and_sm_vllm_fallbacks():
    settings = Settings.from_env(
        {
            "SM_VLLM_MAX_NUM_SEQS": "32",
            "SM_VLLM_MAX_MODEL_LEN": "4000",
            "SM_VLLM_SERVED_MODEL_NAME": '["voxtral", "v"]',
        }
    )
    assert (settings.port, settings.vllm_port, settings.max_streams) == (8080, 8081, 32)
    assert settings.served_model == "voxtral"
    # (4000 - 49 tokens of the stream format) x 0.9 / 12.5 tokens per s = 284.472 s of audio, x
    # 16000 x 2 bytes.
    assert settings.session_audio_limit_bytes == 4_551_552 * 2
    assert Settings.from_env({"MAX_STREAMS": "7", "SM_VLLM_MAX_NUM_SEQS": "32"}).max_streams == 7
    assert Settings.from_env({"SM_VLLM_MODEL": "/opt/ml/model"}).served_model == "/opt/ml/model"
    assert Settings.from_env({}).max_streams == 256
    assert Settings.from_env({}).session_audio_limit_bytes is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_STREAMS": "many"}, "MAX_STREAMS='many' is not an integer"),
        ({"MAX_STREAMS": "0"}, "MAX_STREAMS='0' must be at least 1"),
        ({"IDLE_TIMEOUT_S": "soon"}, "IDLE_TIMEOUT_S='soon' is not a number"),
        ({"MAX_FRAME_BYTES": "1024"}, "MAX_FRAME_BYTES='1024' must be at least 4194304"),
        ({"SESSION_LIMIT_FRACTION": "1.5"}, "SESSION_LIMIT_FRACTION=1.5 must be at most 1"),
    ],
)
def test_bad_settings_name_the_variable_and_the_rule(env, message):
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    assert str(info.value) == message


def test_the_session_limit_counts_the_transcription_delays_tokens():
    """vLLM's prompt holds one token per 80 ms of delay (tests/vllm: prompt_tokens 33 + delay
    tokens), so a longer delay leaves less of max_model_len for audio; unset is the checkpoint's
    480 ms (49 tokens, as before)."""
    unset = Settings.from_env({"SM_VLLM_MAX_MODEL_LEN": "4000"})
    at_480 = Settings.from_env({"SM_VLLM_MAX_MODEL_LEN": "4000", "TRANSCRIPTION_DELAY_MS": "480"})
    at_2400 = Settings.from_env({"SM_VLLM_MAX_MODEL_LEN": "4000", "TRANSCRIPTION_DELAY_MS": "2400"})
    at_80 = Settings.from_env({"SM_VLLM_MAX_MODEL_LEN": "4000", "TRANSCRIPTION_DELAY_MS": " 80 "})
    delays = [s.transcription_delay_ms for s in (unset, at_2400, at_80)]
    assert delays == [None, 2400, 80]
    assert [s.stream_overhead_tokens for s in (unset, at_480, at_2400, at_80)] == [49, 49, 73, 44]
    assert unset.session_audio_limit_bytes == at_480.session_audio_limit_bytes == 4_551_552 * 2
    # (4000 - 73) x 0.9 / 12.5 = 282.744 s of audio at 2400 ms; (4000 - 44) x 0.9 / 12.5 =
    # 284.832 s at 80 ms.
    assert at_2400.session_audio_limit_bytes == 4_523_904 * 2
    assert at_80.session_audio_limit_bytes == 4_557_312 * 2
    assert Settings.from_env({"TRANSCRIPTION_DELAY_MS": ""}).transcription_delay_ms is None


@pytest.mark.parametrize("value", ["100", "0", "-80", "1280", "2480", "480.0", "soon"])
def test_a_transcription_delay_the_model_card_does_not_allow_is_refused(value):
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"TRANSCRIPTION_DELAY_MS": value})
    assert str(info.value) == (
        f"TRANSCRIPTION_DELAY_MS={value!r} must be a multiple of 80 from 80 to 1200, or 2400 (ms: "
        "the delays the Voxtral Realtime model card allows), or unset for the checkpoint's own"
    )


def test_exactly_the_model_cards_delays_are_accepted_and_max_model_len_must_exceed_their_overhead():
    allowed = [*range(80, 1201, 80), 2400]
    accepted = []
    for delay in range(-80, 3001, 10):
        try:
            settings = Settings.from_env({"TRANSCRIPTION_DELAY_MS": str(delay)})
            accepted.append(settings.transcription_delay_ms)
        except SettingsError:
            pass
    assert accepted == allowed
    with pytest.raises(SettingsError) as info:
        Settings.from_env({"MAX_MODEL_LEN": "73", "TRANSCRIPTION_DELAY_MS": "2400"})
    assert str(info.value) == "MAX_MODEL_LEN='73' must be at least 74"
    shortest = Settings.from_env({"MAX_MODEL_LEN": "74", "TRANSCRIPTION_DELAY_MS": "2400"})
    assert shortest.max_model_len == 74
