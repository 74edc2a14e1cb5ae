"""Settings: parsed once from context, typed, frozen; every bad value gives one clear message."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from config.models import max_num_seqs_that_fit
from config.settings import SettingsError, default_context, load_settings
from constructs_lib.facts import instance_types
from tests.conftest import ROOT, cdk_json_context

OTHER_REGION_ARN = "arn:aws:sagemaker:eu-west-1:123456789012:model-package/sonic36-abc"


def problems_for(**overrides) -> list[str]:
    """The problems load_settings reports for cdk.json's context plus ``overrides`` (dots as in the keys)."""
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
    assert settings.sonic_model_package_arn.endswith("sonic36-sagemaker-v0-c6e9cacffcdf31178d1bd7c98c587480")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.voxtral.max_num_seqs = 3  # type: ignore[misc]


def test_command_line_strings_are_converted():
    settings = load_settings({
        **cdk_json_context(),
        "voxtral.initial_instance_count": "3",
        "voxtral.enabled": "true",
        "sonic.enabled": "false",
        "retain_data": "yes",
        "voxtral.gpu_memory_utilization": "0.85",
        "voxtral.model_s3_uri": "s3://my-bucket/weights/voxtral",
        "voxtral.image_uri": "null",
    })
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
    settings = load_settings({
        **cdk_json_context(),
        "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
        "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
        "aws:cdk:enable-path-metadata": True,
    })
    assert settings.region == "us-east-1"


def test_not_an_instance_type():
    problem = one_problem(**{"voxtral.instance_type": "g6.4xlarge"})
    assert problem.startswith("voxtral.instance_type='g6.4xlarge': not a SageMaker real-time instance type")
    assert "ml.<family>.<size>" in problem


def test_unknown_instance_family_is_not_a_sagemaker_type():
    assert "not a SageMaker real-time instance type" in one_problem(**{"voxtral.instance_type": "ml.zz9.xlarge"})


def test_sagemaker_type_without_catalogue_facts_names_the_catalogue():
    problem = one_problem(**{"voxtral.instance_type": "ml.inf2.xlarge"})
    assert "constructs_lib/facts/instance_types.py" in problem and "ml.g6.*" in problem


def test_catalogue_holds_only_sagemaker_types():
    assert set(instance_types.CATALOGUE) <= instance_types.sagemaker_instance_types()


def test_voxtral_needs_a_gpu():
    assert "has no GPU" in one_problem(**{"voxtral.instance_type": "ml.m5.xlarge"})


@pytest.mark.parametrize(("key", "value", "shown", "gpus"), [
    ("voxtral.instance_type", "ml.g6.12xlarge", "'ml.g6.12xlarge'", 4),
    ("voxtral.instance_pools", "ml.g6.xlarge,ml.g6e.48xlarge", "'ml.g6e.48xlarge'", 8),
])
def test_voxtral_on_sagemaker_refuses_a_type_of_several_gpus(key, value, shown, gpus):
    """The endpoint runs one vLLM on one GPU: the others would be billed idle, and the GPU alarms, scaled by the
    instance's GPUs, would wait for a level one GPU never reaches (voicectl capacity --compare leaves them out)."""
    problem = one_problem(**{key: value})
    assert problem.startswith(f"{key}={shown}: has {gpus} GPUs; the endpoint runs one vLLM on one GPU, so "
                              f"{gpus - 1} would idle")
    assert "voxtral.target=ecs" in problem


def test_voxtral_on_ecs_keeps_its_own_instance_type_check():
    settings = load_settings({**cdk_json_context(), "voxtral.target": "ecs",
                              "voxtral.instance_type": "ml.g6.12xlarge"})
    assert settings.voxtral.target == "ecs"


def test_sonic_instance_type_must_be_supported_by_the_package():
    problem = one_problem(**{"sonic.instance_type": "ml.g6.4xlarge"})
    assert problem.startswith("sonic.instance_type='ml.g6.4xlarge': the Sonic 3.6 model package supports")
    assert "ml.g6e.xlarge or larger" in problem and "ml.p5en.48xlarge" in problem


@pytest.mark.parametrize("instance_type", ["ml.g6e.xlarge", "ml.g6e.48xlarge", "ml.g7e.2xlarge", "ml.g7.2xlarge", "ml.p5.48xlarge", "ml.p5en.48xlarge"])
def test_sonic_supported_instance_types_are_accepted(instance_type):
    settings = load_settings({**cdk_json_context(), "sonic.instance_type": instance_type})
    assert settings.sonic.instance_type == instance_type


