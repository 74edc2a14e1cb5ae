"""constructs_lib/sagemaker_endpoint/props.py: the endpoint's props and their checks without
aws_cdk: the model data prefix, timeouts and log retention, and a rolling update's limits and time
budget (the construct reporting them together: test_endpoint.py)."""

from __future__ import annotations

import pytest

from constructs_lib.sagemaker_endpoint.props import (
    INVOKE_ACTIONS,
    ProductionVariant,
    RollingUpdate,
    check_log_retention_days,
    check_model_data_s3_uri,
    check_timeout_s,
    normalise_s3_prefix,
    rolling_update_timeout_s,
)
from constructs_lib.validation import Problems


def problems(check, *args) -> list[str]:
    p = Problems()
    check(p, *args)
    return list(p)


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("s3://team-models/voxtral/", []),
        (
            "s3://Team_Models/voxtral/",
            [
                "m='s3://Team_Models/voxtral/': must be 's3://<bucket>/<prefix>' with a valid "
                "bucket name (3-63 lower-case letters, digits, '.' or '-') and a non-empty prefix"
            ],
        ),
        (
            "s3://team-models",
            [
                "m='s3://team-models': must be 's3://<bucket>/<prefix>' with a valid bucket name "
                "(3-63 lower-case letters, digits, '.' or '-') and a non-empty prefix"
            ],
        ),
        (
            "s3://team-models/v*/",
            [
                "m='s3://team-models/v*/': the prefix must be a plain key prefix, without "
                "wildcards "
                "('*', '?'), whitespace or '//'; SageMaker copies every object under it"
            ],
        ),
        (
            "s3://team-models/a//b/",
            [
                "m='s3://team-models/a//b/': the prefix must be a plain key prefix, without "
                "wildcards ('*', '?'), whitespace or '//'; SageMaker copies every object under it"
            ],
        ),
    ],
)
def test_the_model_data_is_a_plain_prefix(uri, expected):
    assert problems(check_model_data_s3_uri, "m", uri) == expected


def test_a_prefix_ends_with_one_slash_so_it_never_matches_a_sibling():
    assert (
        normalise_s3_prefix("s3://b/model")
        == normalise_s3_prefix("s3://b/model//")
        == "s3://b/model/"
    )


def test_timeouts_and_retention_are_values_sagemaker_and_cloudwatch_accept():
    assert problems(check_timeout_s, "t", None) == [] and problems(check_timeout_s, "t", 3600) == []
    assert problems(check_timeout_s, "t", 59) == ["t=59: must be between 60 and 3600 seconds"]
    assert problems(check_log_retention_days, "r", 30) == []
    assert problems(check_log_retention_days, "r", 2)[0].startswith(
        "r=2: must be one of 1, 3, 5, 7, 14, 30,"
    )


def test_a_rolling_updates_limits_name_the_policy_field():
    assert problems(RollingUpdate(batch_percent=60, wait_s=-1, timeout_s=100).problems) == [
        "batch_percent=60: must be between 5 and 50 (percent of the variant's instances; "
        "RollingUpdatePolicy MaximumBatchSize)",
        "wait_s=-1: must be between 0 and 3600 seconds (RollingUpdatePolicy WaitIntervalInSeconds)",
        "timeout_s=100: must be between 600 and 28800 seconds (RollingUpdatePolicy "
        "MaximumExecutionTimeoutInSeconds)",
    ]


def test_the_update_budget_follows_the_variants_start_time_unless_given():
    variant = ProductionVariant(
        "ml.g6.4xlarge", model_data_download_timeout_s=1200, container_startup_timeout_s=600
    )
    assert variant.instance_start_s == 1800
    # One instance per batch by default: one batch per instance the variant may reach.
    assert RollingUpdate().timeout_for(variant) == rolling_update_timeout_s(None, 1800, 600) == 2400
    assert (
        RollingUpdate().timeout_for(variant, 3)
        == rolling_update_timeout_s(None, 1800, 600, 3)
        == 7200
    )
    assert (
        RollingUpdate(batch_percent=25).timeout_for(variant)
        == rolling_update_timeout_s(25, 1800, 600)
        == 9600
    )
    assert RollingUpdate(timeout_s=700).timeout_for(variant) == 700
    assert (
        ProductionVariant("ml.g6.4xlarge").instance_start_s == 7200
    )  # SageMaker's defaults counted as 3600 s each


def test_the_invoke_actions_are_the_three_runtime_calls():
    assert INVOKE_ACTIONS == (
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    )


def test_a_rolling_update_moves_one_instance_per_step_unless_a_percent_is_given():
    """RollingUpdatePolicy allows 5-50 % of the variant's instances and does not say how a percent
    below one instance rounds: the default batch is INSTANCE_COUNT 1."""
    assert RollingUpdate().maximum_batch_size() == ("INSTANCE_COUNT", 1)
    assert RollingUpdate(batch_percent=25).maximum_batch_size() == ("CAPACITY_PERCENT", 25)
