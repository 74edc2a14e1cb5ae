"""The bridge container's environment from the settings (config/bridge.py): every field the app sets
comes from a named setting or is the app's own, and what the container would refuse is a settings
problem under the key, on both targets."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from config import bridge
from config.bridge import (
    APP_FIELDS,
    BRIDGE_SETTINGS,
    SETTING_OF_FIELD,
    bridge_environment,
    bridge_problems,
    sagemaker_bridge_environment,
)
from config.settings import VoxtralSettings, load_settings
from contracts.bridge_env import BridgeEnvironment
from tests.conftest import cdk_json_context
from tests.unit.config.conftest import one_problem, problems_for

#: Settings under which every optional field of the environment is set: FP8 KV cache (a Hopper
#: type) and a transcription delay.
EVERYTHING_SET = {
    "voxtral.instance_type": "ml.p5.4xlarge",
    "voxtral.kv_cache_dtype": "fp8",
    "voxtral.transcription_delay_ms": "160",
}


def settings(**overrides):
    return load_settings({**cdk_json_context(), **overrides})


def set_fields(environment: BridgeEnvironment) -> set[str]:
    return {f.name for f in dataclasses.fields(environment) if getattr(environment, f.name)}


def written_fields() -> dict[str, str | None]:
    """``{field: the VoxtralSettings field its value reads, or None}`` of every keyword the
    environment's builders (bridge_environment, sagemaker_bridge_environment) pass, read from their
    source, so that a line for an optional setting counts whether or not a test sets it."""
    tree = ast.parse(inspect.getsource(bridge))
    written: dict[str, str | None] = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or function.name not in (
            "bridge_environment",
            "sagemaker_bridge_environment",
        ):
            continue
        for call in ast.walk(function):
            if isinstance(call, ast.Call) and call.keywords:
                for keyword in call.keywords:
                    read = [
                        node.attr
                        for node in ast.walk(keyword.value)
                        if isinstance(node, ast.Attribute)
                        and (
                            (isinstance(node.value, ast.Name) and node.value.id == "voxtral")
                            or (
                                isinstance(node.value, ast.Attribute)
                                and node.value.attr == "voxtral"
                            )
                        )
                    ]
                    written[keyword.arg or ""] = read[0] if read else None
    return written


def test_every_field_the_app_sets_is_a_settings_key_or_the_apps_own():
    """A new line in bridge_environment must say where its value comes from: the key it reads (its
    problems are named by it) or the app."""
    written = written_fields()
    environment_fields = {f.name for f in dataclasses.fields(BridgeEnvironment)}
    fields = {name: read for name, read in written.items() if name in environment_fields}
    fields = {**dict.fromkeys(BRIDGE_SETTINGS), **fields}  # the settings declared with bridge=
    assert fields.keys() <= set(SETTING_OF_FIELD) | APP_FIELDS
    assert not set(SETTING_OF_FIELD) & APP_FIELDS
    for name, read in fields.items():
        if read is not None:  # a line that reads voxtral.<field> is that key's
            assert SETTING_OF_FIELD.get(name) == read, (name, read)
    # The bridge's MAX_MODEL_LEN and MAX_STREAMS are not written: they default to vLLM's flags.
    assert set(SETTING_OF_FIELD) - fields.keys() == {"max_model_len", "max_streams"}
    voxtral_fields = {f.name for f in dataclasses.fields(VoxtralSettings)}
    assert set(SETTING_OF_FIELD.values()) <= voxtral_fields
    # and what the builders write at run time is what their source says
    loaded = settings(**EVERYTHING_SET)
    assert set_fields(sagemaker_bridge_environment(loaded)) <= fields.keys()


def test_each_bridge_declaration_names_a_field_of_the_environment():
    """``setting(..., bridge="<field>")`` names a BridgeEnvironment field (a misspelt one would stop
    every synth), each field at most once."""
    environment_fields = {f.name for f in dataclasses.fields(BridgeEnvironment)}
    declared = [
        f.metadata["bridge"] for f in dataclasses.fields(VoxtralSettings) if "bridge" in f.metadata
    ]
    assert set(declared) <= environment_fields
    assert len(declared) == len(set(declared)) == len(BRIDGE_SETTINGS)


def test_a_misspelt_or_doubled_bridge_declaration_is_named_when_the_settings_load():
    from config.bridge import declared_bridge_settings
    from config.context import setting

    @dataclasses.dataclass(frozen=True)
    class Section:
        delay: int | None = setting(None, bridge="transcription_delay")
        rate: float | None = setting(None, bridge="audio_rate_limit")
        limit: float | None = setting(None, bridge="audio_rate_limit")
        plain: int = 1

    with pytest.raises(TypeError) as refused:
        declared_bridge_settings(Section)
    assert str(refused.value) == (
        "Section.delay: bridge='transcription_delay', Section.limit: bridge='audio_rate_limit': "
        "must name a field of contracts.bridge_env.BridgeEnvironment that no other setting names"
    )
    assert declared_bridge_settings(VoxtralSettings) == BRIDGE_SETTINGS


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        ("voxtral.model_id", "mistralai/Voxtral-Other", "vllm_served_model_name", None),
        ("voxtral.max_model_len", "30000", "vllm_max_model_len", 30000),
        ("voxtral.max_num_seqs", "2", "vllm_max_num_seqs", 2),
        ("voxtral.gpu_memory_utilization", "0.85", "vllm_gpu_memory_utilization", 0.85),
        ("voxtral.transcription_delay_ms", "160", "transcription_delay_ms", 160),
        ("voxtral.metrics_namespace", "Team/Voice", "metrics_namespace", None),
        ("voxtral.endpoint_name", "speech-2", "endpoint_name", None),
    ],
)
def test_each_key_of_the_table_gives_its_field(key, value, field, expected):
    """SETTING_OF_FIELD says which key a field's value comes from: the key changes that field."""
    assert VoxtralSettings.problems_named("voxtral.").name(SETTING_OF_FIELD[field]) == key
    environment = sagemaker_bridge_environment(settings(**{key: value}))
    assert getattr(environment, field) == (value if expected is None else expected)


