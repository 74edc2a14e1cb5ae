"""config/endpoint.py: what both endpoints' sections (voxtral.*, sonic.*) have: the instance type
and pools, counts and timeouts, the scaling range and the alarm thresholds, each checked by its
props' own rule under the key users write."""

from __future__ import annotations

import json

import pytest

from config.settings import SettingsError, load_settings
from constructs_lib.facts import instance_types
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.validation import Problems
from tests.conftest import cdk_json_context
from tests.unit.config.conftest import one_problem, problems_for


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


# ---- the operations keys: types, defaults and one clear message per broken rule ------------------


def operations_problems(overrides: dict) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings({**cdk_json_context(), **overrides})
    return caught.value.problems


def test_operations_defaults():
    s = load_settings(cdk_json_context())
    assert s.alarm_email is None
    v = s.voxtral
    assert (v.min_capacity, v.max_capacity, v.scaling_target_fraction, v.scale_in_cooldown_s) == (
        1,
        4,
        0.7,
        600,
    )
    assert (v.batch_percent, v.wait_s, v.rollback_5xx_error_percent) == (None, 600, 5.0)
    assert (v.model_latency_p90_ms, v.time_to_first_delta_p90_ms, v.active_streams_fraction) == (
        500,
        2000,
        0.9,
    )
    assert (s.sonic.scaling_metric, s.sonic.target_value, s.sonic.max_capacity) == (
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
    assert s.voxtral.max_capacity == 6 and s.voxtral.scaling_target_fraction == 0.5
    assert s.sonic.model_latency_p90_ms == 1500.0


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
            "(longer than the bridge's "
            "drain time, DRAIN_S=25 s)",
        ),
        (
            {"sonic.scale_in_cooldown_s": 0},
            "sonic.scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds",
        ),
        (
            {"voxtral.scaling_target_fraction": 1.5},
            "voxtral.scaling_target_fraction=1.5: must be more than 0 and at most 1 (live streams "
            "per instance as a fraction of voxtral.max_num_seqs)",
        ),
        (
            {"voxtral.alarm_active_streams_fraction": 0.6},
            "voxtral.alarm_active_streams_fraction=0.6: must be more than "
            "voxtral.scaling_target_fraction=0.7 and at most 1, or the alarm fires whenever "
            "autoscaling holds its target",
        ),
        (
            {"voxtral.rollout_batch_percent": 60},
            "voxtral.rollout_batch_percent=60: must be between 5 and 50 (percent of the variant's "
            "instances; RollingUpdatePolicy MaximumBatchSize)",
        ),
        (
            {"voxtral.rollback_5xx_error_percent": 100},
            "voxtral.rollback_5xx_error_percent=100.0: must be a percent of requests, more than 0 "
            "and less than 100 (the rollback alarm fires above it)",
        ),
        (
            {"voxtral.rollout_wait_s": 4000},
            "voxtral.rollout_wait_s=4000: must be between 0 and 3600 seconds (RollingUpdatePolicy "
            "WaitIntervalInSeconds)",
        ),
        (
            {"voxtral.alarm_gpu_memory_percent": 85},
            "voxtral.alarm_gpu_memory_percent=85.0: must be above voxtral.gpu_memory_utilization x "
            "100 = 90: vLLM reserves that much GPU memory at start, so the alarm would always fire",
        ),
        (
            {"sonic.alarm_cpu_utilization_percent": 150},
            "sonic.alarm_cpu_utilization_percent=150.0: must be a percent of each vCPU's capacity, "
            "more than 0 and less than 100 (the alarm fires above it, and use never exceeds 100 %)",
        ),
        # Exactly 100: "greater than 100" can never happen, so the alarm could never fire.
        (
            {"voxtral.alarm_gpu_utilization_percent": 100},
            "voxtral.alarm_gpu_utilization_percent=100.0: must be a percent of each GPU's "
            "capacity, more than 0 and less "
            "than 100 (the alarm fires above it, and use never exceeds 100 %)",
        ),
        (
            {"voxtral.alarm_gpu_memory_percent": 100},
            "voxtral.alarm_gpu_memory_percent=100.0: must be a percent of each GPU's memory, more "
            "than 0 and less than 100 (the alarm fires above it, and use never exceeds 100 %)",
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


# --- Instance pools: every pool type is checked like the instance type
# ------------------------------------------------ Capacity fallback: ``voxtral.instance_pools`` and
# ``sonic.instance_pools`` as the ProductionVariant's InstancePools, with every rule sized by the
# instance holding for each pool's type (settings, alarms, dashboard, quotas).


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
        "voxtral.instance_pools='ml.g9.xlarge': not a SageMaker real-time instance type (expected "
        "one of SageMaker's ProductionVariant types of the form 'ml.<family>.<size>', e.g. "
        "'ml.g6.4xlarge')"
    ]


def test_a_duplicate_type_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6e.4xlarge,ml.g6e.2xlarge") == [
        'sonic.instance_pools=["ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.2xlarge"]: lists '
        "ml.g6e.2xlarge more than "
        "once; each instance type is one pool"
    ]


def test_the_pools_start_with_the_instance_type_and_count_at_most_five():
    assert problems_for(voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        'voxtral.instance_pools=["ml.g6e.2xlarge", "ml.g6.4xlarge"]: must start with '
        "voxtral.instance_type="
        "'ml.g6.xlarge', the priority-1 pool (set both: the instance type is the one tried first)"
    ]
    six = "ml.g6.xlarge,ml.g6.8xlarge,ml.g6.16xlarge,ml.g6e.xlarge,ml.g6e.2xlarge,ml.g6e.4xlarge"
    assert problems_for(voxtral__instance_pools=six) == [
        f"voxtral.instance_pools={json.dumps(six.split(','))}: must list at most 5 instance types "
        "(InstancePools)"
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
        'instance_pools=["ml.g6.4xlarge", "ml.g6.4xlarge"]: lists ml.g6.4xlarge more than once; '
        "each instance type is "
        "one pool",
    ]
    assert ProductionVariant("ml.g6.4xlarge").instance_types == ("ml.g6.4xlarge",)
    assert ProductionVariant("ml.g6.4xlarge").instance_provision_timeout_s is None
