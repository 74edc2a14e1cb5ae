"""Settings of the operations keys: types, defaults and one clear message per broken rule."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from tests.conftest import cdk_json_context


def problems_for(overrides: dict) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings({**cdk_json_context(), **overrides})
    return caught.value.problems


def test_operations_defaults():
    s = load_settings(cdk_json_context())
    assert s.alarm_email is None
    v = s.voxtral
    assert (v.min_instances, v.max_instances, v.scaling_target_fraction, v.scale_in_cooldown_s) == (1, 4, 0.7, 600)
    assert (v.rollout_batch_percent, v.rollout_wait_s, v.rollback_5xx_error_percent) == (25, 600, 5.0)
    assert (v.alarm_model_latency_p90_ms, v.alarm_time_to_first_delta_p90_ms, v.alarm_active_streams_fraction) == (500, 2000, 0.9)
    assert (s.sonic.scaling_metric, s.sonic.scaling_target, s.sonic.max_instances) == ("invocations_per_instance", 60, 2)


def test_command_line_strings_are_converted():
    s = load_settings({**cdk_json_context(), "alarm_email": "ops@example.com", "voxtral.max_instances": "6",
                       "voxtral.scaling_target_fraction": "0.5", "sonic.alarm_model_latency_p90_ms": "1500"})
    assert s.alarm_email == "ops@example.com"
    assert s.voxtral.max_instances == 6 and s.voxtral.scaling_target_fraction == 0.5
    assert s.sonic.alarm_model_latency_p90_ms == 1500.0


@pytest.mark.parametrize("overrides, expected", [
    ({"alarm_email": "not-an-address"},
     "alarm_email='not-an-address': must be one e-mail address such as 'oncall@example.com', or null"),
    ({"voxtral.min_instances": 0},
     "voxtral.min_instances=0: must be at least 1 (a real-time endpoint keeps one instance)"),
    ({"sonic.min_instances": 3, "sonic.max_instances": 2},
     "sonic.max_instances=2: must be at least sonic.min_instances=3"),
    ({"voxtral.initial_instance_count": 5},
     "voxtral.initial_instance_count=5: must be between voxtral.min_instances=1 and voxtral.max_instances=4"),
    ({"voxtral.scale_in_cooldown_s": 20},
     "voxtral.scale_in_cooldown_s=20: must be more than 25 and at most 86400 seconds (longer than the bridge's "
     "drain time, DRAIN_S=25 s)"),
    ({"sonic.scale_in_cooldown_s": 0}, "sonic.scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds"),
    ({"voxtral.scaling_target_fraction": 1.5},
     "voxtral.scaling_target_fraction=1.5: must be more than 0 and at most 1 (live streams per instance as a "
     "fraction of voxtral.max_num_seqs)"),
    ({"voxtral.alarm_active_streams_fraction": 0.6},
     "voxtral.alarm_active_streams_fraction=0.6: must be more than voxtral.scaling_target_fraction=0.7 and at most "
     "1, or the alarm fires whenever autoscaling holds its target"),
    ({"voxtral.rollout_batch_percent": 60},
     "voxtral.rollout_batch_percent=60: must be between 5 and 50 (percent of the variant's instances; "
     "RollingUpdatePolicy MaximumBatchSize)"),
    ({"voxtral.rollback_5xx_error_percent": 100},
     "voxtral.rollback_5xx_error_percent=100.0: must be a percent of requests, more than 0 and less than 100 (the "
     "rollback alarm fires above it)"),
    ({"voxtral.rollout_wait_s": 4000},
     "voxtral.rollout_wait_s=4000: must be between 0 and 3600 seconds (RollingUpdatePolicy WaitIntervalInSeconds)"),
    ({"voxtral.alarm_gpu_memory_percent": 85},
     "voxtral.alarm_gpu_memory_percent=85.0: must be above voxtral.gpu_memory_utilization x 100 = 90: vLLM "
     "reserves that much GPU memory at start, so the alarm would always fire"),
    ({"sonic.alarm_cpu_utilization_percent": 150},
     "sonic.alarm_cpu_utilization_percent=150.0: must be a percent of each vCPU's capacity, more than 0 and less "
     "than 100 (the alarm fires above it, and use never exceeds 100 %)"),
    # Exactly 100: "greater than 100" can never happen, so the alarm could never fire.
    ({"voxtral.alarm_gpu_utilization_percent": 100},
     "voxtral.alarm_gpu_utilization_percent=100.0: must be a percent of each GPU's capacity, more than 0 and less "
     "than 100 (the alarm fires above it, and use never exceeds 100 %)"),
    ({"voxtral.alarm_gpu_memory_percent": 100},
     "voxtral.alarm_gpu_memory_percent=100.0: must be a percent of each GPU's memory, more than 0 and less than 100 "
     "(the alarm fires above it, and use never exceeds 100 %)"),
    ({"sonic.alarm_memory_percent": 100},
     "sonic.alarm_memory_percent=100.0: must be a percent of the instance's memory, more than 0 and less than 100 "
     "(the alarm fires above it, and use never exceeds 100 %)"),
    ({"sonic.alarm_disk_percent": 0},
     "sonic.alarm_disk_percent=0.0: must be a percent of the instance's disk, more than 0 and less than 100 "
     "(the alarm fires above it, and use never exceeds 100 %)"),
    ({"voxtral.alarm_model_latency_p90_ms": 0},
     "voxtral.alarm_model_latency_p90_ms=0.0: must be a positive number of milliseconds"),
    ({"voxtral.alarm_time_to_first_delta_p90_ms": -1},
     "voxtral.alarm_time_to_first_delta_p90_ms=-1.0: must be a positive number of milliseconds"),
    ({"sonic.alarm_5xx_errors": -1},
     "sonic.alarm_5xx_errors=-1: must be 0 or more (errors in 5 minutes above which the alarm fires)"),
    ({"sonic.scaling_metric": "cpu"},
     "sonic.scaling_metric='cpu': must be one of invocations_per_instance, concurrent_requests"),
    ({"sonic.scaling_target": 0},
     "sonic.scaling_target=0.0: must be a positive number (per instance: invocations per minute, or concurrent "
     "requests)"),
    ({"voxtral.rollout_wait_s": "ten"}, "voxtral.rollout_wait_s='ten': must be a whole number"),
])
def test_each_rule_gives_one_clear_message(overrides, expected):
    assert problems_for(overrides) == [expected]


def test_a_disabled_endpoint_is_not_checked():
    s = load_settings({**cdk_json_context(), "sonic.enabled": "false", "sonic.min_instances": "0"})
    assert s.sonic.enabled is False
