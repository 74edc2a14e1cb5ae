"""The <prefix>-Voxtral stack's template (Voxtral on SageMaker): the Model, its weights and
environment, the endpoint and its configuration, the roles, outputs and alarms, instance pools,
scaling and updates. Tests that read this stack together with another are in test_cross_stack.py;
cfn-lint and cdk-nag over each variant in test_lint.py; settings refused before a synth in
test_settings_app.py."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

from config.models import BRIDGE_DRAIN_S
from constructs_lib.monitoring.metrics import milliseconds_to_microseconds
from constructs_lib.sagemaker_endpoint.props import rolling_update_timeout_s
from tests.app.kit import (  # noqa: F401 (fixtures)
    PREFIX,
    alarms_by_name,
    fixture_changed,
    fixture_existing,
    fixture_private,
    only,
    resources,
    variant_of,
)
from tests.app.variants import PREBUILT_IMAGE

# --- cdk.json's settings -------------------------------------------------------------------------
# Template assertions on the app synthesized with cdk.json's settings: every property the synth
# issue names.


@pytest.fixture(scope="module")
def voxtral(synthesized):
    return Template.from_json(synthesized.template("Voxtral"))


def named(template: Template, resource_type: str, logical_id_prefix: str) -> tuple[str, dict]:
    """The one resource of ``resource_type`` whose logical id starts with ``logical_id_prefix``:
    (id, resource)."""
    matches = [
        (k, v)
        for k, v in template.find_resources(resource_type).items()
        if k.startswith(logical_id_prefix)
    ]
    assert len(matches) == 1, (
        f"expected one {resource_type} {logical_id_prefix}*, found {[k for k, _ in matches]}"
    )
    return matches[0]


def test_voxtral_model_reads_uncompressed_weights_from_an_s3_prefix(voxtral):
    model = only(voxtral, "AWS::SageMaker::Model")["Properties"]
    container = model["PrimaryContainer"]
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix"
    assert source["CompressionType"] == "None"
    staging_id = next(
        iter(voxtral.find_resources("AWS::CloudFormation::CustomResource")), None
    ) or next(
        k
        for k, v in voxtral.to_json()["Resources"].items()
        if v["Type"].startswith("Custom::") and "Revision" in v["Properties"]
    )
    assert source["S3Uri"] == {"Fn::GetAtt": [staging_id, "S3Uri"]}
    assert "ModelName" not in model
    assert "ModelDataUrl" not in container


def test_voxtral_container_environment(voxtral):
    env = only(voxtral, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert env["SM_VLLM_SERVED_MODEL_NAME"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "45000"
    assert env["SM_VLLM_MAX_NUM_SEQS"] == "4"  # max_num_seqs=auto on one L4 at 45000 tokens
    assert (
        env["KV_BLOCKS_PER_STREAM"] == "83"
    )  # constructs_lib/facts/capacity.py: one live stream at 45000 tokens
    assert env["SM_VLLM_GPU_MEMORY_UTILIZATION"] == "0.9"
    assert json.loads(env["SM_VLLM_COMPILATION_CONFIG"]) == {"cudagraph_mode": "PIECEWISE"}
    assert (
        env["SM_VLLM_MM_PROCESSOR_CACHE_GB"] == "1"
    )  # 2 x 1 GiB of vLLM's processor caches, not 2 x 4 GiB
    assert env["METRICS_NAMESPACE"] == "RealtimeVoice/Bridge"
    assert env["ENDPOINT_NAME"] == "voxtral-realtime"
    assert env["VARIANT_NAME"] == "AllTraffic"
    for key, value in env.items():
        assert not any(
            word in key.upper() for word in ("HF_TOKEN", "SECRET", "PASSWORD", "ACCESS_KEY")
        ), key
        assert isinstance(value, str)


def test_voxtral_model_runs_the_copied_bridge_image_after_the_copy(synthesized, voxtral):
    image = only(voxtral, "AWS::SageMaker::Model")["Properties"]["PrimaryContainer"]["Image"]
    assets = json.loads((synthesized.outdir / "RealtimeVoice-Artifacts.assets.json").read_text())
    (image_hash,) = assets["dockerImages"]
    assert image_hash in json.dumps(image)
    # The Voxtral stack deploys after the Artifacts stack (which holds the copy).
    manifest = json.loads((synthesized.outdir / "manifest.json").read_text())
    assert (
        "RealtimeVoice-Artifacts" in manifest["artifacts"]["RealtimeVoice-Voxtral"]["dependencies"]
    )


def test_voxtral_endpoint_config(voxtral):
    config = only(voxtral, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert "EndpointConfigName" not in config
    (variant,) = config["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"
    assert variant["InstanceType"] == "ml.g6.xlarge"
    assert variant["InitialInstanceCount"] == 1
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 1200
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 1200
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "KmsKeyId" not in config


def test_voxtral_endpoint_has_stable_name_and_log_group(voxtral):
    endpoint = only(voxtral, "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["EndpointName"] == "voxtral-realtime"
    config_id = next(iter(voxtral.find_resources("AWS::SageMaker::EndpointConfig")))
    assert endpoint["Properties"]["EndpointConfigName"] == {
        "Fn::GetAtt": [config_id, "EndpointConfigName"]
    }
    log_group_id, log_group = named(voxtral, "AWS::Logs::LogGroup", "VoxtralLogGroup")
    assert log_group["Properties"]["LogGroupName"] == "/aws/sagemaker/Endpoints/voxtral-realtime"
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Delete"
    assert log_group_id in endpoint["DependsOn"]


def test_voxtral_execution_role_is_least_privilege(voxtral):
    role = named(voxtral, "AWS::IAM::Role", "ExecutionRole")[1]["Properties"]
    assert "ManagedPolicyArns" not in role
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    policy = named(voxtral, "AWS::IAM::Policy", "ExecutionRoleDefaultPolicy")[1]
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(by_sid) == {
        "ReadModelPrefix",
        "ListModelPrefix",
        "PullImage",
        "EcrAuthorizationToken",
        "PutMetrics",
        "WriteEndpointLogs",
        "DescribeRollbackAlarms",
    }
    prefix = PREFIX
    assert by_sid["ReadModelPrefix"]["Action"] == "s3:GetObject"
    assert json.dumps(by_sid["ReadModelPrefix"]["Resource"]).endswith(f'"/{prefix}*"]]}}')
    assert by_sid["ListModelPrefix"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
    assert by_sid["PutMetrics"]["Resource"] == "*"
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {
            "cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "RealtimeVoice/Bridge"]
        }
    }
    assert by_sid["EcrAuthorizationToken"]["Action"] == "ecr:GetAuthorizationToken"
    assert by_sid["PullImage"]["Resource"] == {
        "Fn::ImportValue": "RealtimeVoice-Artifacts-BridgeRepositoryArn"
    }
    log_group_id = named(voxtral, "AWS::Logs::LogGroup", "VoxtralLogGroup")[0]
    assert by_sid["WriteEndpointLogs"]["Resource"][0] == {"Fn::GetAtt": [log_group_id, "Arn"]}
    for statement in by_sid.values():
        if statement["Resource"] == "*":
            assert statement["Sid"] in {"EcrAuthorizationToken", "PutMetrics"}
        assert "sagemaker:*" not in json.dumps(statement)


def test_voxtral_invoke_policy_covers_bidirectional_streaming_on_this_endpoint_only(voxtral):
    policy = only(voxtral, "AWS::IAM::ManagedPolicy")["Properties"]
    assert "ManagedPolicyName" not in policy
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == [
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    ]
    endpoint_id = next(iter(voxtral.find_resources("AWS::SageMaker::Endpoint")))
    assert statement["Resource"] == {"Ref": endpoint_id}


def test_voxtral_outputs(synthesized):
    outputs = synthesized.template("Voxtral")["Outputs"]
    # https://runtime.sagemaker.us-east-1.amazonaws.com:8443/... in the aws partition
    # (amazonaws.com.cn in China).
    assert outputs["VoxtralBidirectionalInvokeUrl"]["Value"] == {
        "Fn::Join": [
            "",
            [
                "https://runtime.sagemaker.us-east-1.",
                {"Ref": "AWS::URLSuffix"},
                ":8443/endpoints/voxtral-realtime/invocations-bidirectional-stream",
            ],
        ]
    }
    assert outputs["VoxtralRegion"]["Value"] == "us-east-1"
    assert "EndpointName" in json.dumps(outputs["VoxtralEndpointName"]["Value"])
    assert "S3Uri" in json.dumps(outputs["VoxtralModelS3Uri"]["Value"])
    assert "InvokePolicyArn" in "".join(outputs)


@pytest.fixture(scope="module")
def fp8_on_hopper(app_variant):
    """Voxtral on one H100 (ml.p5.4xlarge) with voxtral.kv_cache_dtype=fp8 (Sonic off): the
    registry's variant hopper_fp8_no_staging."""
    return app_variant("hopper_fp8_no_staging")


