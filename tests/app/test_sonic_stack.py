"""The <prefix>-Sonic stack's template (Sonic on SageMaker): the Marketplace model package, the
endpoint and its configuration, the roles and invoke policy, alarms, scaling and updates. Tests that
read this stack together with another are in test_cross_stack.py; cfn-lint and cdk-nag over each
variant in test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from config.models import SONIC_MODEL_PACKAGES
from tests.app.kit import alarms_by_name, only

# --- cdk.json's settings -------------------------------------------------------------------------
# Template assertions on the app synthesized with cdk.json's settings: every property the synth
# issue names.


SONIC_US_EAST_1 = SONIC_MODEL_PACKAGES["us-east-1"]


@pytest.fixture(scope="module")
def sonic(synthesized):
    return Template.from_json(synthesized.template("Sonic"))


def test_sonic_model_is_the_marketplace_package_with_network_isolation(sonic):
    model = only(sonic, "AWS::SageMaker::Model")["Properties"]
    assert model["PrimaryContainer"] == {"ModelPackageName": SONIC_US_EAST_1}
    assert model["EnableNetworkIsolation"] is True
    assert "ModelName" not in model


def test_sonic_endpoint_config_and_endpoint(sonic):
    config = only(sonic, "AWS::SageMaker::EndpointConfig")["Properties"]
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g6e.2xlarge"
    assert variant["VariantName"] == "AllTraffic"
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "InferenceAmiVersion" not in variant
    assert only(sonic, "AWS::SageMaker::Endpoint")["Properties"]["EndpointName"] == "sonic-tts"
    log_group = only(sonic, "AWS::Logs::LogGroup")["Properties"]
    assert log_group["LogGroupName"] == "/aws/sagemaker/Endpoints/sonic-tts"


def test_sonic_roles_and_invoke_policy(sonic):
    role = only(sonic, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    by_sid = {
        s["Sid"]: s
        for s in only(sonic, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    }
    assert set(by_sid) == {"WriteEndpointLogs", "PutMetrics"}
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints"]}
    }
    (invoke,) = only(sonic, "AWS::IAM::ManagedPolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert invoke["Action"] == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream",
    ]
    endpoint_id = next(iter(sonic.find_resources("AWS::SageMaker::Endpoint")))
    assert invoke["Resource"] == {"Ref": endpoint_id}


# --- Alarms -------------------------------------------------------------------------------------
# Every alarm of both endpoints, as synthesized: namespace, metric, dimensions, statistic, period,
# comparison, threshold after unit conversion, periods, missing-data treatment, actions; plus the
# conversions themselves (the rules on their own:
# tests/unit/constructs_lib/monitoring/test_alarms.py).


def test_gpu_and_cpu_thresholds_scale_with_the_instance(ops_variant):
    """Sonic on ml.g6e.12xlarge: 4 GPUs and 48 vCPUs, so 90 % of capacity is 360 (GPU) and 4320
    (CPU)."""
    alarms = alarms_by_name(ops_variant.template("Sonic"))
    assert alarms["sonic-tts-GPUUtilization"]["Threshold"] == 360
    assert alarms["sonic-tts-GPUMemoryUtilization"]["Threshold"] == 380  # 95 % x 4
    assert alarms["sonic-tts-CPUUtilization"]["Threshold"] == 4320
    assert (
        alarms["sonic-tts-MemoryUtilization"]["Threshold"] == 90
    )  # not scaled: 0-100 on any instance


# --- Scaling and updates ------------------------------------------------------------------------
# Autoscaling (scalable target, target-tracking policy, cooldowns, clean removal) and safe updates
# (rolling DeploymentConfig with auto-rollback, RetainAllVariantProperties, the container's drain
# time).


def test_sonic_scales_on_invocations_per_instance_by_default(synthesized):
    template = synthesized.template("Sonic")
    _, target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["ResourceId"] == "endpoint/sonic-tts/variant/AllTraffic"
    assert target["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 2)
    _, policy = only(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
    }
    assert tracking["TargetValue"] == 60


def test_sonic_can_scale_on_concurrent_requests(ops_variant):
    _, policy = only(ops_variant.template("Sonic"), "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    }
    assert tracking["TargetValue"] == 4


def test_sonic_keeps_its_instance_count_but_has_no_rolling_update(synthesized):
    """Marketplace containers are excluded from deployment guardrails (rolling or baked
    blue/green)."""
    _, endpoint = only(synthesized.template("Sonic"), "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    assert "DeploymentConfig" not in endpoint["Properties"]
