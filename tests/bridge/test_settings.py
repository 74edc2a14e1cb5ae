"""container/bridge/settings.py: the bridge's settings from its environment (SM_VLLM_* fallbacks,
defaults), and a bad value named with its variable and rule. (The settings of one feature sit with
its tests: the token in test_auth.py, task protection in test_task_protection.py.)"""

from __future__ import annotations

import pytest

from bridge.settings import Settings, SettingsError


def test_settings_defaults_and_sm_vllm_fallbacks():
    settings = Settings.from_env({
        "SM_VLLM_MAX_NUM_SEQS": "32", "SM_VLLM_MAX_MODEL_LEN": "4000", "SM_VLLM_SERVED_MODEL_NAME": '["voxtral", "v"]',
    })
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