def test_fp8_kv_cache_reaches_vllms_arguments_in_the_template_with_twice_the_kv_bound(
    fp8_on_hopper,
):
    """The Model's environment is what the entrypoint turns into vLLM flags: --kv-cache-dtype fp8
    and the stream cap of an H100 with half-size KV (93 one-hour streams, 46 in BF16;
    constructs_lib/facts/capacity.py)."""
    from bridge.entrypoint import vllm_flags

    template = fp8_on_hopper.template("Voxtral")
    (model,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert (environment["SM_VLLM_KV_CACHE_DTYPE"], environment["SM_VLLM_MAX_NUM_SEQS"]) == (
        "fp8",
        "93",
    )
    flags = vllm_flags(environment)
    assert flags[flags.index("--kv-cache-dtype") + 1] == "fp8"
    assert (
        environment["KV_BLOCKS_PER_STREAM"] == "83"
    )  # the same tokens per block: the bridge's check still holds


def test_the_default_model_sets_no_kv_cache_dtype(voxtral):
    (model,) = voxtral.find_resources("AWS::SageMaker::Model").values()
    assert "SM_VLLM_KV_CACHE_DTYPE" not in model["Properties"]["PrimaryContainer"]["Environment"]


def test_the_transcription_delay_reaches_the_bridge_and_the_alarm_its_threshold(fp8_on_hopper):
    """voxtral.transcription_delay_ms=2400 is the bridge's TRANSCRIPTION_DELAY_MS (its entrypoint
    serves vLLM a tekken.json with that delay); the TimeToFirstDelta alarm has the threshold set
    above that delay's first delta."""
    template = fp8_on_hopper.template("Voxtral")
    (model,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    environment = model["Properties"]["PrimaryContainer"]["Environment"]
    assert environment["TRANSCRIPTION_DELAY_MS"] == "2400"
    # Not a vLLM flag: vLLM takes none for the delay.
    assert not any(name.startswith("SM_VLLM_") and "DELAY" in name for name in environment)
    (alarm,) = [
        r["Properties"]
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "TimeToFirstDelta" in logical_id
    ]
    assert alarm["Threshold"] == 3000


def test_the_default_model_leaves_the_checkpoints_transcription_delay(voxtral):
    (model,) = voxtral.find_resources("AWS::SageMaker::Model").values()
    assert "TRANSCRIPTION_DELAY_MS" not in model["Properties"]["PrimaryContainer"]["Environment"]


# --- Other settings -------------------------------------------------------------------------------
# The app under other settings: a prebuilt image, external weights, retained data, a changed
# instance type, and each endpoint switched off. The variants come from the registry
# (tests/app/variants.py).


def test_instance_type_change_replaces_endpoint_config_and_keeps_endpoint_name(
    synthesized, changed
):
    before, after = synthesized.template("Voxtral"), changed.template("Voxtral")
    (config_before,) = resources(before, "AWS::SageMaker::EndpointConfig").values()
    (config_after,) = resources(after, "AWS::SageMaker::EndpointConfig").values()
    assert config_before["Properties"]["ProductionVariants"][0]["InstanceType"] == "ml.g6.xlarge"
    assert config_after["Properties"]["ProductionVariants"][0]["InstanceType"] == "ml.g6e.xlarge"
    # No physical name: CloudFormation creates the new EndpointConfig under a fresh generated name,
    # no collision.
    for config in (config_before, config_after):
        assert "EndpointConfigName" not in config["Properties"]
    for template in (before, after):
        (model,) = resources(template, "AWS::SageMaker::Model").values()
        assert "ModelName" not in model["Properties"]
    (endpoint_before,) = resources(before, "AWS::SageMaker::Endpoint").values()
    (endpoint_after,) = resources(after, "AWS::SageMaker::Endpoint").values()
    assert (
        endpoint_before["Properties"]["EndpointName"]
        == endpoint_after["Properties"]["EndpointName"]
        == "voxtral-realtime"
    )


def test_external_weights_uri_is_normalised_and_read_only_there(changed):
    voxtral = changed.template("Voxtral")
    (model,) = resources(voxtral, "AWS::SageMaker::Model").values()
    source = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3Uri"] == "s3://team-models/voxtral/2602/"
    (policy,) = resources(voxtral, "AWS::IAM::Policy").values()
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert by_sid["ReadModelPrefix"]["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::team-models/voxtral/2602/*"]]
    }
    assert by_sid["ListModelPrefix"]["Condition"] == {
        "StringLike": {"s3:prefix": ["voxtral/2602/*"]}
    }