def test_gpu_memory_too_small_for_model_len_times_seqs():
    problem = one_problem(**{"voxtral.max_num_seqs": 16})
    assert problem.startswith("voxtral.instance_type='ml.g6.xlarge' with voxtral.max_model_len=45000 and voxtral.max_num_seqs=16")
    # The figures of the capacity model (constructs_lib/facts/capacity.py) are in the message.
    assert ("one NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the weights (8.3 GiB), activations and CUDA "
            "graphs (1.5 GiB) and KV cache (10.5 GiB) for at most 8 live stream(s) of that length (1.30 GiB of KV "
            "each); lower max_num_seqs or max_model_len") in problem
    # The blog's configuration (4 one-hour sessions on one L4) is accepted; a smaller model length makes room for more.
    assert load_settings({**cdk_json_context(), "voxtral.max_num_seqs": 4}).voxtral.streams_per_instance == 4
    settings = load_settings({**cdk_json_context(), "voxtral.max_model_len": 3000, "voxtral.max_num_seqs": 12})
    assert settings.voxtral.max_num_seqs == 12


def test_gpu_memory_estimate_values():
    l4 = instance_types.lookup("ml.g6.4xlarge")
    t4 = instance_types.lookup("ml.g4dn.xlarge")
    l40s = instance_types.lookup("ml.g6e.xlarge")
    assert max_num_seqs_that_fit(l4, 45000, 0.9) == 8
    assert max_num_seqs_that_fit(t4, 45000, 0.9) == 3  # the catalogue's 16 GiB: no pinned facts for the T4
    assert max_num_seqs_that_fit(t4, 45000, 0.6) == 0  # 9.6 GiB: the weights and overhead leave no room
    assert max_num_seqs_that_fit(l40s, 45000, 0.9) == 23
    problem = one_problem(**{"voxtral.instance_type": "ml.g4dn.xlarge", "voxtral.gpu_memory_utilization": 0.6})
    assert problem.startswith("voxtral.instance_type='ml.g4dn.xlarge' with voxtral.max_model_len=45000 and "
                              "voxtral.max_num_seqs='auto': one NVIDIA T4 (16.0 GiB, 0.6 of it for vLLM: 9.6 GiB) "
                              "holds the weights (8.3 GiB), activations and CUDA graphs (1.5 GiB) and KV cache (0.0 GiB) "
                              "for at most 0 live stream(s)")
    assert "raise gpu_memory_utilization, lower max_model_len, or choose a GPU with more memory" in problem


def test_max_num_seqs_auto_resolves_per_instance_type_and_reaches_the_bridge_scaling_and_alarms():
    settings = load_settings(cdk_json_context())
    assert settings.voxtral.max_num_seqs == "auto"
    assert settings.voxtral.streams_per_instance == 4  # one L4 at 45000 tokens: the compute budget, below the fit of 8
    assert settings.voxtral.streams_target == pytest.approx(0.7 * 4)
    assert settings.voxtral.bridge_thresholds().stream_cap == 4
    l40s = load_settings({**cdk_json_context(), "voxtral.instance_type": "ml.g6e.xlarge"}).voxtral
    assert l40s.streams_per_instance == 23
    assert load_settings({**cdk_json_context(), "voxtral.max_num_seqs": "3"}).voxtral.streams_per_instance == 3


@pytest.mark.parametrize("key,value,expected", [
    ("voxtral.initial_instance_count", "two", "voxtral.initial_instance_count='two': must be a whole number"),
    ("voxtral.initial_instance_count", 1.5, "voxtral.initial_instance_count=1.5: must be a whole number"),
    ("voxtral.initial_instance_count", 0, "voxtral.initial_instance_count=0: must be a positive whole number"),
    ("sonic.initial_instance_count", "-1", "sonic.initial_instance_count=-1: must be a positive whole number"),
    ("voxtral.max_num_seqs", 0, "voxtral.max_num_seqs=0: must be a positive whole number"),
    ("voxtral.enabled", "maybe", "voxtral.enabled='maybe': must be true or false"),
])
def test_counts_and_flags(key, value, expected):
    assert one_problem(**{key: value}) == expected


@pytest.mark.parametrize("uri", ["my-bucket/prefix", "s3://my-bucket", "s3://my-bucket/", "s3://my-bucket///",
                                 "https://my-bucket.s3.amazonaws.com/x", "s3://Bad_Bucket/x"])
