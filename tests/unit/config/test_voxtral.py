"""config/voxtral.py: the model, its weights and image, whether one GPU holds the streams asked for,
the KV-cache type and the transcription delay, each bad value named."""

from __future__ import annotations

import pytest

from config.settings import load_settings
from constructs_lib.facts import instance_types
from tests.conftest import cdk_json_context
from tests.unit.config.conftest import one_problem, problems_for


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


def test_gpu_memory_too_small_for_model_len_times_seqs():
    problem = one_problem(**{"voxtral.max_num_seqs": 16})
    assert problem.startswith(
        "voxtral.instance_type='ml.g6.xlarge' with voxtral.max_model_len=45000 and "
        "voxtral.max_num_seqs=16"
    )
    # The figures of the capacity model (constructs_lib/facts/capacity.py) are in the message.
    assert (
        "one NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the weights (8.3 GiB), "
        "activations and CUDA "
        "graphs (1.5 GiB) and KV cache (10.5 GiB) for at most 8 live stream(s) of that length "
        "(1.30 GiB of KV "
        "each); lower max_num_seqs or max_model_len"
    ) in problem
    # The blog's configuration (4 one-hour sessions on one L4) is accepted; a smaller model length
    # makes room for more.
    assert (
        load_settings(
            {**cdk_json_context(), "voxtral.max_num_seqs": 4}
        ).capacity_plan.streams_per_instance
        == 4
    )
    settings = load_settings(
        {**cdk_json_context(), "voxtral.max_model_len": 3000, "voxtral.max_num_seqs": 12}
    )
    assert settings.voxtral.stream_cap == 12


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


def test_image_uri_must_be_private_ecr_in_the_stack_region():
    assert "must be a private ECR image" in one_problem(
        **{"voxtral.image_uri": "docker.io/library/bridge:1"}
    )
    problem = one_problem(
        **{"voxtral.image_uri": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"}
    )
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


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
            "voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hub-AbCdEf"  # noqa: E501 (an ARN has no place to break)
        }
    )
    # The complete ARN (with Secrets Manager's 6-character suffix) is needed for an exact IAM grant.
    assert "must be a Secrets Manager secret ARN" in one_problem(
        **{
            "voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub"  # noqa: E501 (an ARN has no place to break)
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
        "voxtral.inference_ami_version='latest': must be one of al2-ami-sagemaker-inference-gpu-2, "
        "al2-ami-sagemaker-inference-gpu-2-1, al2-ami-sagemaker-inference-gpu-3-1, "
        "al2023-ami-sagemaker-inference-gpu-4-1"
    )


# --- voxtral.kv_cache_dtype -----------------------------------------------------------------------


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
    from config.bridge import container_environment

    context = cdk_json_context()
    for target in ("sagemaker", "ecs"):
        unset = load_settings({**context, "voxtral.target": target})
        assert "TRANSCRIPTION_DELAY_MS" not in container_environment(unset)
        delayed = load_settings(
            {**context, "voxtral.target": target, "voxtral.transcription_delay_ms": "160"}
        )
        assert container_environment(delayed)["TRANSCRIPTION_DELAY_MS"] == "160"
    assert context["voxtral.transcription_delay_ms"] is None  # cdk.json: the checkpoint's own


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
        "voxtral.max_num_seqs=9: one NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the "
        "weights (8.3 GiB), activations and CUDA graphs (1.5 GiB) and KV cache (10.5 GiB) for at "
        "most 8 live stream(s) of that length"
    )


def test_a_type_without_gpu_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.m5.xlarge") == [
        "voxtral.instance_pools='ml.m5.xlarge': has no GPU; vLLM needs one (GPU types: "
        f"{instance_types.gpu_families()})"
    ]


def test_max_model_len_is_at_most_the_models_context():
    """vLLM refuses a --max-model-len above the checkpoint's max_position_embeddings at start: a
    settings problem, not an endpoint that never becomes healthy."""
    assert one_problem(voxtral__max_model_len="131073") == (
        "voxtral.max_model_len=131073: must be at most 131072: the model's context "
        "(max_position_embeddings); vLLM refuses a longer one at start"
    )
    assert problems_for(voxtral__max_model_len="1000000000")[0].startswith(
        "voxtral.max_model_len=1000000000: must be at most 131072"
    )