def test_a_volume_kms_key_is_not_applied_on_a_local_storage_type(changed):
    """voxtral.volume_kms_key_arn on ml.g6e.xlarge (local NVMe storage): CreateEndpointConfig would
    fail with KmsKeyId, so the synth leaves it off and says so
    (tests/unit/constructs_lib/sagemaker_endpoint/test_endpoint.py: an EBS-backed type keeps it)."""
    (config,) = resources(changed.template("Voxtral"), "AWS::SageMaker::EndpointConfig").values()
    assert "KmsKeyId" not in config["Properties"]
    metadata = json.loads(next(changed.outdir.glob("*Voxtral.metadata.json")).read_text())
    (info,) = [
        e["data"]
        for path, entries in metadata.items()
        if path.endswith("/EndpointConfig")
        for e in entries
        if e["type"] == "aws:cdk:info"
    ]
    assert info.startswith(
        "volume_kms_key_arn is not applied. KmsKeyId is left off: ml.g6e.xlarge has local NVMe"
    )


# --- Private mode -------------------------------------------------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its
# endpoints and security groups, both Models isolated in it, every data-holding resource under the
# key), its checks (cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint),
# an existing VPC, and a key given by ARN in public mode. The variants come from the registry
# (tests/app/variants.py).


def test_voxtral_model_environment_keeps_the_image_offline(private, synthesized):
    for app in (private, synthesized):
        (model,) = resources(app.template("Voxtral"), "AWS::SageMaker::Model").values()
        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        assert {
            k: environment[k]
            for k in (
                "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE",
                "VLLM_NO_USAGE_STATS",
                "DO_NOT_TRACK",
                "VLLM_DO_NOT_TRACK",
                "HF_HUB_DISABLE_TELEMETRY",
            )
        } == dict.fromkeys(
            (
                "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE",
                "VLLM_NO_USAGE_STATS",
                "DO_NOT_TRACK",
                "VLLM_DO_NOT_TRACK",
                "HF_HUB_DISABLE_TELEMETRY",
            ),
            "1",
        )
        assert model["Properties"]["EnableNetworkIsolation"] is True


