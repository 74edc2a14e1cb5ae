"""Settings of the ECS target (voxtral.target=ecs, ecs.*): parsed, checked, and every bad value named."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from constructs_lib.ecs_service.props import (
    ECS_MAX_STOP_TIMEOUT_S,
    GpuCapacity,
    alb_idle_timeout_s,
    deregistration_delay_s,
    stop_timeout_s,
)
from constructs_lib.validation import Problems
from tests.conftest import cdk_json_context

CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def ecs_problems(**overrides) -> list[str]:
    context = {**cdk_json_context(), "voxtral.target": "ecs", **{k.replace("__", "."): v for k, v in overrides.items()}}
    with pytest.raises(SettingsError) as caught:
        load_settings(context)
    return caught.value.problems


def test_defaults_target_sagemaker_and_an_internal_two_task_service():
    settings = load_settings(cdk_json_context())
    assert settings.voxtral.target == "sagemaker"
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (capacity.instance_type, capacity.spot, capacity.min_tasks, capacity.max_tasks, capacity.single_az) == (
        "g6.xlarge", False, 2, 4, False)
    assert (lb.internet_facing, lb.certificate_arn, lb.require_token) == (False, None, True)


def test_ecs_settings_are_not_checked_for_the_sagemaker_target():
    settings = load_settings({**cdk_json_context(), "ecs.instance_type": "m5.large"})
    assert settings.ecs.instance_type == "m5.large"


def test_command_line_values_convert():
    settings = load_settings({**cdk_json_context(), "voxtral.target": "ecs", "ecs.instance_type": "g6e.2xlarge",
                              "ecs.capacity": "spot", "ecs.min_tasks": "3", "ecs.max_tasks": "8",
                              "ecs.placement": "single_az", "ecs.load_balancer": "internet_facing",
                              "ecs.certificate_arn": CERT})
    capacity, lb = settings.ecs.capacity_props(), settings.ecs.load_balancing()
    assert (capacity.spot, capacity.min_tasks, capacity.max_tasks, capacity.single_az) == (True, 3, 8, True)
    assert (lb.internet_facing, lb.https, lb.require_token) == (True, True, True)


@pytest.mark.parametrize("instance_type", ["m5.large", "g4ad.xlarge", "inf2.xlarge"])
def test_instance_type_without_an_nvidia_gpu_fails(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(f"ecs.instance_type='{instance_type}': has no NVIDIA GPU")
    assert "g6.*" in problem and "g6e.*" in problem


@pytest.mark.parametrize("instance_type", ["g5g.xlarge", "g6f.xlarge"])
def test_an_nvidia_gpu_this_target_cannot_use_is_named_as_such(instance_type):
    (problem,) = ecs_problems(ecs__instance_type=instance_type)
    assert problem.startswith(f"ecs.instance_type='{instance_type}': has an NVIDIA GPU this target cannot use")
    assert "Arm hosts and fractional GPUs" in problem


def test_sagemaker_spelling_and_unknown_types_are_named():
    assert ecs_problems(ecs__instance_type="ml.g6.xlarge") == [
        "ecs.instance_type='ml.g6.xlarge': must be an EC2 instance type without 'ml.' (e.g. 'g6.xlarge')"]
    (problem,) = ecs_problems(ecs__instance_type="g6.huge")
    assert problem.startswith("ecs.instance_type='g6.huge': not an EC2 instance type")


def test_min_above_max_fails():
    assert ecs_problems(ecs__min_tasks=5) == ["ecs.max_tasks=4: must be at least ecs.min_tasks=5"]
    assert ecs_problems(ecs__min_tasks=0)[0].startswith("ecs.min_tasks=0: must be at least 1")


def test_internet_facing_needs_a_certificate_and_the_token():
    assert ecs_problems(ecs__load_balancer="internet_facing", ecs__require_token=False) == [
        "ecs.certificate_arn=null: must be set when ecs.load_balancer='internet_facing': an internet-facing load "
        "balancer listens on HTTPS only (the token must not cross the internet in clear text)",
        "ecs.require_token=false: must be true when ecs.load_balancer='internet_facing': without SigV4 the bearer "
        "token is what keeps strangers off the GPUs",
    ]
    (problem,) = ecs_problems(ecs__load_balancer="internet_facing", ecs__certificate_arn=CERT, ecs__require_token=False)
    assert problem.startswith("ecs.require_token=false")


def test_certificate_must_be_an_acm_arn_of_the_region():
    (problem,) = ecs_problems(ecs__certificate_arn=CERT.replace("us-east-1", "eu-west-1"))
    assert "is in eu-west-1 but the stack deploys to us-east-1" in problem
    (problem,) = ecs_problems(ecs__certificate_arn="my-cert")
    assert problem.startswith("ecs.certificate_arn='my-cert': must be an ACM certificate ARN")


def test_gpu_memory_of_the_ecs_instance_is_checked():
    # An explicit stream cap above what one T4 (16 GiB) holds at 45000 tokens (3 streams).
    (problem,) = ecs_problems(ecs__instance_type="g4dn.xlarge", voxtral__max_num_seqs=4)
    assert problem.startswith("ecs.instance_type='g4dn.xlarge' with voxtral.max_model_len=45000 and "
                              "voxtral.max_num_seqs=4: one NVIDIA T4 (16 GiB) holds the weights and KV cache for at "
                              "most 3 sequence(s)")
    # auto on a GPU that holds no stream at all.
    (problem,) = ecs_problems(ecs__instance_type="g4dn.xlarge", voxtral__gpu_memory_utilization=0.6,
                              voxtral__alarm_gpu_memory_percent=70)
    assert "for at most 0 sequence(s)" in problem


def test_auto_stream_cap_follows_the_ecs_gpu_not_the_sagemaker_instance_type():
    """voxtral.max_num_seqs=auto is sized by ecs.instance_type's GPU with target=ecs; voxtral.instance_type (a
    SageMaker type) no longer counts, and the scaling target follows."""
    base = {**cdk_json_context(), "voxtral.target": "ecs"}
    l4 = load_settings(base).voxtral
    assert (l4.sizing_instance_types, l4.streams_per_instance, l4.streams_target) == (["ml.g6.xlarge"], 4, 2.8)
    l40s = load_settings({**base, "ecs.instance_type": "g6e.2xlarge"}).voxtral
    assert l40s.streams_per_instance == 23  # memory-bound on one L40S at 45000 tokens
    assert l40s.streams_target == pytest.approx(0.7 * 23)
    t4 = load_settings({**base, "ecs.instance_type": "g4dn.xlarge", "voxtral.instance_type": "ml.g6e.2xlarge"}).voxtral
    assert t4.streams_per_instance == 3
    # The SageMaker target still sizes by voxtral.instance_type, whatever ecs.instance_type says.
    sagemaker = load_settings({**cdk_json_context(), "ecs.instance_type": "g6e.2xlarge"}).voxtral
    assert (sagemaker.sizing_instance_types, sagemaker.streams_per_instance) == (["ml.g6.xlarge"], 4)


def test_an_explicit_stream_cap_above_the_compute_cap_is_a_warning_not_an_error():
    voxtral = load_settings({**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 6}).voxtral
    assert voxtral.streams_per_instance == 6  # fits the L4's memory (8), above its compute cap (4): allowed
    assert voxtral.stream_cap_warning() == (
        "voxtral.max_num_seqs=6 is above the compute cap of one NVIDIA L4 (ecs.instance_type='g6.xlarge'): the "
        "capacity model estimates it decodes at most 4 live stream(s) of max_model_len=45000 in real time, so "
        "streams may fall behind under full load; set voxtral.max_num_seqs=auto, or measure with "
        "bench/capacity_bench.py (README 'Capacity')")
    assert load_settings({**cdk_json_context(), "voxtral.target": "ecs", "voxtral.max_num_seqs": 4}
                         ).voxtral.stream_cap_warning() is None
    assert load_settings({**cdk_json_context(), "voxtral.target": "ecs"}).voxtral.stream_cap_warning() is None


def test_unknown_choice_lists_the_allowed_ones():
    assert ecs_problems(ecs__capacity="reserved") == ["ecs.capacity='reserved': must be one of on_demand, spot"]
    assert ecs_problems(voxtral__target="eks") == ["voxtral.target='eks': must be one of sagemaker, ecs"]


def test_timing_rules_follow_the_bridge():
    # stopTimeout = drain + the bridge's exit after it (10 s), within ECS's 120 s.
    assert stop_timeout_s(25) == 35
    assert stop_timeout_s(110) == ECS_MAX_STOP_TIMEOUT_S
    with pytest.raises(ValueError, match="at most 120 s"):
        stop_timeout_s(111)
    # The load balancer waits longer than the bridge, so the bridge ends an idle session with its own error.
    assert alb_idle_timeout_s(60) == 70
    assert deregistration_delay_s(24.5) == 25


def test_capacity_sizes_the_auto_scaling_group_for_one_gpu_per_task():
    assert GpuCapacity("g6.xlarge", max_tasks=4).max_instances == 5  # 4 one-GPU instances + 1 for a deployment
    assert GpuCapacity("g6e.12xlarge", max_tasks=8).max_instances == 3  # 4 GPUs each
    p = Problems()
    GpuCapacity("g6.xlarge", root_volume_gib=20).problems(p)
    assert list(p) == ["root_volume_gib=20: must be 30-16384 GiB (gp3; the image and weights need ~30)"]


def test_private_network_mode_is_accepted_and_asks_for_the_ecs_endpoints():
    settings = load_settings({**cdk_json_context(), "voxtral.target": "ecs", "network.mode": "vpc"})
    assert settings.uses_ecs and settings.network.network_props(ecs=settings.uses_ecs).ecs_endpoints
    # The SageMaker target in vpc mode asks for none; nor does an existing VPC that brings its own endpoints.
    sagemaker = load_settings({**cdk_json_context(), "network.mode": "vpc"})
    assert not sagemaker.uses_ecs and not sagemaker.network.network_props(ecs=sagemaker.uses_ecs).ecs_endpoints
    assert not settings.network.__class__(mode="vpc", create_endpoints=False).network_props(ecs=True).ecs_endpoints


def test_app_exits_with_the_message_before_building_anything():
    """cdk synth (app.py) fails with the settings' message for an instance type without an NVIDIA GPU."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    context = {"voxtral.target": "ecs", "ecs.instance_type": "m5.large", "ecs.min_tasks": 5}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "CDK_CONTEXT_JSON": json.dumps(context)})
    assert result.returncode == 1
    assert "ecs.instance_type='m5.large': has no NVIDIA GPU" in result.stderr
    assert "ecs.max_tasks=4: must be at least ecs.min_tasks=5" in result.stderr
    assert "Traceback" not in result.stderr