def test_the_fp8_key_gives_the_kv_cache_field():
    environment = bridge_environment(settings(**EVERYTHING_SET))
    assert environment.vllm_kv_cache_dtype == "fp8"
    assert SETTING_OF_FIELD["vllm_kv_cache_dtype"] == "kv_cache_dtype"


#: The contract's rule for a context of 10 tokens at the checkpoint's delay.
TOO_SHORT = (
    "must be at least 50: a session's prompt and final padding take 49 tokens at a 480 ms "
    "transcription delay, and the audio needs the rest (12.5 tokens per second) (the bridge "
    "container's SM_VLLM_MAX_MODEL_LEN)"
)


@pytest.mark.parametrize("target", ["sagemaker", "ecs"])
def test_a_value_the_bridge_would_refuse_is_a_settings_problem_under_its_key(target):
    assert one_problem(voxtral__max_model_len="10", voxtral__target=target) == (
        f"voxtral.max_model_len=10: {TOO_SHORT}"
    )


def test_the_bridges_rule_follows_the_transcription_delay():
    assert one_problem(
        voxtral__max_model_len="73",
        voxtral__transcription_delay_ms="2400",
        voxtral__alarm_time_to_first_delta_p90_ms="3000",
    ) == (
        "voxtral.max_model_len=73: must be at least 74: a session's prompt and final padding "
        "take 73 tokens at a 2400 ms transcription delay, and the audio needs the rest (12.5 "
        "tokens per second) (the bridge container's SM_VLLM_MAX_MODEL_LEN)"
    )
    assert (
        settings(
            **{
                "voxtral.max_model_len": "74",
                "voxtral.transcription_delay_ms": "2400",
                "voxtral.alarm_time_to_first_delta_p90_ms": "3000",
            }
        ).voxtral.max_model_len
        == 74
    )


@pytest.mark.parametrize("target", ["sagemaker", "ecs"])
def test_the_bridges_check_waits_for_the_keys_own_checks(target):
    """A key that fails its own check is named once, by that check, not again by the bridge's."""
    assert problems_for(voxtral__max_model_len="0", voxtral__target=target) == [
        "voxtral.max_model_len=0: must be a positive whole number (tokens; 12.5 per second of "
        "audio)"
    ]


def test_a_value_of_the_apps_own_that_the_bridge_refuses_is_said_not_raised(monkeypatch):
    """Not reachable from a key: a defect of the app, still a settings problem rather than a
    traceback at synth."""
    loaded = settings()
    monkeypatch.setattr(bridge, "MM_PROCESSOR_CACHE_GB", -1)
    assert bridge_problems(loaded) == [
        "the bridge container would refuse its environment: "
        "SM_VLLM_MM_PROCESSOR_CACHE_GB='-1' must be at least 0"
    ]


def test_the_default_settings_give_an_environment_the_bridge_accepts():
    loaded = settings()
    assert bridge_problems(loaded) == []
    read = BridgeEnvironment.from_env(sagemaker_bridge_environment(loaded).to_env())
    assert (read.max_model_len, read.drain_s, read.variant_name) == (45000, 25, "AllTraffic")