def test_the_caller_policy_can_require_the_runtime_vpc_endpoint(existing, private):
    (policy,) = resources(existing.template("Voxtral"), "AWS::IAM::ManagedPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    (vpce,) = statement["Condition"]["StringEquals"]["aws:SourceVpce"]
    assert "Fn::ImportValue" in vpce and "SageMakerRuntime" in json.dumps(vpce)
    (policy,) = resources(private.template("Voxtral"), "AWS::IAM::ManagedPolicy").values()
    assert "Condition" not in policy["Properties"]["PolicyDocument"]["Statement"][0]


# --- Alarms -------------------------------------------------------------------------------------
# Every alarm of both endpoints, as synthesized: namespace, metric, dimensions, statistic, period,
# comparison, threshold after unit conversion, periods, missing-data treatment, actions; plus the
# conversions themselves (the rules on their own:
# tests/unit/constructs_lib/monitoring/test_alarms.py).


def test_latency_thresholds_are_converted_from_ms_to_microseconds(synthesized, ops_variant):
    assert milliseconds_to_microseconds(500) == 500_000
    assert synthesized.settings.voxtral.model_latency_p90_ms == 500
    assert (
        alarms_by_name(synthesized.template("Voxtral"))["voxtral-realtime-ModelLatencyP90"][
            "Threshold"
        ]
        == 500_000
    )
    # The variant sets 250 ms.
    assert (
        alarms_by_name(ops_variant.template("Voxtral"))["voxtral-realtime-ModelLatencyP90"][
            "Threshold"
        ]
        == 250_000
    )


# --- The image's CUDA ---------------------------------------------------------------------------
# The image's CUDA at synth: an unknown CUDA is a warning of the Voxtral stack, never a guess (an
# incompatible one is a settings error: tests/unit/constructs_lib/facts/test_cuda_compat.py).


def cuda_warnings(synthesized_app) -> list[str]:
    """The Voxtral stack's warnings that name CUDA, from the cloud assembly."""
    return [text for text in synthesized_app.warnings("Voxtral") if "CUDA" in text]


def test_a_prebuilt_image_whose_tag_names_no_cuda_gets_a_warning(ops_variant):
    (warning,) = cuda_warnings(ops_variant)
    assert warning == (
        f"the CUDA version of voxtral.image_uri {PREBUILT_IMAGE} is unknown (its tag names none, "
        "as '-cu130-' in a SageMaker DLC tag does), so it was not checked against "
        "al2023-ami-sagemaker-inference-gpu-4-1 [ack: realtime-voice:image-cuda]"
    )


def test_the_image_built_from_container_gets_none(synthesized):
    assert cuda_warnings(synthesized) == []


# --- Instance pools -----------------------------------------------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def model_of(template: dict, ref: dict) -> dict:
    """The Model a ``{"Fn::GetAtt": [id, "ModelName"]}`` names."""
    logical_id, attribute = ref["Fn::GetAtt"]
    assert attribute == "ModelName"
    return template["Resources"][logical_id]


def test_each_pool_type_runs_a_model_with_its_own_stream_cap(pools_variant):
    """An L4 (ml.g6.4xlarge) decodes 4 one-hour streams, an L40S (ml.g6e.2xlarge) holds 23, an A10G
    (ml.g5.4xlarge) 8 (constructs_lib/facts/capacity.py): each pool after the first names a Model of
    its own (ModelNameOverride) whose vLLM gets that GPU's cap; the first pool runs the variant's
    Model at the L4's."""
    template = pools_variant.template("Voxtral")
    variant = variant_of(template)
    pools = {pool["InstanceType"]: pool for pool in variant["InstancePools"]}
    assert "ModelNameOverride" not in pools["ml.g6.4xlarge"]
    variant_model = model_of(template, variant["ModelName"])
    caps = {
        "ml.g6.4xlarge": variant_model["Properties"]["PrimaryContainer"]["Environment"][
            "SM_VLLM_MAX_NUM_SEQS"
        ]
    }
    for instance_type in ("ml.g6e.2xlarge", "ml.g5.4xlarge"):
        model = model_of(template, pools[instance_type]["ModelNameOverride"])
        caps[instance_type] = model["Properties"]["PrimaryContainer"]["Environment"][
            "SM_VLLM_MAX_NUM_SEQS"
        ]
        # The pool's Model is the variant's in everything but the stream cap (role, image, data,
        # isolation, VPC).
        same = json.loads(json.dumps(model))
        same["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_NUM_SEQS"] = caps[
            "ml.g6.4xlarge"
        ]
        assert same == variant_model
    assert caps == {"ml.g6.4xlarge": "4", "ml.g6e.2xlarge": "23", "ml.g5.4xlarge": "8"}
    assert pools_variant.settings.capacity_plan.stream_caps == {
        "ml.g6.4xlarge": 4,
        "ml.g6e.2xlarge": 23,
        "ml.g5.4xlarge": 8,
    }


def test_the_rolling_update_allows_for_the_provisioning_timeout(pools_variant):
    (endpoint,) = resources(pools_variant.template("Voxtral"), "AWS::SageMaker::Endpoint").values()
    policy = endpoint["Properties"]["DeploymentConfig"]["RollingUpdatePolicy"]
    # Per batch: provisioning 1800 + model download 1200 + container start-up 1200 + baking 600 s;
    # one instance per batch, 2 batches (Voxtral fixed at 2 instances).
    assert policy["MaximumBatchSize"] == {"Type": "INSTANCE_COUNT", "Value": 1}
    assert (
        policy["MaximumExecutionTimeoutInSeconds"]
        == rolling_update_timeout_s(None, 1800 + 1200 + 1200, 600, 2)
        == 9600
    )


def test_with_caps_that_differ_autoscaling_and_the_near_cap_alarm_use_each_instances_own_cap(
    pools_variant, synthesized
):
    """An L4 at 4 streams and an L40S at 23: a count of streams is a different load on each, so the
    scaling target and the near-cap alarm use the bridge's StreamCapUsed (percent of that instance's
    own cap): 70 % and 90 %."""
    from stacks.composition import voxtral_tracking

    tracking = voxtral_tracking(
        pools_variant.settings
    )  # this variant is fixed-size: no policy synthesized
    assert (tracking.metric.metric_name, tracking.metric.statistic, tracking.target_value) == (
        "StreamCapUsed",
        "Average",
        70,
    )
    alarm = next(
        a
        for name, a in alarms_by_name(pools_variant.template("Voxtral")).items()
        if name.endswith("ActiveStreamsNearCap")
    )
    assert (alarm["MetricName"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "StreamCapUsed",
        90,
        "GreaterThanOrEqualToThreshold",
    )
    # One type, one cap: live streams per instance as before (the default template is unchanged).
    (policy,) = resources(
        synthesized.template("Voxtral"), "AWS::ApplicationAutoScaling::ScalingPolicy"
    ).values()
    tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert (tracking["CustomizedMetricSpecification"]["MetricName"], tracking["TargetValue"]) == (
        "ActiveStreams",
        2.8,
    )


# --- Scaling and updates ------------------------------------------------------------------------
# Autoscaling (scalable target, target-tracking policy, cooldowns, clean removal) and safe updates
# (rolling DeploymentConfig with auto-rollback, RetainAllVariantProperties, the container's drain
# time).


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
    # No RoleARN: Application Auto Scaling uses SageMaker's service-linked role; no extra IAM role
    # in the stack.
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
        "Dimensions": [
            {"Name": "EndpointName", "Value": "voxtral-realtime"},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
        "Statistic": "Average",
    }
    assert tracking["TargetValue"] == pytest.approx(
        0.7 * 4
    )  # scaling_target_fraction x max_num_seqs (auto: 4 on one L4)
    assert tracking["ScaleInCooldown"] == 600 and tracking["ScaleInCooldown"] > BRIDGE_DRAIN_S
    assert tracking["ScaleOutCooldown"] == 300


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
    alarm_ids = {
        r["Properties"]["AlarmName"]: k
        for k, r in resources(template, "AWS::CloudWatch::Alarm").items()
    }
    assert props["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            # One instance per step (how a percent below one instance rounds is not documented).
            "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 600,
            # 4 batches (one per instance autoscaling may reach) x (1200 s download + 1200 s
            # start-up + 600 s baking)
            "MaximumExecutionTimeoutInSeconds": 12000,
        },
        # Only the 5XX error rate (3 of 5 minutes): see tests/app/test_cross_stack_alarms.py.
        "AutoRollbackConfiguration": {
            "Alarms": [
                {"AlarmName": {"Ref": alarm_ids["voxtral-realtime-Invocation5XXErrorRate"]}},
            ]
        },
    }
    # Autoscaled (1-4): updates keep the instance count autoscaling chose.
    assert props["RetainAllVariantProperties"] is True
    assert "ExcludeRetainedVariantProperties" not in props


def test_the_container_drains_for_less_than_the_scale_in_cooldown_and_sagemakers_kill(synthesized):
    _, model = only(synthesized.template("Voxtral"), "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"]["Environment"]["DRAIN_S"] == "25"
    assert BRIDGE_DRAIN_S < 30  # SageMaker sends SIGKILL 30 s after SIGTERM


def test_the_execution_role_may_describe_exactly_the_rollback_alarms(synthesized):
    """SageMaker reads the auto-rollback alarms as the execution role (cloudwatch:DescribeAlarms;
    deployment guardrails, "Auto-Rollback Configuration and Monitoring"); without it, rollback on
    alarm cannot work."""
    template = synthesized.template("Voxtral")
    _, endpoint = only(template, "AWS::SageMaker::Endpoint")
    rollback_ids = [
        a["AlarmName"]["Ref"]
        for a in endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    ]
    assert rollback_ids
    (policy,) = [
        p
        for k, p in resources(template, "AWS::IAM::Policy").items()
        if k.startswith("ExecutionRoleDefaultPolicy")
    ]
    statements = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "cloudwatch:DescribeAlarms" in json.dumps(s["Action"])
    ]
    (statement,) = statements
    assert (statement["Sid"], statement["Action"], statement["Effect"]) == (
        "DescribeRollbackAlarms",
        "cloudwatch:DescribeAlarms",
        "Allow",
    )
    resources_ = (
        statement["Resource"]
        if isinstance(statement["Resource"], list)
        else [statement["Resource"]]
    )
    # Exactly the rollback alarms (the CDK sorts the list), no wildcard.
    assert sorted(r["Fn::GetAtt"][0] for r in resources_) == sorted(rollback_ids)
    assert all(r["Fn::GetAtt"][1] == "Arn" for r in resources_)
