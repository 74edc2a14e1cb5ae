"""constructs_lib/sagemaker_endpoint/scaling.py: a variant's instance count as a scalable target in
a bare stack, one per variant, with target-tracking policies on a predefined or a CloudWatch
metric."""

from __future__ import annotations

import pytest
from aws_cdk import aws_cloudwatch as cloudwatch

from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.scaling import ScalableInstanceCount
from constructs_lib.sagemaker_endpoint.scaling_props import TargetTracking
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import bare_stack, endpoint_props, only, resources


def scaled(min_capacity=1, max_capacity=3):
    stack = bare_stack()
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props(endpoint_name="speech"))
    return (
        stack,
        endpoint,
        ScalableInstanceCount(
            stack,
            "Scaling",
            endpoint=endpoint,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        ),
    )


def test_the_target_names_the_variant_and_waits_for_the_endpoint():
    stack, endpoint, scaling = scaled()
    target_id, target = only(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/speech/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 1,
        "MaxCapacity": 3,
    }
    (endpoint_id, _) = only(stack, "AWS::SageMaker::Endpoint")
    assert endpoint_id in target["DependsOn"]
    assert endpoint.scalable_instance_count is scaling and stack.resolve(
        scaling.scalable_target_id
    ) == {"Ref": target_id}


def test_a_predefined_and_a_custom_metric_policy():
    stack, _, scaling = scaled()
    scaling.scale_on_invocations("Invocations", invocations_per_minute=60, scale_in_cooldown_s=900)
    metric = cloudwatch.Metric(
        namespace="Team/Bridge",
        metric_name="ActiveStreams",
        statistic="Average",
        dimensions_map={"EndpointName": "speech"},
    )
    scaling.scale_to_track("Streams", TargetTracking(2.8, metric=metric))
    policies = {
        p["Properties"]["PolicyName"]: p["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        for p in resources(stack, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }
    assert policies["speech-track-SageMakerVariantInvocationsPerInstance"] == {
        "TargetValue": 60,
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
        },
        "ScaleInCooldown": 900,
        "ScaleOutCooldown": 300,
    }
    assert policies["speech-track-ActiveStreams"]["CustomizedMetricSpecification"] == {
        "Namespace": "Team/Bridge",
        "MetricName": "ActiveStreams",
        "Statistic": "Average",
        "Dimensions": [{"Name": "EndpointName", "Value": "speech"}],
    }


def test_one_scalable_target_per_variant_and_bad_ranges_or_policies_are_refused():
    stack, endpoint, _ = scaled()
    with pytest.raises(PropsError) as caught:
        ScalableInstanceCount(stack, "Again", endpoint=endpoint, min_capacity=0, max_capacity=3)
    assert caught.value.problems == [
        "min_capacity=0: must be at least 1 (a real-time endpoint keeps one instance)",
        "endpoint: its instance count already scales (Test/Scaling); add policies to that "
        "ScalableInstanceCount (one scalable target per variant)",
    ]
    _, _, scaling = scaled()
    with pytest.raises(PropsError, match="ScalableInstanceCount policy Bad: invalid props"):
        scaling.scale_to_track(
            "Bad", TargetTracking(0, predefined_metric="SageMakerVariantInvocationsPerInstance")
        )
