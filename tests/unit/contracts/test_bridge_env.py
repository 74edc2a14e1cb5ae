"""contracts/bridge_env.py: the bridge container's environment, read (SM_VLLM_* fallbacks, defaults,
a bad value named with its variable and rule) and written (the variables that are set, as strings,
in the templates' order). (The settings of one feature sit with its tests: the token in
tests/bridge/test_auth.py, task protection in tests/bridge/test_task_protection.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from contracts.bridge_env import OFFLINE_ENVIRONMENT, BridgeEnvError, BridgeEnvironment


def test_settings_defaults_and_sm_vllm_fallbacks():
    settings = BridgeEnvironment.from_env(
        {
            "SM_VLLM_MAX_NUM_SEQS": "32",
            "SM_VLLM_MAX_MODEL_LEN": "4000",
            "SM_VLLM_SERVED_MODEL_NAME": '["voxtral", "v"]',
        }
    )
    assert (settings.port, settings.vllm_port, settings.max_streams) == (8080, 8081, 32)
    assert settings.served_model == "voxtral"
    # (4000 - 49 tokens of the stream format) x 0.9 / 12.5 tokens per s = 284.472 s of audio,
    # x 16000 x 2 bytes.
    assert settings.session_audio_limit_bytes == 4_551_552 * 2
    read = BridgeEnvironment.from_env
    assert read({"MAX_STREAMS": "7", "SM_VLLM_MAX_NUM_SEQS": "32"}).max_streams == 7
    assert read({"SM_VLLM_MODEL": "/opt/ml/model"}).served_model == "/opt/ml/model"
    assert read({}).max_streams == 256
    assert read({}).session_audio_limit_bytes is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MAX_STREAMS": "many"}, "MAX_STREAMS='many' is not an integer"),
        ({"MAX_STREAMS": "0"}, "MAX_STREAMS='0' must be at least 1"),
        ({"IDLE_TIMEOUT_S": "soon"}, "IDLE_TIMEOUT_S='soon' is not a number"),
        ({"MAX_FRAME_BYTES": "1024"}, "MAX_FRAME_BYTES='1024' must be at least 4194304"),
        ({"SESSION_LIMIT_FRACTION": "1.5"}, "SESSION_LIMIT_FRACTION=1.5 must be at most 1"),
        # nan passes every comparison and inf every minimum: neither is a setting
        ({"SESSION_LIMIT_FRACTION": "nan"}, "SESSION_LIMIT_FRACTION='nan' is not a finite number"),
        ({"DRAIN_S": "inf"}, "DRAIN_S='inf' is not a finite number"),
        ({"DRAIN_S": "1e308"}, "DRAIN_S='1e308' must be at most 9007199254740991"),
        ({"BRIDGE_PORT": "65536"}, "BRIDGE_PORT='65536' must be at most 65535"),
        ({"VLLM_PORT": "70000"}, "VLLM_PORT='70000' must be at most 65535"),
        ({"AUDIO_RATE_LIMIT": "-Infinity"}, "AUDIO_RATE_LIMIT='-Infinity' is not a finite number"),
        (
            {"SM_VLLM_GPU_MEMORY_UTILIZATION": "NaN"},
            "SM_VLLM_GPU_MEMORY_UTILIZATION='NaN' is not a finite number",
        ),
        # The context falls back to vLLM's flag, and is named by the variable that holds it.
        ({"SM_VLLM_MAX_MODEL_LEN": "32k"}, "SM_VLLM_MAX_MODEL_LEN='32k' is not an integer"),
        (
            {"SM_VLLM_MAX_MODEL_LEN": "45000", "MAX_MODEL_LEN": "32k"},
            "MAX_MODEL_LEN='32k' is not an integer",
        ),
        # vLLM's numeric flags are numbers: refused at the start, not by vLLM's parser later.
        (
            {"SM_VLLM_GPU_MEMORY_UTILIZATION": "most"},
            "SM_VLLM_GPU_MEMORY_UTILIZATION='most' is not a number",
        ),
    ],
)
def test_bad_settings_name_the_variable_and_the_rule(env, message):
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env(env)
    assert str(info.value) == message


def test_an_environment_is_written_in_field_order_with_only_what_is_set():
    """The order of the variables is the templates' (a reordered ECS environment list is a new
    task definition revision); numbers are written as Python writes them, a float without a
    fraction as an integer."""
    env = BridgeEnvironment(
        vllm_model="/opt/ml/model",
        vllm_max_num_seqs=4,
        vllm_gpu_memory_utilization=0.9,
        metrics_namespace="NS",
        endpoint_name="e",
        variant_name="AllTraffic",
        drain_s=25,
        idle_timeout_s=60.0,
        offline=True,
        kv_blocks_per_stream=83,
    ).to_env()
    assert env == {
        "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
        "METRICS_NAMESPACE": "NS",
        "ENDPOINT_NAME": "e",
        "VARIANT_NAME": "AllTraffic",
        "DRAIN_S": "25",
        "IDLE_TIMEOUT_S": "60",
        **OFFLINE_ENVIRONMENT,
        "KV_BLOCKS_PER_STREAM": "83",
    }
    assert list(env) == [
        "SM_VLLM_MODEL",
        "SM_VLLM_MAX_NUM_SEQS",
        "SM_VLLM_GPU_MEMORY_UTILIZATION",
        "METRICS_NAMESPACE",
        "ENDPOINT_NAME",
        "VARIANT_NAME",
        "DRAIN_S",
        "IDLE_TIMEOUT_S",
        *OFFLINE_ENVIRONMENT,
        "KV_BLOCKS_PER_STREAM",
    ]
    assert BridgeEnvironment().to_env() == {}
    assert BridgeEnvironment(offline=False, drain_s=0.5, upstream_stall_s=0.123456789).to_env() == {
        "DRAIN_S": "0.5",
        "UPSTREAM_STALL_S": "0.123456789",
    }  # no digit lost


def test_what_is_written_reads_back_as_it_was_meant():
    written = BridgeEnvironment(
        vllm_model="/opt/ml/model",
        vllm_served_model_name="mistralai/V",
        vllm_max_model_len=45000,
        vllm_max_num_seqs=4,
        drain_s=25,
        offline=True,
        kv_blocks_per_stream=83,
        bridge_token="t" * 16,
    )
    read = BridgeEnvironment.from_env(written.to_env())
    assert (read.max_streams, read.max_model_len, read.served_model, read.drain_s) == (
        4,
        45000,
        "mistralai/V",
        25,
    )
    assert (read.kv_blocks_per_stream, read.offline, read.bridge_token) == (83, True, "t" * 16)
    given = [
        item.name for item in dataclasses.fields(written) if getattr(written, item.name) is not None
    ]
    assert {name: getattr(read, name) for name in given} == {
        name: getattr(written, name) for name in given
    }
    assert "t" * 16 not in repr(read)  # the token is never in the repr


def test_what_the_container_would_refuse_is_refused_when_written():
    with pytest.raises(BridgeEnvError, match="MAX_STREAMS='0' must be at least 1"):
        BridgeEnvironment(max_streams=0).to_env()
    with pytest.raises(
        BridgeEnvError, match=r"BRIDGE_TOKEN \(its value is not shown\) is shorter than 16"
    ):
        BridgeEnvironment(bridge_token="short").to_env()


def test_each_field_names_its_variable():
    assert BridgeEnvironment.variable("drain_s") == "DRAIN_S"
    assert BridgeEnvironment.variable("vllm_served_model_name") == "SM_VLLM_SERVED_MODEL_NAME"
    assert BridgeEnvironment.variable("served_model") == "SERVED_MODEL_NAME"
    with pytest.raises(KeyError):
        BridgeEnvironment.variable("offline")  # six variables, OFFLINE_ENVIRONMENT


def test_the_defaults_of_a_bridge_run_in_process_are_the_containers_with_any_value_unchecked():
    settings = BridgeEnvironment.defaults(port=0, audio_burst_s=1)  # the environment refuses 1 s
    assert (settings.port, settings.audio_burst_s) == (0, 1)
    restored = dataclasses.replace(settings, port=8080, audio_burst_s=120.0)
    assert restored == BridgeEnvironment.from_env({})


def test_the_session_limit_counts_the_transcription_delays_tokens():
    """vLLM's prompt holds one token per 80 ms of delay (tests/vllm: prompt_tokens 33 + delay
    tokens), so a longer delay leaves less of max_model_len for audio; unset is the checkpoint's
    480 ms (49 tokens, as before)."""

    def read(delay: str | None) -> BridgeEnvironment:
        env = {"SM_VLLM_MAX_MODEL_LEN": "4000"}
        return BridgeEnvironment.from_env(
            env if delay is None else {**env, "TRANSCRIPTION_DELAY_MS": delay}
        )

    unset, at_480, at_2400, at_80 = read(None), read("480"), read("2400"), read(" 80 ")
    assert [s.transcription_delay_ms for s in (unset, at_2400, at_80)] == [None, 2400, 80]
    assert [s.stream_overhead_tokens for s in (unset, at_480, at_2400, at_80)] == [49, 49, 73, 44]
    assert unset.session_audio_limit_bytes == at_480.session_audio_limit_bytes == 4_551_552 * 2
    # (4000 - 73) x 0.9 / 12.5 = 282.744 s of audio at 2400 ms; (4000 - 44) x 0.9 / 12.5 =
    # 284.832 s at 80 ms.
    assert at_2400.session_audio_limit_bytes == 4_523_904 * 2
    assert at_80.session_audio_limit_bytes == 4_557_312 * 2
    empty = BridgeEnvironment.from_env({"TRANSCRIPTION_DELAY_MS": ""})
    assert empty.transcription_delay_ms is None
    assert "TRANSCRIPTION_DELAY_MS" not in empty.to_env()
    assert at_2400.to_env()["TRANSCRIPTION_DELAY_MS"] == "2400"


@pytest.mark.parametrize("value", ["100", "0", "-80", "1280", "2480", "480.0", "soon"])
def test_a_transcription_delay_the_model_card_does_not_allow_is_refused(value):
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env({"TRANSCRIPTION_DELAY_MS": value})
    assert str(info.value) == (
        f"TRANSCRIPTION_DELAY_MS={value!r} must be a multiple of 80 from 80 to 1200, or 2400 (ms: "
        "the delays the Voxtral Realtime model card allows), or unset for the checkpoint's own"
    )


def test_exactly_the_model_cards_delays_are_accepted_and_max_model_len_must_exceed_overhead():
    allowed = [*range(80, 1201, 80), 2400]
    accepted = []
    for delay in range(-80, 3001, 10):
        try:
            env = BridgeEnvironment.from_env({"TRANSCRIPTION_DELAY_MS": str(delay)})
            accepted.append(env.transcription_delay_ms)
        except BridgeEnvError:
            pass
    assert accepted == allowed
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env({"MAX_MODEL_LEN": "73", "TRANSCRIPTION_DELAY_MS": "2400"})
    assert str(info.value) == (
        "MAX_MODEL_LEN='73' must be at least 74: a session's prompt and final padding take 73 "
        "tokens at a 2400 ms transcription delay, and the audio needs the rest (12.5 tokens per "
        "second)"
    )
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env({"SM_VLLM_MAX_MODEL_LEN": "10"})
    assert (info.value.variable, info.value.rule) == (
        "SM_VLLM_MAX_MODEL_LEN",
        "must be at least 50: a session's prompt and final padding take 49 tokens at a 480 ms "
        "transcription delay, and the audio needs the rest (12.5 tokens per second)",
    )
    shortest = BridgeEnvironment.from_env({"MAX_MODEL_LEN": "74", "TRANSCRIPTION_DELAY_MS": "2400"})
    assert shortest.max_model_len == 74


@pytest.mark.parametrize(
    ("raw", "level"),
    [("debug", "DEBUG"), (" Warning ", "WARNING"), ("", "INFO"), ("ERROR", "ERROR")],
)
def test_the_log_level_is_read_in_capitals(raw, level):
    assert BridgeEnvironment.from_env({"LOG_LEVEL": raw}).log_level == level


@pytest.mark.parametrize("raw", ["loud", "WARN", "10", "info,debug"])
def test_a_log_level_that_is_not_a_level_name_is_refused_with_the_names(raw):
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env({"LOG_LEVEL": raw})
    assert str(info.value) == (
        f"LOG_LEVEL={raw.strip()!r} must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL "
        "(in any case)"
    )
    assert (info.value.variable, info.value.rule) == (
        "LOG_LEVEL",
        "must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (in any case)",
    )


#: The fields as the deployed templates have them, in to_env's order (an ECS task definition's
#: environment list is in it: a reordered list is a new revision and a deployment).
DEPLOYED_ORDER = [
    "vllm_model",
    "vllm_served_model_name",
    "vllm_max_model_len",
    "vllm_max_num_seqs",
    "vllm_gpu_memory_utilization",
    "vllm_compilation_config",
    "vllm_mm_processor_cache_gb",
    "vllm_tokenizer_mode",
    "vllm_config_format",
    "vllm_load_format",
    "metrics_namespace",
    "model_s3_uri",
    "model_cache_dir",
    "endpoint_name",
    "variant_name",
    "drain_s",
    "idle_timeout_s",
    "offline",
    "vllm_kv_cache_dtype",
    "transcription_delay_ms",
    "kv_blocks_per_stream",
    "host",
    "port",
    "vllm_host",
    "vllm_port",
    "max_streams",
    "served_model",
    "max_model_len",
    "kv_block_size",
    "upstream_stall_s",
    "tokens_per_audio_second",
    "session_limit_fraction",
    "max_frame_bytes",
    "audio_rate_limit",
    "audio_burst_s",
    "metrics_interval_s",
    "bridge_token",
    "ecs_agent_uri",
    "task_protection_minutes",
    "task_protection_grace_s",
    "log_level",
]


def test_new_fields_come_after_the_deployed_ones():
    """docs/architecture.md, "Adding a bridge setting": a field goes last. One inserted before a
    field the app sets would move that variable in every task definition."""
    import dataclasses

    names = [item.name for item in dataclasses.fields(BridgeEnvironment)]
    assert names[: len(DEPLOYED_ORDER)] == DEPLOYED_ORDER
