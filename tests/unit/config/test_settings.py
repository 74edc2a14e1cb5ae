"""config/settings.py: parsed once from context, typed, frozen; every bad value gives one clear
message. By section: the endpoints and the model first, then the ECS target, then the operations
keys."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from config.settings import SettingsError, default_context, load_settings
from constructs_lib.facts import instance_types
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.validation import Problems
from tests.app.variants import ECS_VPC as PRIVATE_ECS, SONIC_ECS_IMAGE as IMAGE
from tests.conftest import (
    CONNECT,
    CONNECT_INSTANCE,
    CONNECT_QUEUE,
    CONNECT_VPC,
    ROOT,
    cdk_json_context,
)

OTHER_REGION_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:model-package/sonic36-abc"


def problems_for(**overrides) -> list[str]:
    """The problems load_settings reports for cdk.json's context plus ``overrides`` (dots as in the
    keys)."""
    context = {**cdk_json_context(), **{k.replace("__", "."): v for k, v in overrides.items()}}
    with pytest.raises(SettingsError) as caught:
        load_settings(context)
    return caught.value.problems


def one_problem(**overrides) -> str:
    (problem,) = problems_for(**overrides)
    return problem


def test_cdk_json_lists_every_setting_with_its_code_default():
    ours = {k: v for k, v in cdk_json_context().items() if not k.startswith("@")}
    assert ours == default_context()


def test_defaults_parse_into_frozen_typed_settings():
    settings = load_settings(cdk_json_context())
    assert settings.region == "us-east-1"
    assert settings.voxtral.instance_type == "ml.g6.xlarge"
    assert settings.voxtral.max_model_len == 45000
    assert settings.sonic.instance_type == "ml.g6e.2xlarge"
    assert settings.sonic_model_package_arn.endswith(
        "sonic36-sagemaker-v0-c6e9cacffcdf31178d1bd7c98c587480"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.voxtral.max_num_seqs = 3  # type: ignore[misc]


def test_command_line_strings_are_converted():
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.initial_instance_count": "3",
            "voxtral.enabled": "true",
            "sonic.enabled": "false",
            "retain_data": "yes",
            "voxtral.gpu_memory_utilization": "0.85",
            "voxtral.model_s3_uri": "s3://my-bucket/weights/voxtral",
            "voxtral.image_uri": "null",
        }
    )
    assert settings.voxtral.initial_instance_count == 3
    assert settings.sonic.enabled is False
    assert settings.retain_data is True
    assert settings.voxtral.gpu_memory_utilization == 0.85
    assert settings.voxtral.model_s3_uri == "s3://my-bucket/weights/voxtral"
    assert settings.voxtral.image_uri is None


def test_unknown_key_suggests_the_nearest_known_one():
    assert one_problem(**{"voxtral.instance_typ": "ml.g6.4xlarge"}) == (
        "unknown setting 'voxtral.instance_typ'; did you mean 'voxtral.instance_type'?"
    )


def test_cdk_feature_flags_and_lookup_keys_are_left_alone():
    settings = load_settings(
        {
            **cdk_json_context(),
            "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
            "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
            "aws:cdk:enable-path-metadata": True,
        }
    )
    assert settings.region == "us-east-1"


def test_not_an_instance_type():
    problem = one_problem(**{"voxtral.instance_type": "g6.4xlarge"})
    assert problem.startswith(
        "voxtral.instance_type='g6.4xlarge': not a SageMaker real-time instance type"
    )
    assert "ml.<family>.<size>" in problem


def test_unknown_instance_family_is_not_a_sagemaker_type():
    assert "not a SageMaker real-time instance type" in one_problem(
        **{"voxtral.instance_type": "ml.zz9.xlarge"}
    )


def test_sagemaker_type_without_catalogue_facts_names_the_catalogue():
    problem = one_problem(**{"voxtral.instance_type": "ml.inf2.xlarge"})
    assert "constructs_lib/facts/instance_types.py" in problem and "ml.g6.*" in problem


def test_catalogue_holds_only_sagemaker_types():
    assert set(instance_types.CATALOGUE) <= instance_types.sagemaker_instance_types()


def test_voxtral_needs_a_gpu():
    assert "has no GPU" in one_problem(**{"voxtral.instance_type": "ml.m5.xlarge"})


@pytest.mark.parametrize(
    ("key", "value", "shown", "gpus"),
    [
        ("voxtral.instance_type", "ml.g6.12xlarge", "'ml.g6.12xlarge'", 4),
        ("voxtral.instance_pools", "ml.g6.xlarge,ml.g6e.48xlarge", "'ml.g6e.48xlarge'", 8),
    ],
)
def test_voxtral_on_sagemaker_refuses_a_type_of_several_gpus(key, value, shown, gpus):
    """The endpoint runs one vLLM on one GPU: the others would be billed idle, and the GPU alarms,
    scaled by the instance's GPUs, would wait for a level one GPU never reaches (voicectl capacity
    --compare leaves them out)."""
    problem = one_problem(**{key: value})
    assert problem.startswith(
        f"{key}={shown}: has {gpus} GPUs; the endpoint runs one vLLM on one GPU, so "
        f"{gpus - 1} would idle"
    )
    assert "voxtral.target=ecs" in problem


def test_voxtral_on_ecs_keeps_its_own_instance_type_check():
    settings = load_settings(
        {**cdk_json_context(), "voxtral.target": "ecs", "voxtral.instance_type": "ml.g6.12xlarge"}
    )
    assert settings.voxtral.target == "ecs"


def test_sonic_instance_type_must_be_supported_by_the_package():
    problem = one_problem(**{"sonic.instance_type": "ml.g6.4xlarge"})
    assert problem.startswith(
        "sonic.instance_type='ml.g6.4xlarge': the Sonic 3.6 model package supports"
    )
    assert "ml.g6e.xlarge or larger" in problem and "ml.p5en.48xlarge" in problem


@pytest.mark.parametrize(
    "instance_type",
    [
        "ml.g6e.xlarge",
        "ml.g6e.48xlarge",
        "ml.g7e.2xlarge",
        "ml.g7.2xlarge",
        "ml.p5.48xlarge",
        "ml.p5en.48xlarge",
    ],
)
def test_sonic_supported_instance_types_are_accepted(instance_type):
    settings = load_settings({**cdk_json_context(), "sonic.instance_type": instance_type})
    assert settings.sonic.instance_type == instance_type


def test_gpu_memory_too_small_for_model_len_times_seqs():
    problem = one_problem(**{"voxtral.max_num_seqs": 16})
    assert problem.startswith(
        "voxtral.instance_type='ml.g6.xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs=16"
    )
    # The figures of the capacity model (constructs_lib/facts/capacity.py) are in the message.
    assert (
        "one NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the weights (8.3 GiB), "
        "activations and CUDA graphs (1.5 GiB) and KV cache (10.5 GiB) for at most 8 live "
        "stream(s) of that length (1.30 GiB of KV each); lower max_num_seqs or max_model_len"
    ) in problem
    # The blog's configuration (4 one-hour sessions on one L4) is accepted; a smaller model length
    # makes room for more.
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.max_num_seqs": 4}
        ).voxtral.streams_per_instance
        == 4
    )
    settings = load_settings(
        {**cdk_json_context(), "voxtral.max_model_len": 3000, "voxtral.max_num_seqs": 12}
    )
    assert settings.voxtral.max_num_seqs == 12


def test_gpu_memory_estimate_values():
    problem = one_problem(
        **{"voxtral.instance_type": "ml.g4dn.xlarge", "voxtral.gpu_memory_utilization": 0.6}
    )
    assert problem.startswith(
        "voxtral.instance_type='ml.g4dn.xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs='auto': one NVIDIA T4 (16.0 GiB, 0.6 of it for vLLM: 9.6 GiB) "
        "holds the weights (8.3 GiB), activations and CUDA graphs (1.5 GiB) and KV cache (0.0 GiB) "
        "for at most 0 live stream(s)"
    )
    assert (
        "raise gpu_memory_utilization, lower max_model_len, or choose a GPU with more memory"
        in problem
    )


def test_max_num_seqs_auto_resolves_per_instance_type_and_reaches_the_bridge_scaling_and_alarms():
    settings = load_settings(cdk_json_context())
    assert settings.voxtral.max_num_seqs == "auto"
    assert (
        settings.voxtral.streams_per_instance == 4
    )  # one L4 at 45000 tokens: the compute budget, below the fit of 8
    assert settings.voxtral.streams_target == pytest.approx(0.7 * 4)
    assert settings.voxtral.bridge_thresholds().stream_cap == 4
    l40s = load_settings({**cdk_json_context(), "voxtral.instance_type": "ml.g6e.xlarge"}).voxtral
    assert l40s.streams_per_instance == 23
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.max_num_seqs": "3"}
        ).voxtral.streams_per_instance
        == 3
    )


@pytest.mark.parametrize(
    "key,value,expected",
    [
        (
            "voxtral.initial_instance_count",
            "two",
            "voxtral.initial_instance_count='two': must be a whole number",
        ),
        (
            "voxtral.initial_instance_count",
            1.5,
            "voxtral.initial_instance_count=1.5: must be a whole number",
        ),
        (
            "voxtral.initial_instance_count",
            0,
            "voxtral.initial_instance_count=0: must be a positive whole number",
        ),
        (
            "sonic.initial_instance_count",
            "-1",
            "sonic.initial_instance_count=-1: must be a positive whole number",
        ),
        ("voxtral.max_num_seqs", 0, "voxtral.max_num_seqs=0: must be a positive whole number"),
        ("voxtral.enabled", "maybe", "voxtral.enabled='maybe': must be true or false"),
    ],
)
def test_counts_and_flags(key, value, expected):
    assert one_problem(**{key: value}) == expected


@pytest.mark.parametrize(
    "uri",
    [
        "my-bucket/prefix",
        "s3://my-bucket",
        "s3://my-bucket/",
        "s3://my-bucket///",
        "https://my-bucket.s3.amazonaws.com/x",
        "s3://Bad_Bucket/x",
    ],
)
def test_s3_uri_must_be_bucket_and_prefix(uri):
    assert one_problem(**{"voxtral.model_s3_uri": uri}).startswith(
        f"voxtral.model_s3_uri='{uri}': must be 's3://<bucket>/<prefix>' with a valid bucket name"
    )


@pytest.mark.parametrize(
    "uri",
    ["s3://my-bucket/weights/*", "s3://my-bucket/a b", "s3://my-bucket/a//b", "s3://my-bucket/w?"],
)
def test_s3_prefix_must_be_plain(uri):
    assert "without wildcards" in one_problem(**{"voxtral.model_s3_uri": uri})


def test_endpoint_name_at_most_63_characters():
    name = "a" + "-" * 69 + "b"
    assert one_problem(**{"voxtral.endpoint_name": name}).startswith(
        f"voxtral.endpoint_name='{name}': must be 1-63"
    )
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.endpoint_name": "a" * 63}
        ).voxtral.endpoint_name
        == "a" * 63
    )


def test_null_for_a_required_setting_is_refused():
    assert one_problem(**{"voxtral.endpoint_name": "null"}).startswith(
        "voxtral.endpoint_name='null': must be set"
    )
    assert one_problem(region="").startswith("region='': must be set")


@pytest.mark.parametrize(
    "arn,ok",
    [
        ("arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100", True),
        ("arn:aws:kms:us-east-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab", True),
        ("arn:aws:kms:us-east-1:123456789012:alias/sagemaker-volumes", True),
        ("arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100", False),
        ("0f0e0d0c-0b0a-0908-0706-050403020100", False),
    ],
)
def test_volume_kms_key(arn, ok):
    context = {**cdk_json_context(), "voxtral.volume_kms_key_arn": arn}
    if ok:
        assert load_settings(context).voxtral.volume_kms_key_arn == arn
    else:
        assert one_problem(**{"voxtral.volume_kms_key_arn": arn}).startswith(
            f"voxtral.volume_kms_key_arn='{arn}'"
        )


def test_region_without_a_known_sonic_package_needs_an_arn():
    problem = one_problem(region="eu-west-1")
    assert problem.startswith("sonic.model_package_arn=null with region='eu-west-1'")
    assert "us-east-1" in problem
    settings = load_settings(
        {**cdk_json_context(), "region": "eu-west-1", "sonic.model_package_arn": OTHER_REGION_ARN}
    )
    assert settings.sonic_model_package_arn == OTHER_REGION_ARN
    # Voxtral alone needs no Sonic ARN.
    assert (
        load_settings({**cdk_json_context(), "region": "eu-west-1", "sonic.enabled": False}).region
        == "eu-west-1"
    )


def test_model_package_arn_region_must_match_the_stack():
    problem = one_problem(**{"sonic.model_package_arn": OTHER_REGION_ARN})
    assert problem == (
        f"sonic.model_package_arn='{OTHER_REGION_ARN}': the package is in eu-west-1 but the "
        "stack deploys to us-east-1; use the package ARN for us-east-1"
    )


@pytest.mark.parametrize(
    "key",
    [
        "voxtral.model_data_download_timeout_s",
        "voxtral.container_startup_timeout_s",
        "sonic.model_data_download_timeout_s",
        "sonic.container_startup_timeout_s",
    ],
)
@pytest.mark.parametrize("value", [59, 3601])
def test_timeouts_outside_60_to_3600(key, value):
    assert one_problem(**{key: value}) == f"{key}={value}: must be between 60 and 3600 seconds"


def test_both_endpoints_disabled():
    assert one_problem(**{"voxtral.enabled": "false", "sonic.enabled": "false"}) == (
        "voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be enabled"
    )


def test_image_uri_must_be_private_ecr_in_the_stack_region():
    assert "must be a private ECR image" in one_problem(
        **{"voxtral.image_uri": "docker.io/library/bridge:1"}
    )
    problem = one_problem(
        **{"voxtral.image_uri": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"}
    )
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


def test_every_problem_is_reported_at_once():
    problems = problems_for(
        **{
            "voxtral.instance_type": "nope",
            "sonic.instance_type": "ml.g5.xlarge",
            "voxtral.model_data_download_timeout_s": 5,
            "bogus": 1,
        }
    )
    assert len(problems) == 4
    assert problems[0].startswith("unknown setting 'bogus'")


def test_model_staging_settings():
    defaults = load_settings(cdk_json_context()).voxtral
    assert defaults.stages_model is True and defaults.stage_model is None
    external = load_settings(
        {**cdk_json_context(), "voxtral.model_s3_uri": "s3://team-models/p"}
    ).voxtral
    assert external.stages_model is False
    assert one_problem(**{"voxtral.model_revision": "main"}).startswith(
        "voxtral.model_revision='main': must be a full 40-character commit hash"
    )
    assert one_problem(
        **{"voxtral.stage_model": "true", "voxtral.model_s3_uri": "s3://team-models/p"}
    ).startswith(
        "voxtral.stage_model=true with voxtral.model_s3_uri='s3://team-models/p': staging writes "
        "into the stack's model bucket"
    )
    assert "must be a Secrets Manager secret ARN" in one_problem(
        **{"voxtral.hf_token_secret_arn": "hf_abc"}
    )
    assert "the secret is in eu-west-1" in one_problem(
        **{
            "voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:"
            "hub-AbCdEf"
        }
    )
    # The complete ARN (with Secrets Manager's 6-character suffix) is needed for an exact IAM grant.
    assert "must be a Secrets Manager secret ARN" in one_problem(
        **{
            "voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:"
            "hub"
        }
    )


def test_hub_token_secret_kms_key():
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-AbCdEf"
    key = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.hf_token_secret_arn": secret,
            "voxtral.hf_token_secret_kms_key_arn": key,
        }
    )
    assert settings.voxtral.hf_token_secret_kms_key_arn == key
    assert "set only together with voxtral.hf_token_secret_arn" in one_problem(
        **{"voxtral.hf_token_secret_kms_key_arn": key}
    )
    assert "not an alias" in one_problem(
        **{
            "voxtral.hf_token_secret_arn": secret,
            "voxtral.hf_token_secret_kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/x",
        }
    )


def test_literal_settings_list_the_values_of_the_facts_they_come_from():
    assert one_problem(**{"voxtral.inference_ami_version": "latest"}) == (
        "voxtral.inference_ami_version='latest': must be one of "
        "al2-ami-sagemaker-inference-gpu-2, al2-ami-sagemaker-inference-gpu-2-1, "
        "al2-ami-sagemaker-inference-gpu-3-1, al2023-ami-sagemaker-inference-gpu-4-1"
    )


def test_the_settings_rules_are_the_constructs_rules_named_after_the_keys():
    """One rule, one wording: a prop's check reports the setting's key when the settings run it."""
    from constructs_lib.sagemaker_endpoint.props import ProductionVariant
    from constructs_lib.validation import Problems

    problems = Problems()
    ProductionVariant("ml.g6.4xlarge", container_startup_timeout_s=5).problems(problems)
    assert list(problems) == ["container_startup_timeout_s=5: must be between 60 and 3600 seconds"]
    assert one_problem(**{"sonic.container_startup_timeout_s": 5}) == (
        "sonic.container_startup_timeout_s=5: must be between 60 and 3600 seconds"
    )


# --- voxtral.kv_cache_dtype ---------------------------------------------------------------------


def test_fp8_kv_cache_reaches_vllm_and_doubles_the_kv_bound_on_hopper():
    from bridge.entrypoint import vllm_flags
    from stacks.composition import container_environment

    context = {**cdk_json_context(), "voxtral.instance_type": "ml.p5.4xlarge"}
    auto = load_settings(context).voxtral
    fp8 = load_settings({**context, "voxtral.kv_cache_dtype": "fp8"}).voxtral
    assert (auto.streams_per_instance, fp8.streams_per_instance) == (
        46,
        93,
    )  # KV bound, twice the pool blocks
    flags = vllm_flags(container_environment(fp8))
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8"
    assert flags[flags.index("--max-num-seqs") + 1] == "93"
    assert "--kv-cache-dtype" not in vllm_flags(
        container_environment(auto)
    )  # auto: vLLM's default, left out


def test_fp8_kv_cache_is_refused_on_an_l4_with_the_reason():
    problem = one_problem(voxtral__kv_cache_dtype="fp8")
    assert problem.startswith(
        "voxtral.kv_cache_dtype='fp8' with voxtral.instance_type='ml.g6.xlarge': NVIDIA L4 "
        "(compute capability 8.9)"
    )
    assert "vllm/model_executor/models/whisper_causal.py" in problem
    assert problem.endswith(
        "set voxtral.kv_cache_dtype=auto, or choose a one-GPU Hopper type (ml.p5.4xlarge)"
    )


def test_fp8_kv_cache_is_refused_for_each_pool_type_that_cannot_run_it():
    problems = problems_for(
        voxtral__instance_type="ml.p5.4xlarge",
        voxtral__instance_pools="ml.p5.4xlarge,ml.g6e.xlarge",
        voxtral__kv_cache_dtype="fp8",
    )
    assert len(problems) == 1 and problems[0].startswith(
        "voxtral.kv_cache_dtype='fp8' with voxtral.instance_pools='ml.g6e.xlarge': NVIDIA L40S "
        "(compute capability 8.9)"
    )


def test_fp8_kv_cache_is_refused_on_the_ecs_type_too():
    problems = problems_for(voxtral__target="ecs", voxtral__kv_cache_dtype="fp8")
    assert any(
        p.startswith("voxtral.kv_cache_dtype='fp8' with ecs.instance_type='g6.xlarge': NVIDIA L4")
        for p in problems
    )


def test_an_unknown_kv_cache_dtype_is_named():
    assert problems_for(voxtral__kv_cache_dtype="int8") == [
        "voxtral.kv_cache_dtype='int8': must be one of auto, fp8"
    ]


# --- voxtral.transcription_delay_ms ---------------------------------------------------------------


DELAY_RULE = (
    "must be a multiple of 80 from 80 to 1200, or 2400 (ms: the delays the Voxtral "
    "Realtime model card allows, 480 recommended), or null for the checkpoint's own"
)


@pytest.mark.parametrize(
    "value, expected",
    [("80", 80), ("160", 160), ("480", 480), ("1200", 1200), ("null", None), ("", None)],
)
def test_the_model_cards_transcription_delays_are_accepted(value, expected):
    context = {**cdk_json_context(), "voxtral.transcription_delay_ms": value}
    assert load_settings(context).voxtral.transcription_delay_ms == expected


def test_the_longest_delay_is_accepted_with_an_alarm_threshold_above_its_first_delta():
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.transcription_delay_ms": 2400,
            "voxtral.alarm_time_to_first_delta_p90_ms": "3000",
        }
    )
    assert settings.voxtral.transcription_delay_ms == 2400


@pytest.mark.parametrize("value", ["100", "0", "-80", "1280", "2000", "4800"])
def test_a_delay_the_model_card_does_not_allow_is_refused_with_what_is_allowed(value):
    assert problems_for(voxtral__transcription_delay_ms=value) == [
        f"voxtral.transcription_delay_ms={value}: {DELAY_RULE}"
    ]


def test_a_delay_that_is_not_a_whole_number_is_named():
    assert problems_for(voxtral__transcription_delay_ms="480ms") == [
        "voxtral.transcription_delay_ms='480ms': must be a whole number"
    ]


def test_a_delay_whose_first_delta_comes_after_the_alarm_threshold_is_refused():
    """vLLM's first delta waits for the delay, one token and the 2.5 ms look-ahead of audio
    (2482.5 ms at 2400 ms): the default TimeToFirstDelta p90 threshold, 2000 ms, would fire on
    every stream."""
    assert problems_for(voxtral__transcription_delay_ms="2400") == [
        "voxtral.alarm_time_to_first_delta_p90_ms=2000.0 with voxtral.transcription_delay_ms=2400: "
        "vLLM sends a stream's first delta only after 2482.5 ms of audio (the delay, one 80 ms "
        "token and the 2.5 ms look-ahead), so the alarm would fire on every stream; raise the "
        "threshold above 2482.5 ms, leaving room for the prefill and the callers' chunks, or "
        "choose a shorter delay"
    ]
    (at_the_floor,) = problems_for(
        voxtral__transcription_delay_ms="1200", voxtral__alarm_time_to_first_delta_p90_ms="1282.5"
    )
    assert at_the_floor.startswith(
        "voxtral.alarm_time_to_first_delta_p90_ms=1282.5 with voxtral.transcription_delay_ms=1200:"
    )
    load_settings(
        {
            **cdk_json_context(),
            "voxtral.transcription_delay_ms": "1200",
            "voxtral.alarm_time_to_first_delta_p90_ms": "1283",
        }
    )


def test_the_delay_reaches_the_bridge_on_both_targets_only_when_set():
    from stacks.composition import container_environment

    context = cdk_json_context()
    for target in ("sagemaker", "ecs"):
        unset = load_settings({**context, "voxtral.target": target}).voxtral
        assert "TRANSCRIPTION_DELAY_MS" not in container_environment(unset)
        delayed = load_settings(
            {**context, "voxtral.target": target, "voxtral.transcription_delay_ms": "160"}
        )
        assert container_environment(delayed.voxtral)["TRANSCRIPTION_DELAY_MS"] == "160"
    assert context["voxtral.transcription_delay_ms"] is None  # cdk.json: the checkpoint's own


def test_loading_the_default_settings_starts_no_cdk():
    """voicectl (capacity, cost, verify, preflight) loads the settings: with connect.enabled=false
    (the default) that must not import aws_cdk, which starts jsii's node process (seconds per
    command, and its Node banner)."""
    code = (
        "import json, sys\n"
        "from config.settings import load_settings\n"
        "load_settings(json.load(open('cdk.json'))['context'])\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_loading_connect_settings_starts_no_cdk_either():
    """With connect.enabled=true the settings build and check ConnectTranscriptionProps, which live
    in the CDK-free constructs_lib/connect/props.py: ``voicectl capacity`` and the other operations
    commands still start no jsii."""
    code = (
        "import json, sys\n"
        "from config.settings import load_settings\n"
        "context = json.load(open('cdk.json'))['context']\n"
        "context.update({'connect.enabled': True, 'connect.instance_arn': "
        "'arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555'})\n"
        "settings = load_settings(context)\n"
        "props = settings.connect.props(settings, image_directory='.')\n"
        "print(type(props).__module__, props.endpoint_name)\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines() == [
        "constructs_lib.connect.props voxtral-realtime",
        "[]",
    ]


# ---- the ECS target (voxtral.target=ecs, ecs.*): parsed, checked, and every bad value named
# ----------

CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def ecs_problems(**overrides) -> list[str]:
    """problems_for with voxtral.target=ecs."""
    return problems_for(**{"voxtral__target": "ecs", **overrides})


def test_defaults_target_sagemaker_and_an_internal_two_task_service():
    settings = load_settings(cdk_json_context())
    assert settings.voxtral.target == "sagemaker"
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (
        capacity.instance_type,
        capacity.spot,
        capacity.min_tasks,
        capacity.max_tasks,
        capacity.single_az,
    ) == ("g6.xlarge", False, 2, 4, False)
    assert (lb.internet_facing, lb.certificate_arn, lb.require_token) == (False, None, True)


def test_ecs_settings_are_not_checked_for_the_sagemaker_target():
    settings = load_settings({**cdk_json_context(), "ecs.instance_type": "m5.large"})
    assert settings.ecs.instance_type == "m5.large"


def test_command_line_values_convert():
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.target": "ecs",
            "ecs.instance_type": "g6e.2xlarge",
            "ecs.capacity": "spot",
            "ecs.min_tasks": "3",
            "ecs.max_tasks": "8",
            "ecs.placement": "single_az",
            "ecs.load_balancer": "internet_facing",
            "ecs.certificate_arn": CERT,
        }
    )
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (capacity.spot, capacity.min_tasks, capacity.max_tasks, capacity.single_az) == (
        True,
        3,
        8,
        True,
    )
    assert (lb.internet_facing, lb.https, lb.require_token) == (True, True, True)


@pytest.mark.parametrize("instance_type", ["m5.large", "g4ad.xlarge", "inf2.xlarge"])
def test_instance_type_without_an_nvidia_gpu_fails(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(f"ecs.instance_type='{instance_type}': has no NVIDIA GPU")
    assert "g6.*" in problem and "g6e.*" in problem


@pytest.mark.parametrize("instance_type", ["g5g.xlarge", "g6f.xlarge"])
def test_an_nvidia_gpu_this_target_cannot_use_is_named_as_such(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(
        f"ecs.instance_type='{instance_type}': has an NVIDIA GPU this target cannot use"
    )
    assert "Arm hosts and fractional GPUs" in problem


def test_sagemaker_spelling_and_unknown_types_are_named():
    assert ecs_problems(ecs__instance_type="ml.g6.xlarge") == [
        "ecs.instance_type='ml.g6.xlarge': must be an EC2 instance type without 'ml.' (e.g. "
        "'g6.xlarge')"
    ]
    (problem,) = ecs_problems(ecs__instance_type="g6.huge")
    assert problem.startswith("ecs.instance_type='g6.huge': not an EC2 instance type")


def test_min_above_max_fails():
    assert ecs_problems(ecs__min_tasks=5) == ["ecs.max_tasks=4: must be at least ecs.min_tasks=5"]
    assert ecs_problems(ecs__min_tasks=0)[0].startswith("ecs.min_tasks=0: must be at least 1")


def test_internet_facing_needs_a_certificate_and_the_token():
    assert ecs_problems(ecs__load_balancer="internet_facing", ecs__require_token=False) == [
        "ecs.certificate_arn=null: must be set when ecs.load_balancer='internet_facing': an "
        "internet-facing load balancer listens on HTTPS only (the token must not cross the "
        "internet in clear text)",
        "ecs.require_token=false: must be true when ecs.load_balancer='internet_facing': without "
        "SigV4 the bearer token is what keeps strangers off the GPUs",
    ]
    (problem,) = ecs_problems(
        ecs__load_balancer="internet_facing", ecs__certificate_arn=CERT, ecs__require_token=False
    )
    assert problem.startswith("ecs.require_token=false")


def test_certificate_must_be_an_acm_arn_of_the_region():
    (problem,) = ecs_problems(ecs__certificate_arn=CERT.replace("us-east-1", "eu-west-1"))
    assert "is in eu-west-1 but the stack deploys to us-east-1" in problem
    (problem,) = ecs_problems(ecs__certificate_arn="my-cert")
    assert problem.startswith("ecs.certificate_arn='my-cert': must be an ACM certificate ARN")


def test_gpu_memory_of_the_ecs_instance_is_checked():
    # An explicit stream cap above what one T4 (16 GiB) holds at 45000 tokens (3 streams).
    (problem,) = ecs_problems(ecs__instance_type="g4dn.xlarge", voxtral__max_num_seqs=4)
    assert problem.startswith(
        "ecs.instance_type='g4dn.xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs=4: one NVIDIA T4 (16 GiB) holds the weights and KV cache for at "
        "most 3 sequence(s)"
    )
    # auto on a GPU that holds no stream at all.
    (problem,) = ecs_problems(
        ecs__instance_type="g4dn.xlarge",
        voxtral__gpu_memory_utilization=0.6,
        voxtral__alarm_gpu_memory_percent=70,
    )
    assert "for at most 0 sequence(s)" in problem


def test_auto_stream_cap_follows_the_ecs_gpu_not_the_sagemaker_instance_type():
    """voxtral.max_num_seqs=auto is sized by ecs.instance_type's GPU with target=ecs;
    voxtral.instance_type (a SageMaker type) no longer counts, and the scaling target follows."""
    base = {**cdk_json_context(), "voxtral.target": "ecs"}
    l4 = load_settings(base).voxtral
    assert (l4.sizing_instance_types, l4.streams_per_instance, l4.streams_target) == (
        ["ml.g6.xlarge"],
        4,
        2.8,
    )
    l40s = load_settings({**base, "ecs.instance_type": "g6e.2xlarge"}).voxtral
    assert l40s.streams_per_instance == 23  # memory-bound on one L40S at 45000 tokens
    assert l40s.streams_target == pytest.approx(0.7 * 23)
    t4 = load_settings(
        {**base, "ecs.instance_type": "g4dn.xlarge", "voxtral.instance_type": "ml.g6e.2xlarge"}
    ).voxtral
    assert t4.streams_per_instance == 3
    # The SageMaker target still sizes by voxtral.instance_type, whatever ecs.instance_type says.
    sagemaker = load_settings({**cdk_json_context(), "ecs.instance_type": "g6e.2xlarge"}).voxtral
    assert (sagemaker.sizing_instance_types, sagemaker.streams_per_instance) == (
        ["ml.g6.xlarge"],
        4,
    )


def test_an_explicit_stream_cap_above_the_compute_cap_is_a_warning_not_an_error():
    voxtral = load_settings(
        {**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 6}
    ).voxtral
    assert (
        voxtral.streams_per_instance == 6
    )  # fits the L4's memory (8), above its compute cap (4): allowed
    assert voxtral.stream_cap_warning() == (
        "voxtral.max_num_seqs=6 is above the compute cap of one NVIDIA L4 "
        "(ecs.instance_type='g6.xlarge'): the capacity model estimates it decodes at most 4 live "
        "stream(s) of max_model_len=45000 in real time, so streams may fall behind under full "
        "load; set voxtral.max_num_seqs=auto, or measure with bench/capacity_bench.py (README "
        "'Capacity')"
    )
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 4}
        ).voxtral.stream_cap_warning()
        is None
    )
    assert (
        load_settings({**cdk_json_context(), "voxtral.target": "ecs"}).voxtral.stream_cap_warning()
        is None
    )


def test_unknown_choice_lists_the_allowed_ones():
    assert ecs_problems(ecs__capacity="reserved") == [
        "ecs.capacity='reserved': must be one of on_demand, spot"
    ]
    assert ecs_problems(voxtral__target="eks") == [
        "voxtral.target='eks': must be one of sagemaker, ecs"
    ]


def test_private_network_mode_is_accepted_and_asks_for_the_ecs_endpoints():
    settings = load_settings({**cdk_json_context(), "voxtral.target": "ecs", "network.mode": "vpc"})
    assert settings.uses_ecs and settings.network.network_props(ecs=settings.uses_ecs).ecs_endpoints
    # The SageMaker target in vpc mode asks for none; nor does an existing VPC that brings its own
    # endpoints.
    sagemaker = load_settings({**cdk_json_context(), "network.mode": "vpc"})
    assert (
        not sagemaker.uses_ecs
        and not sagemaker.network.network_props(ecs=sagemaker.uses_ecs).ecs_endpoints
    )
    assert (
        not settings.network.__class__(mode="vpc", create_endpoints=False)
        .network_props(ecs=True)
        .ecs_endpoints
    )


# ---- the operations keys: types, defaults and one clear message per broken rule ----------------


def operations_problems(overrides: dict) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings({**cdk_json_context(), **overrides})
    return caught.value.problems


def test_operations_defaults():
    s = load_settings(cdk_json_context())
    assert s.alarm_email is None
    v = s.voxtral
    assert (v.min_instances, v.max_instances, v.scaling_target_fraction, v.scale_in_cooldown_s) == (
        1,
        4,
        0.7,
        600,
    )
    assert (v.rollout_batch_percent, v.rollout_wait_s, v.rollback_5xx_error_percent) == (
        None,
        600,
        5.0,
    )
    assert (
        v.alarm_model_latency_p90_ms,
        v.alarm_time_to_first_delta_p90_ms,
        v.alarm_active_streams_fraction,
    ) == (500, 2000, 0.9)
    assert (s.sonic.scaling_metric, s.sonic.scaling_target, s.sonic.max_instances) == (
        "invocations_per_instance",
        60,
        2,
    )


def test_operations_command_line_strings_are_converted():
    s = load_settings(
        {
            **cdk_json_context(),
            "alarm_email": "ops@example.com",
            "voxtral.max_instances": "6",
            "voxtral.scaling_target_fraction": "0.5",
            "sonic.alarm_model_latency_p90_ms": "1500",
        }
    )
    assert s.alarm_email == "ops@example.com"
    assert s.voxtral.max_instances == 6 and s.voxtral.scaling_target_fraction == 0.5
    assert s.sonic.alarm_model_latency_p90_ms == 1500.0


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"alarm_email": "not-an-address"},
            "alarm_email='not-an-address': must be one e-mail address such as "
            "'oncall@example.com', or null",
        ),
        (
            {"voxtral.min_instances": 0},
            "voxtral.min_instances=0: must be at least 1 (a real-time endpoint keeps one instance)",
        ),
        (
            {"sonic.min_instances": 3, "sonic.max_instances": 2},
            "sonic.max_instances=2: must be at least sonic.min_instances=3",
        ),
        (
            {"voxtral.initial_instance_count": 5},
            "voxtral.initial_instance_count=5: must be between voxtral.min_instances=1 and "
            "voxtral.max_instances=4",
        ),
        (
            {"voxtral.scale_in_cooldown_s": 20},
            "voxtral.scale_in_cooldown_s=20: must be more than 25 and at most 86400 seconds "
            "(longer than the bridge's drain time, DRAIN_S=25 s)",
        ),
        (
            {"sonic.scale_in_cooldown_s": 0},
            "sonic.scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds",
        ),
        (
            {"voxtral.scaling_target_fraction": 1.5},
            "voxtral.scaling_target_fraction=1.5: must be more than 0 and at most 1 (live "
            "streams per instance as a fraction of voxtral.max_num_seqs)",
        ),
        (
            {"voxtral.alarm_active_streams_fraction": 0.6},
            "voxtral.alarm_active_streams_fraction=0.6: must be more than "
            "voxtral.scaling_target_fraction=0.7 and at most 1, or the alarm fires whenever "
            "autoscaling holds its target",
        ),
        (
            {"voxtral.rollout_batch_percent": 60},
            "voxtral.rollout_batch_percent=60: must be between 5 and 50 (percent of the "
            "variant's instances; RollingUpdatePolicy MaximumBatchSize)",
        ),
        (
            {"voxtral.rollback_5xx_error_percent": 100},
            "voxtral.rollback_5xx_error_percent=100.0: must be a percent of requests, more than "
            "0 and less than 100 (the rollback alarm fires above it)",
        ),
        (
            {"voxtral.rollout_wait_s": 4000},
            "voxtral.rollout_wait_s=4000: must be between 0 and 3600 seconds "
            "(RollingUpdatePolicy WaitIntervalInSeconds)",
        ),
        (
            {"voxtral.alarm_gpu_memory_percent": 85},
            "voxtral.alarm_gpu_memory_percent=85.0: must be above voxtral.gpu_memory_utilization "
            "x 100 = 90: vLLM reserves that much GPU memory at start, so the alarm would always "
            "fire",
        ),
        (
            {"sonic.alarm_cpu_utilization_percent": 150},
            "sonic.alarm_cpu_utilization_percent=150.0: must be a percent of each vCPU's "
            "capacity, more than 0 and less than 100 (the alarm fires above it, and use never "
            "exceeds 100 %)",
        ),
        # Exactly 100: "greater than 100" can never happen, so the alarm could never fire.
        (
            {"voxtral.alarm_gpu_utilization_percent": 100},
            "voxtral.alarm_gpu_utilization_percent=100.0: must be a percent of each GPU's "
            "capacity, more than 0 and less than 100 (the alarm fires above it, and use never "
            "exceeds 100 %)",
        ),
        (
            {"voxtral.alarm_gpu_memory_percent": 100},
            "voxtral.alarm_gpu_memory_percent=100.0: must be a percent of each GPU's memory, "
            "more than 0 and less than 100 (the alarm fires above it, and use never exceeds 100 "
            "%)",
        ),
        (
            {"sonic.alarm_memory_percent": 100},
            "sonic.alarm_memory_percent=100.0: must be a percent of the instance's memory, more "
            "than 0 and less than 100 (the alarm fires above it, and use never exceeds 100 %)",
        ),
        (
            {"sonic.alarm_disk_percent": 0},
            "sonic.alarm_disk_percent=0.0: must be a percent of the instance's disk, more than 0 "
            "and less than 100 (the alarm fires above it, and use never exceeds 100 %)",
        ),
        (
            {"voxtral.alarm_model_latency_p90_ms": 0},
            "voxtral.alarm_model_latency_p90_ms=0.0: must be a positive number of milliseconds",
        ),
        (
            {"voxtral.alarm_time_to_first_delta_p90_ms": -1},
            "voxtral.alarm_time_to_first_delta_p90_ms=-1.0: must be a positive number of "
            "milliseconds",
        ),
        (
            {"sonic.alarm_5xx_errors": -1},
            "sonic.alarm_5xx_errors=-1: must be 0 or more (errors in 5 minutes above which the "
            "alarm fires)",
        ),
        (
            {"sonic.scaling_metric": "cpu"},
            "sonic.scaling_metric='cpu': must be one of invocations_per_instance, "
            "concurrent_requests",
        ),
        (
            {"sonic.scaling_target": 0},
            "sonic.scaling_target=0.0: must be a positive number (per instance: invocations per "
            "minute, or concurrent requests)",
        ),
        ({"voxtral.rollout_wait_s": "ten"}, "voxtral.rollout_wait_s='ten': must be a whole number"),
    ],
)
def test_each_rule_gives_one_clear_message(overrides, expected):
    assert operations_problems(overrides) == [expected]


def test_a_disabled_endpoint_is_not_checked():
    s = load_settings({**cdk_json_context(), "sonic.enabled": "false", "sonic.min_instances": "0"})
    assert s.sonic.enabled is False


# --- Private mode: bad settings, one clear message each -----------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its
# endpoints and security groups, both Models isolated in it, every data-holding resource under the
# key), its checks (cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint),
# an existing VPC, and a key given by ARN in public mode. The variants come from the registry
# (tests/app/variants.py).


EXISTING_TWO_ZONES = {
    "network.mode": "vpc",
    "network.vpc_id": "vpc-0123456789abcdef0",
    "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "network.availability_zones": "us-east-1a,us-east-1b",
    "network.vpc_cidr": "10.0.0.0/16",
    "network.create_endpoints": "false",
}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {**EXISTING_TWO_ZONES, "network.availability_zones": "us-east-1a,us-east-1a"},
            'network.subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]: '
            "must be in at least 2 "
            "Availability Zones (SageMaker hosting in a VPC); all are in us-east-1a",
        ),
        (
            {"network.mode": "vpc", "network.max_azs": "1"},
            "network.max_azs=1: must be at least 2 (SageMaker hosting in a VPC needs subnets in "
            "two Availability Zones)",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.vpc_id": "vpc-xyz"},
            "network.vpc_id='vpc-xyz': must be a VPC id such as 'vpc-0123456789abcdef0'",
        ),
        (
            {
                **EXISTING_TWO_ZONES,
                "network.subnet_ids": "sg-0123456789abcdef0,subnet-0123456789abcdef1",
            },
            'network.subnet_ids=["sg-0123456789abcdef0", "subnet-0123456789abcdef1"]: must '
            "be subnet ids such as "
            "'subnet-0123456789abcdef0'; not: 'sg-0123456789abcdef0'",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.security_group_ids": "subnet-0123456789abcdef0"},
            'network.security_group_ids=["subnet-0123456789abcdef0"]: must be security group '
            "ids such as "
            "'sg-0123456789abcdef0'; not: 'subnet-0123456789abcdef0'",
        ),
        (
            {
                "encryption.kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-"
                "0908-0706-050403020100"
            },
            "encryption.kms_key_arn='arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-"
            "0706-050403020100': the key is in eu-west-1 but the stack deploys to us-east-1",
        ),
        (
            {"encryption.kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/data"},
            "encryption.kms_key_arn='arn:aws:kms:us-east-1:123456789012:alias/data': must be a "
            "KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants "
            "need the key)",
        ),
        (
            {
                "encryption.kms_key_arn": "arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-"
                "0706-050403020100"
            },
            "encryption.kms_key_arn='arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-"
            "050403020100': must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; "
            "not an alias, IAM grants need the key)",
        ),
        (
            {"network.subnet_ids": "subnet-0123456789abcdef0"},
            'network.subnet_ids=["subnet-0123456789abcdef0"]: set only with network.mode=vpc '
            "(public mode uses "
            "SageMaker-managed networking)",
        ),
        (
            {"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0"},
            "network.vpc_cidr=null: must be the CIDR block of the VPC network.vpc_id (what its "
            "endpoints let in)",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.create_endpoints": "true"},
            "network.route_table_ids=[]: must name the route table of each of the 2 subnet(s) "
            "(the S3 gateway endpoint is added to them), or set network.create_endpoints=false "
            "if the VPC has its endpoints",
        ),
    ],
)
def test_bad_private_settings_fail_with_one_clear_message(overrides, message):
    from config.settings import SettingsError, load_settings
    from tests.conftest import cdk_json_context

    with pytest.raises(SettingsError) as error:
        load_settings({**cdk_json_context(), **overrides})
    assert error.value.problems == [message]


# --- ECS in vpc mode ----------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


def test_internet_facing_in_vpc_mode_fails_with_a_clear_message():
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    with pytest.raises(SettingsError) as caught:
        load_settings(
            {
                **cdk_json_context(),
                **PRIVATE_ECS,
                "ecs.load_balancer": "internet_facing",
                "ecs.certificate_arn": cert,
            }
        )
    assert caught.value.problems == [
        "ecs.load_balancer='internet_facing' with network.mode='vpc': the private network has no "
        "internet gateway; use ecs.load_balancer='internal' (callers reach it from the VPC, "
        "peered networks or on premises), or network.mode='public'"
    ]


# --- Sonic on ECS -------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct
# as Voxtral's, without the bridge's parts; its settings and their errors; public mode and vpc mode
# with both services on ECS.


def sonic_problems(**overrides) -> list[str]:
    """problems_for with sonic.target=ecs."""
    return problems_for(**{"sonic__target": "ecs", **overrides})


def test_the_image_is_required_and_must_be_in_ecr_of_the_region():
    assert sonic_problems() == [
        "sonic.image_uri=null: must be set with sonic.target='ecs': the Sonic container your "
        "Cartesia licence provides, in ECR (it is not public; README 'Sonic on ECS')"
    ]
    (problem,) = sonic_problems(sonic__image_uri="cartesia/sonic:3.6")
    assert problem.startswith("sonic.image_uri='cartesia/sonic:3.6': must be a private ECR image")
    (problem,) = sonic_problems(sonic__image_uri=IMAGE.replace("us-east-1", "eu-west-1"))
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_outside_1_to_65535_fails(port):
    assert sonic_problems(sonic__image_uri=IMAGE, sonic__container_port=port) == [
        f"sonic.container_port={port}: must be a TCP port 1-65535 (the port the container "
        "listens on; with awsvpc networking every port of the task's own interface is free)"
    ]


@pytest.mark.parametrize("path", ["ping", "/ping?deep=1", "/my path", "", "/" + "a" * 1024])
def test_a_health_path_not_starting_with_a_slash_or_with_a_query_fails(path):
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__health_path=path)
    if path == "":
        assert problems == [
            "sonic.health_path='': must be set: this setting has no 'unset' value (null is allowed "
            "for optional settings only)"
        ]
    else:
        assert problems == [
            f"sonic.health_path={path!r}: must be a URL path starting with '/' (e.g. '/ping'), at "
            "most 1024 characters, without spaces or a query string ('?')"
        ]


def test_good_ports_and_paths_pass():
    for port, path in [(1, "/"), (65535, "/v1/health"), (443, "/healthz")]:
        settings = load_settings(
            {
                **cdk_json_context(),
                "sonic.target": "ecs",
                "sonic.image_uri": IMAGE,
                "sonic.container_port": port,
                "sonic.health_path": path,
            }
        )
        assert (settings.sonic.container_port, settings.sonic.health_path) == (port, path)


def test_instance_type_scaling_metric_and_task_range_are_checked():
    problems = sonic_problems(
        sonic__image_uri=IMAGE,
        sonic__ecs_instance_type="m5.large",
        sonic__scaling_metric="concurrent_requests",
        sonic__min_instances=3,
    )
    assert [p.split(":")[0] for p in problems] == [
        "sonic.max_instances=2",
        "sonic.ecs_instance_type='m5.large'",
        "sonic.scaling_metric='concurrent_requests'",
    ]
    assert problems[0] == "sonic.max_instances=2: must be at least sonic.min_instances=3"
    assert problems[1].startswith("sonic.ecs_instance_type='m5.large': has no NVIDIA GPU")
    assert problems[2].startswith(
        "sonic.scaling_metric='concurrent_requests': must be 'invocations_per_instance' "
        "with sonic.target='ecs'"
    )


def test_sagemaker_only_checks_do_not_apply_on_ecs():
    # No Marketplace package in eu-west-1: a problem for SageMaker, none for the licensed container
    # on ECS.
    image = IMAGE.replace("us-east-1", "eu-west-1")
    settings = load_settings(
        {
            **cdk_json_context(),
            "region": "eu-west-1",
            "voxtral.enabled": False,
            "sonic.target": "ecs",
            "sonic.image_uri": image,
        }
    )
    assert settings.sonic_on_ecs and settings.uses_ecs
    capacity = settings.sonic.ecs_capacity(settings.ecs)
    assert (capacity.instance_type, capacity.min_tasks, capacity.max_tasks) == ("g6e.xlarge", 1, 2)
    assert settings.sonic.ecs_load_balancing(settings.ecs).internet_facing is False


# --- Connect ------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"connect.instance_arn": None},
            "connect.instance_arn=null: must name the Amazon Connect instance",
        ),
        (
            {"connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-west-1")},
            "must be in the app's region",
        ),
        (
            {"connect.instance_arn": "arn:aws:connect:us-east-1:123:instance/x"},
            "must be an Amazon Connect instance ARN",
        ),
        (
            {"connect.stream_kms_key_arn": "alias/connect"},
            "connect.stream_kms_key_arn='alias/connect': must be a KMS key ARN",
        ),
        (
            {
                "connect.stream_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/11111111-"
                "2222-3333-4444-555555555555"
            },
            "the key is in eu-west-1 but the stack deploys to us-east-1",
        ),
        ({"connect.alarm_millis_behind": -1}, "connect.alarm_millis_behind=-1: must be at least 1"),
        ({"connect.retention_hours": 0}, "0 keeps no data"),
        (
            {"connect.queue_arn": None},
            "connect.queue_arn=null: must name the queue the example flow transfers calls to",
        ),
        ({"connect.queue_arn": CONNECT_INSTANCE}, "must be an Amazon Connect queue ARN"),
        (
            {"connect.queue_arn": CONNECT_QUEUE.replace("11111111-", "22222222-")},
            "must be a queue of the instance",
        ),
        (
            {"connect.cpu": 1000},
            "connect.cpu=1000: must be Fargate task CPU units, one of 256, 512, 1024, 2048",
        ),
        (
            {"connect.memory_mib": 1024},
            "connect.memory_mib=1024: must be a memory Fargate pairs with connect.cpu=1024: "
            "2048, 3072, 4096, 5120, 6144, 7168, 8192 MiB",
        ),
        (
            {"connect.cpu": 8192, "connect.memory_mib": 18432},
            "pairs with connect.cpu=8192: 16384-61440 in steps of 4096 MiB",
        ),
        ({"connect.stream_prefix": "bad prefix"}, "must be 1-128 of [a-zA-Z0-9_.-]"),
        ({"encryption.create_key": False}, "needs a KMS key (EncryptionConfig is required)"),
        (
            {"network.mode": "vpc", "connect.kvs_vpc_endpoint": False},
            "connect.kvs_vpc_endpoint=false: must be true with network.mode=vpc and no "
            "network.vpc_id",
        ),
        (
            {"network.mode": "vpc", "network.create_endpoints": False},
            "keep network.create_endpoints=true",
        ),
        (
            {
                "network.mode": "vpc",
                "region": "eu-north-1",
                "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
                "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1"),
            },
            "name an existing VPC whose subnets have egress (network.vpc_id)",
        ),
        ({"voxtral.enabled": False}, "needs voxtral.enabled=true"),
        (
            {
                **CONNECT_VPC,
                "region": "eu-north-1",
                "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
                "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1"),
            },
            "Kinesis Video Streams has no interface VPC endpoint in eu-north-1 (it has one in "
            "af-south-1",
        ),
    ],
)
def test_connect_settings_are_refused_with_the_rule_they_break(overrides, expected):
    with pytest.raises(SettingsError) as raised:
        load_settings({**cdk_json_context(), **CONNECT, **overrides})
    assert expected in str(raised.value)


# --- Instance pools: every pool type is checked like the instance type --------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def test_an_l4_and_an_l40s_pool_get_a_model_and_a_cap_each():
    from stacks.composition import container_environment, pool_environment

    context = {
        **cdk_json_context(),
        "voxtral.instance_type": "ml.g6.xlarge",
        "voxtral.instance_pools": "ml.g6.xlarge,ml.g6e.xlarge",
    }
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {"ml.g6.xlarge": 4, "ml.g6e.xlarge": 23}
    assert container_environment(voxtral, "ml.g6.xlarge")["SM_VLLM_MAX_NUM_SEQS"] == "4"
    assert pool_environment(voxtral) == {"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}}
    # An explicit max_num_seqs is one cap for all: no pool needs a Model of its own.
    context["voxtral.max_num_seqs"] = "4"
    assert pool_environment(load_settings(context).voxtral) == {}


def test_alarm_capacity_is_the_fewest_of_each():
    assert instance_types.alarm_capacity(["ml.g6e.12xlarge", "ml.g6e.2xlarge"]) == (1, 8)
    assert instance_types.alarm_capacity(["ml.g6e.48xlarge", "ml.g6e.12xlarge"]) == (4, 48)
    assert instance_types.alarm_capacity(["ml.g6.4xlarge"]) == (1, 16)
    with pytest.raises(
        ValueError, match=r"\['ml.g9.xlarge'\]: not in constructs_lib/facts/instance_types.py"
    ):
        instance_types.alarm_capacity(["ml.g6.4xlarge", "ml.g9.xlarge"])


def test_an_unknown_type_in_the_pools_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.g9.xlarge") == [
        "voxtral.instance_pools='ml.g9.xlarge': not a SageMaker real-time instance type "
        "(expected one of SageMaker's ProductionVariant types of the form 'ml.<family>.<size>', "
        "e.g. 'ml.g6.4xlarge')"
    ]


def test_a_duplicate_type_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6e.4xlarge,ml.g6e.2xlarge") == [
        'sonic.instance_pools=["ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.2xlarge"]: lists '
        "ml.g6e.2xlarge more than "
        "once; each instance type is one pool"
    ]


def test_a_type_that_cannot_hold_max_num_seqs_is_named():
    # At 45000 tokens (constructs_lib/facts/capacity.py), one L40S (ml.g6e.2xlarge) holds 23 live
    # streams; one L4 (ml.g6.4xlarge) 8.
    problems = problems_for(
        voxtral__instance_type="ml.g6e.2xlarge",
        voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge",
        voxtral__max_num_seqs="9",
    )
    assert len(problems) == 1
    assert problems[0].startswith(
        "voxtral.instance_pools='ml.g6.4xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs=9: one NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds "
        "the weights (8.3 GiB), activations and CUDA graphs (1.5 GiB) and KV cache (10.5 GiB) "
        "for at most 8 live stream(s) of that length"
    )


def test_auto_sizes_each_pool_type_and_the_smallest_cap_sizes_stream_counts():
    context = {
        **cdk_json_context(),
        "voxtral.instance_type": "ml.g6e.2xlarge",
        "voxtral.instance_pools": "ml.g6e.2xlarge,ml.g6.4xlarge",
    }
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {
        "ml.g6e.2xlarge": 23,
        "ml.g6.4xlarge": 4,
    }  # the L4's compute budget
    assert voxtral.streams_per_instance == 4 and voxtral.caps_differ
    context["voxtral.instance_pools"] = "ml.g6e.2xlarge,ml.g6e.4xlarge"
    voxtral = load_settings(context).voxtral
    assert voxtral.streams_per_instance == 23 and not voxtral.caps_differ


def test_a_type_without_gpu_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.m5.xlarge") == [
        "voxtral.instance_pools='ml.m5.xlarge': has no GPU; vLLM needs one (GPU types: "
        f"{instance_types.gpu_families()})"
    ]


def test_a_type_the_sonic_package_does_not_support_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        "sonic.instance_pools='ml.g6.4xlarge': the Sonic 3.6 model package supports "
        "ml.g6e.xlarge or larger, ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, "
        "ml.p5.48xlarge and ml.p5en.48xlarge"
    ]


def test_the_pools_start_with_the_instance_type_and_count_at_most_five():
    assert problems_for(voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        'voxtral.instance_pools=["ml.g6e.2xlarge", "ml.g6.4xlarge"]: must start with '
        "voxtral.instance_type="
        "'ml.g6.xlarge', the priority-1 pool (set both: the instance type is the one tried first)"
    ]
    six = "ml.g6.xlarge,ml.g6.8xlarge,ml.g6.16xlarge,ml.g6e.xlarge,ml.g6e.2xlarge,ml.g6e.4xlarge"
    assert problems_for(voxtral__instance_pools=six) == [
        f"voxtral.instance_pools={json.dumps(six.split(','))}: must list at most 5 instance "
        "types (InstancePools)"
    ]


def test_the_provisioning_timeout_is_300_to_3600_seconds():
    assert problems_for(voxtral__instance_provision_timeout_s="120") == [
        "voxtral.instance_provision_timeout_s=120: must be between 300 and 3600 seconds "
        "(VariantInstanceProvisionTimeoutInSeconds)"
    ]


def test_the_variant_props_check_the_same_rules_by_prop_name():
    p = Problems()
    ProductionVariant(
        "ml.g6.4xlarge", instance_pools=("ml.g6.4xlarge", "ml.g6.4xlarge"), provision_timeout_s=4000
    ).problems(p)
    assert list(p) == [
        "provision_timeout_s=4000: must be between 300 and 3600 seconds "
        "(VariantInstanceProvisionTimeoutInSeconds)",
        'instance_pools=["ml.g6.4xlarge", "ml.g6.4xlarge"]: lists ml.g6.4xlarge more than '
        "once; each instance type is "
        "one pool",
    ]
    assert ProductionVariant("ml.g6.4xlarge").instance_types == ("ml.g6.4xlarge",)
    assert ProductionVariant("ml.g6.4xlarge").instance_provision_timeout_s is None