def test_s3_uri_must_be_bucket_and_prefix(uri):
    assert one_problem(**{"voxtral.model_s3_uri": uri}).startswith(
        f"voxtral.model_s3_uri='{uri}': must be 's3://<bucket>/<prefix>' with a valid bucket name")


@pytest.mark.parametrize("uri", ["s3://my-bucket/weights/*", "s3://my-bucket/a b", "s3://my-bucket/a//b", "s3://my-bucket/w?"])
def test_s3_prefix_must_be_plain(uri):
    assert "without wildcards" in one_problem(**{"voxtral.model_s3_uri": uri})


def test_endpoint_name_at_most_63_characters():
    name = "a" + "-" * 69 + "b"
    assert one_problem(**{"voxtral.endpoint_name": name}).startswith(f"voxtral.endpoint_name='{name}': must be 1-63")
    assert load_settings({**cdk_json_context(), "voxtral.endpoint_name": "a" * 63}).voxtral.endpoint_name == "a" * 63


def test_null_for_a_required_setting_is_refused():
    assert one_problem(**{"voxtral.endpoint_name": "null"}).startswith("voxtral.endpoint_name='null': must be set")
    assert one_problem(**{"region": ""}).startswith("region='': must be set")


@pytest.mark.parametrize("arn,ok", [
    ("arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100", True),
    ("arn:aws:kms:us-east-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab", True),
    ("arn:aws:kms:us-east-1:123456789012:alias/sagemaker-volumes", True),
    ("arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100", False),
    ("0f0e0d0c-0b0a-0908-0706-050403020100", False),
])
def test_volume_kms_key(arn, ok):
    context = {**cdk_json_context(), "voxtral.volume_kms_key_arn": arn}
    if ok:
        assert load_settings(context).voxtral.volume_kms_key_arn == arn
    else:
        assert one_problem(**{"voxtral.volume_kms_key_arn": arn}).startswith(f"voxtral.volume_kms_key_arn='{arn}'")


def test_region_without_a_known_sonic_package_needs_an_arn():
    problem = one_problem(region="eu-west-1")
    assert problem.startswith("sonic.model_package_arn=null with region='eu-west-1'")
    assert "us-east-1" in problem
    settings = load_settings({**cdk_json_context(), "region": "eu-west-1", "sonic.model_package_arn": OTHER_REGION_ARN})
    assert settings.sonic_model_package_arn == OTHER_REGION_ARN
    # Voxtral alone needs no Sonic ARN.
    assert load_settings({**cdk_json_context(), "region": "eu-west-1", "sonic.enabled": False}).region == "eu-west-1"


def test_model_package_arn_region_must_match_the_stack():
    problem = one_problem(**{"sonic.model_package_arn": OTHER_REGION_ARN})
    assert problem == (
        f"sonic.model_package_arn='{OTHER_REGION_ARN}': the package is in eu-west-1 but the stack deploys to "
        "us-east-1; use the package ARN for us-east-1"
    )


@pytest.mark.parametrize("key", [
    "voxtral.model_data_download_timeout_s", "voxtral.container_startup_timeout_s",
    "sonic.model_data_download_timeout_s", "sonic.container_startup_timeout_s",
])
@pytest.mark.parametrize("value", [59, 3601])
def test_timeouts_outside_60_to_3600(key, value):
    assert one_problem(**{key: value}) == f"{key}={value}: must be between 60 and 3600 seconds"


def test_both_endpoints_disabled():
    assert one_problem(**{"voxtral.enabled": "false", "sonic.enabled": "false"}) == (
        "voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be enabled"
    )


