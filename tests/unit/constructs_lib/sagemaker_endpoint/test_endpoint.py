"""RealtimeEndpoint in a bare stack: documented defaults, containers, roles, grants, importers,
metric helpers, autoscaling, alarms, rolling updates, and bad props (all reported in one error)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk import App, Duration, Stack, Validations, aws_iam as iam, aws_sns as sns
from cdk_nag import AwsSolutionsChecks

from constructs_lib.facts.names import ENDPOINT_NAME_RE
from constructs_lib.monitoring.metrics import UNITS
from constructs_lib.monitoring.thresholds import EndpointAlarmThresholds
from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.props import (
    INVOKE,
    INVOKE_WITH_RESPONSE_STREAM,
    ImageContainer,
    ModelPackageContainer,
    ProductionVariant,
    RollingUpdate,
)
from constructs_lib.sagemaker_endpoint.scaling_props import TargetTracking
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import (
    ACCOUNT,
    ENV,
    IMAGE,
    IMAGE_REPOSITORY_ARN,
    PACKAGE,
    REGION,
    bare_stack,
    endpoint_props,
    only,
    resources,
    statements,
)


def test_the_least_props_give_an_endpoint_with_its_documented_defaults():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props())
    # A name from the construct path: valid for SageMaker, stable, and the log group's.
    assert re.fullmatch(r"Test-Speech-[0-9A-F]{8}", endpoint.endpoint_name)
    assert ENDPOINT_NAME_RE.fullmatch(endpoint.endpoint_name)
    endpoint_id, resource = only(stack, "AWS::SageMaker::Endpoint")
    assert resource["Properties"]["EndpointName"] == endpoint.endpoint_name
    assert "DeploymentConfig" not in resource["Properties"]
    assert (
        resource["Properties"]["RetainAllVariantProperties"] is False
    )  # fixed size: updates reset the count
    assert stack.resolve(endpoint.endpoint_arn) == {"Ref": endpoint_id}
    log_group_id, log_group = only(stack, "AWS::Logs::LogGroup")
    assert log_group["Properties"] == {
        "LogGroupName": f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}",
        "RetentionInDays": 30,
    }
    assert log_group["DeletionPolicy"] == "Delete" and log_group_id in resource["DependsOn"]
    _, model = only(stack, "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"] == {"Image": IMAGE, "Mode": "SingleModel"}
    assert model["Properties"]["EnableNetworkIsolation"] is False
    assert "ModelName" not in model["Properties"]
    _, config = only(stack, "AWS::SageMaker::EndpointConfig")
    assert (
        "KmsKeyId" not in config["Properties"] and "EndpointConfigName" not in config["Properties"]
    )
    (variant,) = config["Properties"]["ProductionVariants"]
    assert {k: v for k, v in variant.items() if k != "ModelName"} == {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g6.4xlarge",
        "InitialInstanceCount": 1,
        "InitialVariantWeight": 1,
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }
    # The default role: what the image and the endpoint need, nothing else.
    by_sid = statements(stack)
    assert set(by_sid) == {"PutMetrics", "PullImage", "EcrAuthorizationToken", "WriteEndpointLogs"}
    assert by_sid["PullImage"]["Resource"] == IMAGE_REPOSITORY_ARN
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints"]}
    }
    _, role = only(stack, "AWS::IAM::Role")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"] == {
        "StringEquals": {"aws:SourceAccount": ACCOUNT}
    }
    # The caller policy allows InvokeEndpoint on this endpoint only.
    _, policy = only(stack, "AWS::IAM::ManagedPolicy")
    (invoke,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (invoke["Action"], invoke["Resource"]) == (INVOKE, {"Ref": endpoint_id})


def test_uncompressed_model_data_is_read_from_a_normalised_prefix_the_default_role_may_read():
    stack = bare_stack()
    RealtimeEndpoint(
        stack,
        "Speech",
        endpoint_props(
            container=ImageContainer(
                IMAGE, model_data_s3_uri="s3://team-models/voxtral/2602", environment={"A": "1"}
            ),
            variant=ProductionVariant(
                "ml.g6.4xlarge",
                model_data_download_timeout_s=600,
                container_startup_timeout_s=900,
                inference_ami_version="al2023-ami-sagemaker-inference-gpu-4-1",
            ),
            log_retention_days=90,
        ),
    )
    _, model = only(stack, "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    assert container["ModelDataSource"] == {
        "S3DataSource": {
            "S3Uri": "s3://team-models/voxtral/2602/",
            "S3DataType": "S3Prefix",
            "CompressionType": "None",
        }
    }
    assert container["Environment"] == {"A": "1"}
    by_sid = statements(stack)
    assert json.dumps(by_sid["ReadModelPrefix"]["Resource"]).endswith(
        ':s3:::team-models/voxtral/2602/*"]]}'
    )
    assert by_sid["ListModelPrefix"]["Condition"] == {
        "StringLike": {"s3:prefix": ["voxtral/2602/*"]}
    }
    _, config = only(stack, "AWS::SageMaker::EndpointConfig")
    (variant,) = config["Properties"]["ProductionVariants"]
    assert (
        variant["ModelDataDownloadTimeoutInSeconds"],
        variant["ContainerStartupHealthCheckTimeoutInSeconds"],
        variant["InferenceAmiVersion"],
    ) == (600, 900, "al2023-ami-sagemaker-inference-gpu-4-1")
    assert only(stack, "AWS::Logs::LogGroup")[1]["Properties"]["RetentionInDays"] == 90


# --- The ML storage volumes' key (CreateEndpointConfig, KmsKeyId) -------------------------------

VOLUME_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/volumes"
KMS_RULE = "SageMakerEndpointConfigurationKMSKeyConfigured"


def config_of(stack) -> tuple[str, dict]:
    return only(stack, "AWS::SageMaker::EndpointConfig")


def infos_and_warnings(stack) -> tuple[list[str], list[str]]:
    """The info and warning annotations' messages on ``stack``'s constructs."""
    from aws_cdk.assertions import Annotations, Match

    annotations = Annotations.from_stack(stack)
    return (
        [m.entry.data for m in annotations.find_info("*", Match.any_value())],
        [m.entry.data for m in annotations.find_warning("*", Match.any_value())],
    )


@pytest.mark.parametrize(
    "variant",
    [
        ProductionVariant("ml.m5.xlarge"),
        ProductionVariant("ml.c5.2xlarge"),
        ProductionVariant(
            "ml.c7i.4xlarge", instance_pools=["ml.c7i.4xlarge", "ml.m7i.4xlarge", "ml.m5.4xlarge"]
        ),
    ],
)
def test_an_ebs_backed_variant_keeps_the_volume_key(variant):
    stack = bare_stack()
    RealtimeEndpoint(
        stack, "Speech", endpoint_props(variant=variant, volume_kms_key_arn=VOLUME_KEY)
    )
    _, config = config_of(stack)
    assert config["Properties"]["KmsKeyId"] == VOLUME_KEY
    assert "checkov" not in config.get("Metadata", {})
    assert infos_and_warnings(stack) == ([], [])


@pytest.mark.parametrize(
    "variant, local",
    [
        (ProductionVariant("ml.g6.4xlarge"), "ml.g6.4xlarge"),
        (ProductionVariant("ml.g6e.2xlarge"), "ml.g6e.2xlarge"),
        # One local-storage pool is enough: CreateEndpointConfig fails if any variant's type has
        # local storage.
        (
            ProductionVariant("ml.m5.4xlarge", instance_pools=["ml.m5.4xlarge", "ml.g5.4xlarge"]),
            "ml.g5.4xlarge",
        ),
        (ProductionVariant("ml.p5.4xlarge"), "ml.p5.4xlarge"),
    ],
)
def test_a_variant_with_a_local_storage_type_leaves_kms_key_id_off_and_says_why(variant, local):
    stack = bare_stack()
    RealtimeEndpoint(
        stack, "Speech", endpoint_props(variant=variant, volume_kms_key_arn=VOLUME_KEY)
    )
    _, config = config_of(stack)
    assert "KmsKeyId" not in config["Properties"]
    (info,), warnings = infos_and_warnings(stack)
    assert warnings == []
    assert info.startswith(
        f"volume_kms_key_arn is not applied. KmsKeyId is left off: {local} has local NVMe"
    )
    assert (
        "CreateEndpointConfig API reference, KmsKeyId" in info
        and "API_CreateEndpointConfig.html" in info
    )
    (skip,) = config["Metadata"]["checkov"]["skip"]
    assert skip["id"] == "CKV_AWS_98" and skip["comment"].startswith(
        f"KmsKeyId is left off: {local}"
    )


def test_without_a_key_a_local_storage_variant_says_nothing_but_records_why_it_has_no_key():
    stack = bare_stack()
    RealtimeEndpoint(stack, "Speech", endpoint_props())  # ml.g6.4xlarge
    _, config = config_of(stack)
    assert "KmsKeyId" not in config["Properties"]
    assert infos_and_warnings(stack) == ([], [])
    assert [s["id"] for s in config["Metadata"]["checkov"]["skip"]] == ["CKV_AWS_98"]


def test_a_type_the_catalogue_does_not_know_keeps_the_key_with_a_warning_never_a_guess():
    stack = bare_stack()
    RealtimeEndpoint(
        stack,
        "Speech",
        endpoint_props(variant=ProductionVariant("ml.r5.large"), volume_kms_key_arn=VOLUME_KEY),
    )
    _, config = config_of(stack)
    assert config["Properties"]["KmsKeyId"] == VOLUME_KEY
    infos, (warning,) = infos_and_warnings(stack)
    assert infos == []
    assert warning.startswith(
        "KmsKeyId is set, but constructs_lib/facts/instance_types.py does not know whether "
        "ml.r5.large has local NVMe instance storage: if so, CreateEndpointConfig fails"
    )
    assert "[ack: realtime-voice:volume-key-unknown-storage]" in warning
    # Without a key there is nothing to decide: no warning.
    quiet = bare_stack()
    RealtimeEndpoint(quiet, "Speech", endpoint_props(variant=ProductionVariant("ml.r5.large")))
    assert infos_and_warnings(quiet) == ([], [])


@pytest.mark.parametrize(
    "instance_type, acknowledged", [("ml.g6.4xlarge", True), ("ml.m5.xlarge", False)]
)
def test_the_compliance_packs_kms_rule_is_acknowledged_only_where_aws_refuses_the_key(
    instance_type, acknowledged
):
    """HIPAA Security and NIST 800-53 rev 5 flag an EndpointConfig without KmsKeyId: on a
    local-storage type that is acknowledged; on an EBS-backed type without a key it stays a finding
    (the gate can fail)."""
    from cdk_nag import HIPAASecurityChecks, NIST80053R5Checks

    stack = bare_stack()
    RealtimeEndpoint(stack, "Speech", endpoint_props(variant=ProductionVariant(instance_type)))
    app = stack.node.root
    Validations.of(app).add_plugins(HIPAASecurityChecks(app), NIST80053R5Checks(app))
    with pytest.raises(
        Exception, match="ValidationFailed"
    ):  # the bare stack has other findings (log group key...)
        app.synth()
    report = json.loads((Path(app.outdir) / "validation-report.json").read_text())
    rules = {f"HIPAA.Security-{KMS_RULE}", f"NIST.800.53.R5-{KMS_RULE}"}
    found = {v["ruleName"] for r in report["pluginReports"] for v in r["violations"]} & rules
    # (The reasons are checked where the report has no other finding: tests/app/test_lint.py.)
    assert found == (set() if acknowledged else rules)


def test_a_model_package_runs_with_network_isolation_by_default():
    stack = bare_stack()
    RealtimeEndpoint(
        stack,
        "Tts",
        endpoint_props(
            container=ModelPackageContainer(PACKAGE), variant=ProductionVariant("ml.g6e.2xlarge")
        ),
    )
    _, model = only(stack, "AWS::SageMaker::Model")
    assert model["Properties"]["PrimaryContainer"] == {"ModelPackageName": PACKAGE}
    assert model["Properties"]["EnableNetworkIsolation"] is True
    assert "PullImage" not in statements(stack)


def test_any_iam_role_works_and_gets_only_the_log_writes():
    stack = bare_stack()
    role = iam.Role(stack, "MyRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props(role=role))
    assert endpoint.role is role
    assert set(statements(stack)) == {"WriteEndpointLogs"}
    _, model = only(stack, "AWS::SageMaker::Model")
    policy_id = next(iter(resources(stack, "AWS::IAM::Policy")))
    assert (
        policy_id in model["DependsOn"]
    )  # the role's policy exists before SageMaker checks the Model
    # An imported role that the app may not change: no statement, still a valid endpoint.
    stack = bare_stack()
    imported = iam.Role.from_role_arn(
        stack, "Imported", f"arn:aws:iam::{ACCOUNT}:role/ops", mutable=False
    )
    RealtimeEndpoint(stack, "Speech", endpoint_props(role=imported))
    assert resources(stack, "AWS::IAM::Policy") == {}
    assert (
        only(stack, "AWS::SageMaker::Model")[1]["Properties"]["ExecutionRoleArn"]
        == f"arn:aws:iam::{ACCOUNT}:role/ops"
    )


def test_grant_invoke_allows_the_invoke_actions_on_this_endpoint_only():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(
        stack,
        "Tts",
        endpoint_props(
            container=ModelPackageContainer(PACKAGE),
            invoke_actions=[INVOKE, INVOKE_WITH_RESPONSE_STREAM],
        ),
    )
    caller = iam.User(stack, "Caller")
    endpoint.grant_invoke(caller)
    streaming_only = iam.User(stack, "Other")
    endpoint.grant_invoke(streaming_only, INVOKE)
    endpoint_id, _ = only(stack, "AWS::SageMaker::Endpoint")
    by_user = {
        p["Properties"]["Users"][0]["Ref"]: p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(stack, "AWS::IAM::Policy").values()
        if "Users" in p["Properties"]
    }
    (caller_statement,) = next(v for k, v in by_user.items() if k.startswith("Caller"))
    assert caller_statement["Action"] == [INVOKE, INVOKE_WITH_RESPONSE_STREAM]
    assert caller_statement["Resource"] == {"Ref": endpoint_id}
    (other_statement,) = next(v for k, v in by_user.items() if k.startswith("Other"))
    assert other_statement["Action"] == INVOKE


def test_importers_give_name_arn_metrics_grants_and_alarms_of_an_endpoint_made_elsewhere():
    stack = bare_stack()
    by_name = RealtimeEndpoint.from_endpoint_name(
        stack, "ByName", "Sonic-TTS", instance_type="ml.g6e.2xlarge"
    )
    assert by_name.endpoint_name == "Sonic-TTS"
    # SageMaker writes endpoint names in lower case in ARNs.
    assert stack.resolve(by_name.endpoint_arn) == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                f":sagemaker:{REGION}:{ACCOUNT}:endpoint/sonic-tts",
            ],
        ]
    }
    by_arn = RealtimeEndpoint.from_endpoint_attributes(
        stack,
        "ByArn",
        endpoint_arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/voxtral-realtime",
    )
    assert by_arn.endpoint_name == "voxtral-realtime"
    assert by_arn.metric_invocations().dimensions == {
        "EndpointName": "voxtral-realtime",
        "VariantName": "AllTraffic",
    }
    by_name.grant_invoke(iam.User(stack, "Caller"))
    alarms = by_name.add_alarms(topic=sns.Topic(stack, "Topic"))
    assert "Sonic-TTS-EndpointHealth" in [
        a["Properties"]["AlarmName"] for a in resources(stack, "AWS::CloudWatch::Alarm").values()
    ]
    assert alarms.rollback_alarms == []  # no rolling update to roll back
    with pytest.raises(ValueError, match="exactly one of endpoint_name and endpoint_arn"):
        RealtimeEndpoint.from_endpoint_attributes(stack, "Neither")
    with pytest.raises(PropsError, match="its instance type is unknown"):
        by_arn.add_alarms()


def test_metric_helpers_name_namespace_dimensions_statistic_period_and_unit():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props(endpoint_name="speech"))
    dimensions = {"EndpointName": "speech", "VariantName": "AllTraffic"}
    expected = {
        "metric_invocations": ("AWS/SageMaker", "Invocations", "Sum"),
        "metric_invocation_5xx_errors": ("AWS/SageMaker", "Invocation5XXErrors", "Sum"),
        "metric_invocation_5xx_error_rate": ("AWS/SageMaker", "Invocation5XXErrors", "Average"),
        "metric_model_latency": ("AWS/SageMaker", "ModelLatency", "p90"),
        "metric_overhead_latency": ("AWS/SageMaker", "OverheadLatency", "p90"),
        "metric_gpu_utilization": ("/aws/sagemaker/Endpoints", "GPUUtilization", "Average"),
        "metric_instances_reporting": ("/aws/sagemaker/Endpoints", "CPUUtilization", "SampleCount"),
    }
    for method, (namespace, name, statistic) in expected.items():
        metric = getattr(endpoint, method)()
        assert (
            metric.namespace,
            metric.metric_name,
            metric.statistic,
            metric.period.to_seconds(),
        ) == (namespace, name, statistic, 60), method
        assert metric.dimensions == dimensions, method
    assert endpoint.metric_model_latency("p50", Duration.minutes(5)).period.to_seconds() == 300
    # ModelLatency and OverheadLatency are microseconds (the docstrings say so too).
    assert UNITS["ModelLatency"] == UNITS["OverheadLatency"] == "Microseconds"
    assert "microseconds" in RealtimeEndpoint.metric_model_latency.__doc__


def test_auto_scale_instance_count_takes_target_tracking_policies_and_keeps_the_count_on_update():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props(endpoint_name="speech"))
    scaling = endpoint.auto_scale_instance_count(min_capacity=1, max_capacity=3)
    scaling.scale_on_invocations("Invocations", invocations_per_minute=100)
    scaling.scale_to_track(
        "Streams",
        TargetTracking(
            target_value=1.4,
            metric=endpoint.metric("ActiveStreams", namespace="Team/Bridge", statistic="Average"),
            scale_in_cooldown_s=600,
        ),
    )
    endpoint_id, resource = only(stack, "AWS::SageMaker::Endpoint")
    assert resource["Properties"]["RetainAllVariantProperties"] is True
    target_id, target = only(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/speech/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 1,
        "MaxCapacity": 3,
    }
    assert target["DependsOn"] == [endpoint_id]
    policies = {
        p["Properties"]["PolicyName"]: p["Properties"]
        for p in resources(stack, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }
    assert sorted(policies) == [
        "speech-track-ActiveStreams",
        "speech-track-SageMakerVariantInvocationsPerInstance",
    ]
    invocations = policies["speech-track-SageMakerVariantInvocationsPerInstance"]
    assert invocations["ScalingTargetId"] == {"Ref": target_id}
    assert invocations["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 100,
        "ScaleInCooldown": 300,
        "ScaleOutCooldown": 300,
        "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
        },
    }
    streams = policies["speech-track-ActiveStreams"]["TargetTrackingScalingPolicyConfiguration"]
    assert streams["CustomizedMetricSpecification"] == {
        "Namespace": "Team/Bridge",
        "MetricName": "ActiveStreams",
        "Statistic": "Average",
        "Dimensions": [
            {"Name": "EndpointName", "Value": "speech"},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ],
    }
    assert (streams["TargetValue"], streams["ScaleInCooldown"]) == (1.4, 600)


def test_alarms_with_a_rollback_percent_roll_back_the_rolling_update_and_the_role_may_read_them():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(
        stack, "Speech", endpoint_props(endpoint_name="speech", rolling_update=RollingUpdate())
    )
    topic = sns.Topic(stack, "Topic")
    alarms = endpoint.add_alarms(EndpointAlarmThresholds(rollback_5xx_error_percent=5), topic=topic)
    by_name = {
        a["Properties"]["AlarmName"]: (k, a)
        for k, a in resources(stack, "AWS::CloudWatch::Alarm").items()
    }
    # ml.g6.4xlarge has a GPU: 11 SageMaker alarms, the rate alarm among them.
    assert len(by_name) == 11 and {"speech-Invocation5XXErrorRate", "speech-GPUUtilization"} <= set(
        by_name
    )
    rate_id, rate = by_name["speech-Invocation5XXErrorRate"]
    assert rate["Properties"]["AlarmActions"] == [
        {"Ref": next(iter(resources(stack, "AWS::SNS::Topic")))}
    ]
    endpoint_id, resource = only(stack, "AWS::SageMaker::Endpoint")
    assert resource["Properties"]["DeploymentConfig"] == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 1},
            "WaitIntervalInSeconds": 600,
            # One instance, one batch: SageMaker's default timeouts counted as 3600 s each, 7200 +
            # 600 s.
            "MaximumExecutionTimeoutInSeconds": 7800,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": rate_id}}]},
    }
    assert statements(stack)["DescribeRollbackAlarms"] == {
        "Sid": "DescribeRollbackAlarms",
        "Action": "cloudwatch:DescribeAlarms",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [rate_id, "Arn"]},
    }
    # The health alarm (missing data breaching) waits for the endpoint; the rollback alarm cannot.
    assert endpoint_id in by_name["speech-EndpointHealth"][1]["DependsOn"]
    assert "DependsOn" not in rate
    assert [alarm.alarm_name for alarm in alarms.rollback_alarms] == [
        alarms.alarms["Invocation5XXErrorRate"].alarm_name
    ]


def test_a_rollback_alarm_needs_a_rolling_update():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(stack, "Speech", endpoint_props())
    alarms = endpoint.add_alarms(EndpointAlarmThresholds(rollback_5xx_error_percent=5))
    assert "DeploymentConfig" not in only(stack, "AWS::SageMaker::Endpoint")[1]["Properties"]
    with pytest.raises(
        ValueError, match="rollback alarms need a RealtimeEndpoint with a rolling_update"
    ):
        endpoint.add_rollback_alarm(alarms.alarms["Invocation5XXErrorRate"])


def test_every_bad_prop_is_reported_in_one_error():
    with pytest.raises(PropsError) as caught:
        RealtimeEndpoint(
            bare_stack(),
            "Speech",
            endpoint_props(
                endpoint_name="bad_name",
                container=ImageContainer(
                    "docker.io/library/bridge:1", model_data_s3_uri="s3://team-models"
                ),
                variant=ProductionVariant(
                    "g6.4xlarge",
                    initial_instance_count=0,
                    container_startup_timeout_s=5,
                    inference_ami_version="latest",
                ),
                volume_kms_key_arn="arn:aws:kms:eu-west-1:123456789012:alias/volumes",
                log_retention_days=31,
                rolling_update=RollingUpdate(batch_percent=60),
                invoke_actions=["sagemaker:*"],
            ),
        )
    assert caught.value.problems == [
        "endpoint_name='bad_name': must be 1-63 letters, digits or '-', starting and ending with "
        "a letter or digit (SageMaker EndpointName)",
        "image_uri='docker.io/library/bridge:1': must be a private ECR image "
        "'<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or '...@sha256:<digest>'",
        "model_data_s3_uri='s3://team-models': must be 's3://<bucket>/<prefix>' with a valid "
        "bucket name (3-63 lower-case letters, digits, '.' or '-') and a non-empty prefix",
        "instance_type='g6.4xlarge': not a SageMaker real-time instance type (expected one of "
        "SageMaker's ProductionVariant types of the form 'ml.<family>.<size>', e.g. "
        "'ml.g6.4xlarge')",
        "initial_instance_count=0: must be a positive whole number",
        "container_startup_timeout_s=5: must be between 60 and 3600 seconds",
        "inference_ami_version='latest': must be one of al2-ami-sagemaker-inference-gpu-2, "
        "al2-ami-sagemaker-inference-gpu-2-1, al2-ami-sagemaker-inference-gpu-3-1, "
        "al2023-ami-sagemaker-inference-gpu-4-1",
        "volume_kms_key_arn='arn:aws:kms:eu-west-1:123456789012:alias/volumes': the key is in "
        "eu-west-1 but the stack deploys to us-east-1",
        "log_retention_days=31: must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, "
        "400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
        "batch_percent=60: must be between 5 and 50 (percent of the variant's instances; "
        "RollingUpdatePolicy MaximumBatchSize)",
        'invoke_actions=["sagemaker:*"]: must be one or more of sagemaker:InvokeEndpoint, '
        "sagemaker:InvokeEndpointWithResponseStream, "
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    ]
    assert str(caught.value).startswith(
        "RealtimeEndpoint Speech: invalid props:\n  - endpoint_name='bad_name'"
    )


def test_a_model_package_refuses_what_marketplace_does_not_allow():
    with pytest.raises(PropsError) as caught:
        RealtimeEndpoint(
            bare_stack(),
            "Tts",
            endpoint_props(
                container=ModelPackageContainer(PACKAGE.replace(REGION, "eu-west-1")),
                rolling_update=RollingUpdate(),
                enable_network_isolation=False,
            ),
        )
    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "model_package_arn='arn",
        "rolling_update='RollingUpdate(...)'",
        "enable_network_isolation=false",
    ]
    assert (
        "the package is in eu-west-1 but the stack deploys to us-east-1" in caught.value.problems[0]
    )


def test_bad_scaling_and_alarm_props_are_reported_by_their_constructs():
    endpoint = RealtimeEndpoint(
        bare_stack(),
        "Speech",
        endpoint_props(variant=ProductionVariant("ml.g6.4xlarge", initial_instance_count=1)),
    )
    with pytest.raises(PropsError, match=r"min_capacity=0: must be at least 1"):
        endpoint.auto_scale_instance_count(min_capacity=0, max_capacity=2)
    with pytest.raises(
        PropsError,
        match=r"initial_instance_count=1: must be between min_capacity=2 and max_capacity=3",
    ):
        endpoint.auto_scale_instance_count(min_capacity=2, max_capacity=3)
    scaling = endpoint.auto_scale_instance_count(min_capacity=1, max_capacity=2)
    with pytest.raises(PropsError) as caught:
        scaling.scale_to_track(
            "Bad", TargetTracking(target_value=0, predefined_metric="CPU", scale_in_cooldown_s=0)
        )
    assert caught.value.problems == [
        "target_value=0: must be a positive number (the metric's value per instance to hold)",
        "predefined_metric='CPU': must be one of SageMakerVariantInvocationsPerInstance, "
        "SageMakerVariantConcurrentRequestsPerModelHighResolution",
        "scale_in_cooldown_s=0: must be more than 0 and at most 86400 seconds",
    ]
    with pytest.raises(PropsError) as caught:
        endpoint.add_alarms(
            EndpointAlarmThresholds(gpu_utilization_percent=100, model_latency_p90_ms=0)
        )
    assert caught.value.problems == [
        "model_latency_p90_ms=0: must be a positive number of milliseconds",
        "gpu_utilization_percent=100: must be a percent of each GPU's capacity, more than 0 and "
        "less than 100 (the alarm fires above it, and use never exceeds 100 %)",
    ]
    uncatalogued = RealtimeEndpoint(
        bare_stack(), "Cpu", endpoint_props(variant=ProductionVariant("ml.inf2.xlarge"))
    )
    with pytest.raises(
        PropsError, match=r"without vCPU and GPU facts in constructs_lib/facts/instance_types.py"
    ):
        uncatalogued.add_alarms()


def nagged_endpoint_app(extra_wildcard: bool):
    """A bare app with cdk-nag's AwsSolutions checks and a fully used endpoint (optionally plus a
    role with an unacknowledged wildcard, the control).

    A plain ``App``, as a user's: the CDK's own template validation runs as well, with the feature
    flag that ``cdk init`` sets (``@aws-cdk/core:validateAgainstDefaultRules``), so one of its
    findings would fail the synth and be in the report the test reads. The other construct tests
    leave it out (construct_kit's ``unit_app``)."""
    stack = Stack(App(context={"@aws-cdk/core:validateAgainstDefaultRules": True}), "Test", env=ENV)
    endpoint = RealtimeEndpoint(
        stack,
        "Speech",
        endpoint_props(
            container=ImageContainer(IMAGE, model_data_s3_uri="s3://team-models/voxtral/"),
            rolling_update=RollingUpdate(),
        ),
    )
    endpoint.add_alarms(EndpointAlarmThresholds(rollback_5xx_error_percent=5))
    endpoint.auto_scale_instance_count(min_capacity=1, max_capacity=2).scale_on_concurrent_requests(
        "Concurrency", requests_per_instance=4
    )
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(caller)
    if extra_wildcard:
        caller.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    app = stack.node.root
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def test_a_bare_app_with_the_endpoint_passes_cdk_nag():
    """What the constructs acknowledge themselves (ECR login and PutMetricData "*", the model-prefix
    and log-stream wildcards) is enough: no finding is left for the user. The control shows the
    checks run in such an app."""
    assembly = nagged_endpoint_app(
        extra_wildcard=False
    ).synth()  # an unacknowledged finding would raise here
    report = json.loads((Path(assembly.directory) / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::\*\]"):
        nagged_endpoint_app(extra_wildcard=True).synth()


# --- A Model per instance pool (InstancePool ModelNameOverride) ---------------------------------


def test_a_pool_with_an_environment_of_its_own_runs_its_own_model():
    stack = bare_stack()
    endpoint = RealtimeEndpoint(
        stack,
        "Speech",
        endpoint_props(
            container=ImageContainer(IMAGE, environment={"SM_VLLM_MAX_NUM_SEQS": "4", "MODE": "x"}),
            variant=ProductionVariant(
                "ml.g6.xlarge", instance_pools=("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge")
            ),
            pool_environment={"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}},
        ),
    )
    models = resources(stack, "AWS::SageMaker::Model")
    (config,) = resources(stack, "AWS::SageMaker::EndpointConfig").values()
    pools = config["Properties"]["ProductionVariants"][0]["InstancePools"]
    assert [pool.get("ModelNameOverride") is not None for pool in pools] == [False, True, False]
    pool_model_id = pools[1]["ModelNameOverride"]["Fn::GetAtt"][0]
    assert pool_model_id.startswith("SpeechPoolModelMlG6eXlarge")
    variant_model_id = config["Properties"]["ProductionVariants"][0]["ModelName"]["Fn::GetAtt"][0]
    assert variant_model_id.startswith("SpeechModel")
    pool_model, variant_model = models[pool_model_id], models[variant_model_id]
    assert pool_model["Properties"]["PrimaryContainer"]["Environment"] == {
        "SM_VLLM_MAX_NUM_SEQS": "23",
        "MODE": "x",
    }
    assert {k: v for k, v in pool_model["Properties"].items() if k != "PrimaryContainer"} == {
        k: v for k, v in variant_model["Properties"].items() if k != "PrimaryContainer"
    }
    assert (
        pool_model["DependsOn"] == variant_model["DependsOn"]
    )  # the role's policy first, as for the variant's
    assert list(endpoint.pool_model_names) == ["ml.g6e.xlarge"]


def test_pool_environment_rules_are_named_with_their_source():
    with pytest.raises(PropsError) as caught:
        RealtimeEndpoint(
            bare_stack(), "Speech", endpoint_props(pool_environment={"ml.g6e.xlarge": {"A": "1"}})
        )
    assert caught.value.problems == [
        'pool_environment={"ml.g6e.xlarge": {"A": "1"}}: needs instance pools '
        "(variant.instance_pools): "
        "ModelNameOverride is a member of InstancePool only (SageMaker API reference, InstancePool)"
    ]
    with pytest.raises(PropsError) as caught:
        RealtimeEndpoint(
            bare_stack(),
            "Speech",
            endpoint_props(
                variant=ProductionVariant(
                    "ml.g6.xlarge", instance_pools=("ml.g6.xlarge", "ml.g6e.xlarge")
                ),
                pool_environment={"ml.g6.xlarge": {"A": "1"}, "ml.g5.xlarge": {}},
            ),
        )
    assert caught.value.problems == [
        "pool_environment='ml.g6.xlarge': is the priority-1 pool, which runs the variant's "
        "Model: give its environment in container.environment",
        "pool_environment='ml.g5.xlarge': is not one of the instance pools ['ml.g6.xlarge', "
        "'ml.g6e.xlarge']",
        "pool_environment='ml.g5.xlarge': needs a non-empty map of environment variable names to "
        "strings",
    ]
    with pytest.raises(PropsError) as caught:
        RealtimeEndpoint(
            bare_stack(),
            "Tts",
            endpoint_props(
                container=ModelPackageContainer(PACKAGE),
                variant=ProductionVariant(
                    "ml.g6e.2xlarge", instance_pools=("ml.g6e.2xlarge", "ml.g6e.4xlarge")
                ),
                pool_environment={"ml.g6e.4xlarge": {"A": "1"}},
            ),
        )
    assert any("must be empty for a model package" in problem for problem in caught.value.problems)


def test_the_instance_pool_properties_exist_in_the_l1_botocore_and_cfn_lint():
    """ModelNameOverride is a property of CDK's InstancePoolProperty, of botocore's SageMaker
    InstancePool shape (a ModelName: at most 63 characters) and of cfn-lint's
    AWS::SageMaker::EndpointConfig schema."""
    import inspect

    import botocore.session
    from aws_cdk import aws_sagemaker
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    assert (
        "model_name_override"
        in inspect.signature(aws_sagemaker.CfnEndpointConfig.InstancePoolProperty).parameters
    )
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("InstancePool")
    assert set(shape.members) == {"InstanceType", "ModelNameOverride", "Priority"}
    assert shape.members["ModelNameOverride"].metadata["max"] == 63
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(
        "us-east-1", "AWS::SageMaker::EndpointConfig"
    ).schema
    assert "ModelNameOverride" in schema["definitions"]["InstancePool"]["properties"]
