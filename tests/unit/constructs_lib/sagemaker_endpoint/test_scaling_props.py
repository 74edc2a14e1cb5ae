"""constructs_lib/sagemaker_endpoint/scaling_props.py: the instance-count range and target-tracking
policy of a SageMaker variant, and their checks (CDK-free)."""

from __future__ import annotations

import pytest

from constructs_lib.sagemaker_endpoint.scaling_props import (
    CONCURRENT_REQUESTS_PER_MODEL,
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
    check_capacity,
    check_cooldown_s,
    variant_resource_id,
)
from constructs_lib.validation import Problems


def problems(check, *args) -> list[str]:
    p = Problems()
    check(p, *args)
    return list(p)


def test_the_resource_id_application_auto_scaling_names_a_variant_by():
    assert (
        variant_resource_id("voxtral-realtime", "AllTraffic")
        == "endpoint/voxtral-realtime/variant/AllTraffic"
    )


@pytest.mark.parametrize(
    "low, high, initial, expected",
    [
        (1, 4, 2, []),
        (1, 4, None, []),
        (0, 4, 1, ["min_capacity=0: must be at least 1 (a real-time endpoint keeps one instance)"]),
        (3, 2, 2, ["max_capacity=2: must be at least min_capacity=3"]),
        (2, 4, 5, ["initial_instance_count=5: must be between min_capacity=2 and max_capacity=4"]),
    ],
)
def test_the_capacity_range_holds_the_initial_count(low, high, initial, expected):
    assert problems(check_capacity, low, high, initial) == expected


def test_a_cooldown_must_exceed_its_floor_and_stay_within_a_day():
    assert problems(check_cooldown_s, "scale_in_cooldown_s", 26, 25) == []
    assert problems(
        check_cooldown_s, "scale_in_cooldown_s", 25, 25, " (longer than the drain)"
    ) == [
        "scale_in_cooldown_s=25: must be more than 25 and at most 86400 seconds (longer than the "
        "drain)"
    ]
    assert problems(check_cooldown_s, "scale_out_cooldown_s", 86401) == [
        "scale_out_cooldown_s=86401: must be more than 0 and at most 86400 seconds"
    ]


def test_a_policy_tracks_exactly_one_known_metric():
    assert problems(TargetTracking(60, predefined_metric=INVOCATIONS_PER_INSTANCE).problems) == []
    assert (
        TargetTracking(2, predefined_metric=CONCURRENT_REQUESTS_PER_MODEL).metric_label
        == CONCURRENT_REQUESTS_PER_MODEL
    )
    assert problems(TargetTracking(0).problems) == [
        "target_value=0: must be a positive number (the metric's value per instance to hold)",
        "TargetTracking: give exactly one of metric and predefined_metric",
    ]
    assert problems(TargetTracking(1, predefined_metric="CPU").problems) == [
        f"predefined_metric='CPU': must be one of {INVOCATIONS_PER_INSTANCE}, "
        f"{CONCURRENT_REQUESTS_PER_MODEL}"
    ]


def test_a_scaling_range_needs_a_policy_and_a_fixed_size_none():
    assert InstanceScaling().scales is False and problems(InstanceScaling().problems) == []
    assert problems(InstanceScaling(1, 3).problems) == [
        "tracking=null: must be a TargetTracking while min_capacity < max_capacity"
    ]
    tracking = TargetTracking(60, predefined_metric=INVOCATIONS_PER_INSTANCE, scale_in_cooldown_s=0)
    scaling = InstanceScaling(1, 3, tracking)
    assert scaling.scales is True
    assert problems(scaling.problems, 5) == [
        "initial_instance_count=5: must be between min_capacity=1 and max_capacity=3",
        "scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds",
    ]
    assert problems(scaling.problems) == [
        "scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds"
    ]