def test_image_uri_must_be_private_ecr_in_the_stack_region():
    assert "must be a private ECR image" in one_problem(**{"voxtral.image_uri": "docker.io/library/bridge:1"})
    problem = one_problem(**{"voxtral.image_uri": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"})
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


def test_every_problem_is_reported_at_once():
    problems = problems_for(**{"voxtral.instance_type": "nope", "sonic.instance_type": "ml.g5.xlarge",
                               "voxtral.model_data_download_timeout_s": 5, "bogus": 1})
    assert len(problems) == 4
    assert problems[0].startswith("unknown setting 'bogus'")


def run_app(context_json: str, outdir) -> subprocess.CompletedProcess:
    """Run app.py as the CDK CLI does, with the context in CDK_CONTEXT_JSON."""
    env = {**os.environ, "CDK_CONTEXT_JSON": context_json, "CDK_OUTDIR": str(outdir)}
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_app_exits_with_one_clear_message_and_no_traceback(tmp_path):
    import json

    result = run_app(json.dumps({**cdk_json_context(), "voxtral.instance_type": "ml.g6.huge"}), tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "jsii" not in result.stderr
    assert "voxtral.instance_type='ml.g6.huge': not a SageMaker real-time instance type" in result.stderr


def test_model_staging_settings():
    defaults = load_settings(cdk_json_context()).voxtral
    assert defaults.stages_model is True and defaults.stage_model is None
    external = load_settings({**cdk_json_context(), "voxtral.model_s3_uri": "s3://team-models/p"}).voxtral
    assert external.stages_model is False
    assert one_problem(**{"voxtral.model_revision": "main"}).startswith(
        "voxtral.model_revision='main': must be a full 40-character commit hash")
    assert one_problem(**{"voxtral.stage_model": "true", "voxtral.model_s3_uri": "s3://team-models/p"}).startswith(
        "voxtral.stage_model=true with voxtral.model_s3_uri='s3://team-models/p': staging writes into the stack's model bucket")
    assert "must be a Secrets Manager secret ARN" in one_problem(**{"voxtral.hf_token_secret_arn": "hf_abc"})
    assert "the secret is in eu-west-1" in one_problem(
        **{"voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:hub-AbCdEf"})
    # The complete ARN (with Secrets Manager's 6-character suffix) is needed for an exact IAM grant.
    assert "must be a Secrets Manager secret ARN" in one_problem(
        **{"voxtral.hf_token_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub"})


def test_hub_token_secret_kms_key():
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-AbCdEf"
    key = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    settings = load_settings({**cdk_json_context(), "voxtral.hf_token_secret_arn": secret,
                              "voxtral.hf_token_secret_kms_key_arn": key})
    assert settings.voxtral.hf_token_secret_kms_key_arn == key
    assert "set only together with voxtral.hf_token_secret_arn" in one_problem(**{"voxtral.hf_token_secret_kms_key_arn": key})
    assert "not an alias" in one_problem(**{"voxtral.hf_token_secret_arn": secret,
                                            "voxtral.hf_token_secret_kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/x"})


@pytest.mark.parametrize("hint, raw, expected", [
    ("bool | None", "null", None),
    ("bool | None", "on", True),
    ("int | None", "", None),
    ("int", " 7 ", 7),
    ("float", 3, 3.0),
    ("str | None", "none", None),
    ("Literal['a', 'b']", " b ", "b"),
    ("Literal['a', 'b'] | None", None, None),
    ("list[int]", "1, 2,3", [1, 2, 3]),
    ("list[int]", "[4, 5]", [4, 5]),
    ("list[str]", ["ml.g6.4xlarge", "ml.g6e.xlarge"], ["ml.g6.4xlarge", "ml.g6e.xlarge"]),
    ("list[str] | None", "null", None),
    ("int | Literal['auto']", "auto", "auto"),
    ("int | Literal['auto']", "4", 4),
])
def test_values_convert_by_their_type_hints(hint, raw, expected):
    """Conversion reads the field's type with typing.get_type_hints: Optional, Literal and lists convert by what they
    are, whatever the annotation's spelling."""
    from typing import Literal, get_type_hints  # noqa: F401 (used by the annotation)

    from config.context import convert

    holder = type("Holder", (), {"__annotations__": {"value": hint}})
    value = convert(raw, get_type_hints(holder, {"Literal": Literal})["value"])
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("hint, raw, message", [
    ("bool", "maybe", "must be true or false"),
    ("int", True, "must be a whole number"),
    ("int", "1.5", "must be a whole number"),
    ("float", "fast", "must be a number"),
    ("float", None, "must be a number"),
    ("Literal['a', 'b']", "c", "must be one of a, b"),
    ("Literal['a', 'b'] | None", "c", "must be one of a, b or null"),
    ("list[int]", "1,x", "must be a whole number"),
    ("list[int]", 5, "must be a list (a JSON array, or comma-separated values)"),
    ("str", "null", "must be set: this setting has no 'unset' value (null is allowed for optional settings only)"),
    ("str | None", 5, "must be a string or null"),
    ("int | Literal['auto']", "many", "must be a whole number, or one of auto"),
])
def test_values_that_do_not_convert_say_what_is_allowed(hint, raw, message):
    from typing import Literal, get_type_hints

    from config.context import convert

    holder = type("Holder", (), {"__annotations__": {"value": hint}})
    with pytest.raises(ValueError) as caught:
        convert(raw, get_type_hints(holder, {"Literal": Literal})["value"])
    assert str(caught.value) == message


def test_literal_settings_list_the_values_of_the_facts_they_come_from():
    assert one_problem(**{"voxtral.inference_ami_version": "latest"}) == (
        "voxtral.inference_ami_version='latest': must be one of al2-ami-sagemaker-inference-gpu-2, "
        "al2-ami-sagemaker-inference-gpu-2-1, al2-ami-sagemaker-inference-gpu-3-1, al2023-ami-sagemaker-inference-gpu-4-1")


def test_the_settings_rules_are_the_constructs_rules_named_after_the_keys():
    """One rule, one wording: a prop's check reports the setting's key when the settings run it."""
    from constructs_lib.sagemaker_endpoint.props import ProductionVariant
    from constructs_lib.validation import Problems

    problems = Problems()
    ProductionVariant("ml.g6.4xlarge", container_startup_timeout_s=5).problems(problems)
    assert list(problems) == ["container_startup_timeout_s=5: must be between 60 and 3600 seconds"]
    assert one_problem(**{"sonic.container_startup_timeout_s": 5}) == (
        "sonic.container_startup_timeout_s=5: must be between 60 and 3600 seconds")


# --- voxtral.kv_cache_dtype ------------------------------------------------------------------------------------------


def test_fp8_kv_cache_reaches_vllm_and_doubles_the_kv_bound_on_hopper():
    from bridge.entrypoint import vllm_flags
    from stacks.composition import container_environment

    context = {**cdk_json_context(), "voxtral.instance_type": "ml.p5.4xlarge"}
    auto = load_settings(context).voxtral
    fp8 = load_settings({**context, "voxtral.kv_cache_dtype": "fp8"}).voxtral
    assert (auto.streams_per_instance, fp8.streams_per_instance) == (46, 93)  # KV bound, twice the pool blocks
    flags = vllm_flags(container_environment(fp8))
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8"
    assert flags[flags.index("--max-num-seqs") + 1] == "93"
    assert "--kv-cache-dtype" not in vllm_flags(container_environment(auto))  # auto: vLLM's default, left out


def test_fp8_kv_cache_is_refused_on_an_l4_with_the_reason():
    problem = one_problem(voxtral__kv_cache_dtype="fp8")
    assert problem.startswith(
        "voxtral.kv_cache_dtype='fp8' with voxtral.instance_type='ml.g6.xlarge': NVIDIA L4 (compute capability 8.9)")
    assert "vllm/model_executor/models/whisper_causal.py" in problem
    assert problem.endswith("set voxtral.kv_cache_dtype=auto, or choose a one-GPU Hopper type (ml.p5.4xlarge)")


def test_fp8_kv_cache_is_refused_for_each_pool_type_that_cannot_run_it():
    problems = problems_for(voxtral__instance_type="ml.p5.4xlarge", voxtral__instance_pools="ml.p5.4xlarge,ml.g6e.xlarge",
                            voxtral__kv_cache_dtype="fp8")
    assert len(problems) == 1 and problems[0].startswith(
        "voxtral.kv_cache_dtype='fp8' with voxtral.instance_pools='ml.g6e.xlarge': NVIDIA L40S (compute capability 8.9)")


def test_fp8_kv_cache_is_refused_on_the_ecs_type_too():
    problems = problems_for(voxtral__target="ecs", voxtral__kv_cache_dtype="fp8")
    assert any(p.startswith("voxtral.kv_cache_dtype='fp8' with ecs.instance_type='g6.xlarge': NVIDIA L4") for p in problems)


def test_an_unknown_kv_cache_dtype_is_named():
    assert problems_for(voxtral__kv_cache_dtype="int8") == ["voxtral.kv_cache_dtype='int8': must be one of auto, fp8"]


def test_loading_the_default_settings_starts_no_cdk():
    """voicectl (capacity, cost, verify, preflight) loads the settings: with connect.enabled=false (the default)
    that must not import aws_cdk, which starts jsii's node process (seconds per command, and its Node banner)."""
    code = ("import json, sys\n"
            "from config.settings import load_settings\n"
            "load_settings(json.load(open('cdk.json'))['context'])\n"
            "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
