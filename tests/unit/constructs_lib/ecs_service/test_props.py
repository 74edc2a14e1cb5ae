"""constructs_lib/ecs_service/props.py: the timings the ECS service derives from the bridge's drain and idle
timeout, and the size of its GPU capacity."""

from __future__ import annotations

import pytest

from constructs_lib.ecs_service.props import (
    ECS_MAX_STOP_TIMEOUT_S,
    GpuCapacity,
    alb_idle_timeout_s,
    deregistration_delay_s,
    stop_timeout_s,
)
from constructs_lib.validation import Problems


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
