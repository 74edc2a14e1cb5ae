"""Autoscaling (scalable target, target-tracking policy, cooldowns, clean removal) and safe updates (rolling
DeploymentConfig with auto-rollback, RetainAllVariantProperties, the container's drain time)."""

from __future__ import annotations

import json

import pytest

from config.models import BRIDGE_DRAIN_S
from tests.app.ops_kit import resources


def only(template: dict, resource_type: str) -> tuple[str, dict]:
    (item,) = resources(template, resource_type).items()
    return item


def test_voxtral_scales_on_live_streams_per_instance(synthesized):
    template = synthesized.template("Voxtral")
    endpoint_id, _ = only(template, "AWS::SageMaker::Endpoint")
    target_id, target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/voxtral-realtime/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 1,
        "MaxCapacity": 4,
        "Tags": [{"Key": "project", "Value": "sagemaker-realtime-voice"}],
    }
    # No RoleARN: Application Auto Scaling uses SageMaker's service-linked role; no extra IAM role in the stack.
    assert "RoleARN" not in target["Properties"]
    # Registered after the endpoint exists; on destroy, deregistered before the endpoint is deleted.
    assert target["DependsOn"] == [endpoint_id]

    _, policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    props = policy["Properties"]
    assert props["PolicyType"] == "TargetTrackingScaling"
    assert props["ScalingTargetId"] == {"Ref": target_id}
    tracking = props["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["CustomizedMetricSpecification"] == {
        "Namespace": "RealtimeVoice/Bridge",
        "MetricName": "ActiveStreams",
        "Dimensions": [{"Name": "EndpointName", "Value": "voxtral-realtime"}, {"Name": "VariantName", "Value": "AllTraffic"}],
        "Statistic": "Average",
    }
    assert tracking["TargetValue"] == pytest.approx(0.7 * 4)  # scaling_target_fraction x max_num_seqs (auto: 4 on one L4)
    assert tracking["ScaleInCooldown"] == 600 and tracking["ScaleInCooldown"] > BRIDGE_DRAIN_S
    assert tracking["ScaleOutCooldown"] == 300


def test_sonic_scales_on_invocations_per_instance_by_default(synthesized):
    template = synthesized.template("Sonic")
    _, target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["ResourceId"] == "endpoint/sonic-tts/variant/AllTraffic"
    assert target["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 2)
    _, policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}
    assert tracking["TargetValue"] == 60


def test_sonic_can_scale_on_concurrent_requests(ops_variant):
    _, policy = only(ops_variant.template("Sonic"), "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
    assert tracking["TargetValue"] == 4


def test_min_equal_to_max_means_a_fixed_size_without_scalable_target(ops_variant):
    template = ops_variant.template("Voxtral")
    assert resources(template, "AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy") == {}
    _, config = only(template, "AWS::SageMaker::EndpointConfig")
    assert config["Properties"]["ProductionVariants"][0]["InitialInstanceCount"] == 2


def test_voxtral_updates_roll_in_batches_and_roll_back_on_the_5xx_error_rate(synthesized):
    template = synthesized.template("Voxtral")
    _, endpoint = only(template, "AWS::SageMaker::Endpoint")
    props = endpoint["Properties"]
    alarm_ids = {r["Properties"]["AlarmName"]: k for k, r in resources(template, "AWS::CloudWatch::Alarm").items()}
    assert props["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
            "WaitIntervalInSeconds": 600,
            # 4 batches x (1200 s download + 1200 s start-up + 600 s baking)
            "MaximumExecutionTimeoutInSeconds": 12000,
        },
        # Only the 5XX error rate (3 of 5 minutes): see tests/app/test_ops_alarms.py.
        "AutoRollbackConfiguration": {"Alarms": [
            {"AlarmName": {"Ref": alarm_ids["voxtral-realtime-Invocation5XXErrorRate"]}},
        ]},
    }
    # Autoscaled (1-4): updates keep the instance count autoscaling chose.
    assert props["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in props


def test_a_fixed_size_endpoint_resets_its_count_on_update(ops_variant):
    """Voxtral at min = max = 2 (the README's way to change the instance type): no RetainAllVariantProperties, so
    the update sets the count to InitialInstanceCount instead of keeping what autoscaling chose before, which
    `make verify` would report as a mismatch for ever."""
    _, endpoint = only(ops_variant.template("Voxtral"), "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["RetainAllVariantProperties"] is False
    assert "ExcludeRetainedVariantProperties" not in endpoint["Properties"]
    # Sonic scales 1-3 in the variant: it keeps its count.
    _, sonic = only(ops_variant.template("Sonic"), "AWS::SageMaker::Endpoint")
    assert sonic["Properties"]["RetainAllVariantProperties"] is True


def test_sonic_keeps_its_instance_count_but_has_no_rolling_update(synthesized):
    """Marketplace containers are excluded from deployment guardrails (rolling or baked blue/green)."""
    _, endpoint = only(synthesized.template("Sonic"), "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    assert "DeploymentConfig" not in endpoint["Properties"]


def test_the_container_drains_for_less_than_the_scale_in_cooldown_and_sagemakers_kill(synthesized):
    _, model = only(synthesized.template("Voxtral"), "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"]["Environment"]["DRAIN_S"] == "25"
    assert BRIDGE_DRAIN_S < 30  # SageMaker sends SIGKILL 30 s after SIGTERM


def test_the_execution_role_may_describe_exactly_the_rollback_alarms(synthesized):
    """SageMaker reads the auto-rollback alarms as the execution role (cloudwatch:DescribeAlarms; deployment
    guardrails, "Auto-Rollback Configuration and Monitoring"); without it, rollback on alarm cannot work."""
    template = synthesized.template("Voxtral")
    _, endpoint = only(template, "AWS::SageMaker::Endpoint")
    rollback_ids = [a["AlarmName"]["Ref"] for a in
                    endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
    assert rollback_ids
    (policy,) = [p for k, p in resources(template, "AWS::IAM::Policy").items() if k.startswith("ExecutionRoleDefaultPolicy")]
    statements = [s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                  if "cloudwatch:DescribeAlarms" in json.dumps(s["Action"])]
    (statement,) = statements
    assert (statement["Sid"], statement["Action"], statement["Effect"]) == (
        "DescribeRollbackAlarms", "cloudwatch:DescribeAlarms", "Allow")
    resources_ = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    # Exactly the rollback alarms (the CDK sorts the list), no wildcard.
    assert sorted(r["Fn::GetAtt"][0] for r in resources_) == sorted(rollback_ids)
    assert all(r["Fn::GetAtt"][1] == "Arn" for r in resources_)
