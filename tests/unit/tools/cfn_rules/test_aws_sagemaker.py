"""The rule book's SageMaker rules (tools/cfn_rules/aws_sagemaker.py: endpoint configs, models,
endpoints and their scaling): each rule fails on a template written to break it and holds on the
same template mended (test_aws_rules.py holds the book as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import config, findings, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import aws_sagemaker


def model(**container) -> dict:
    return template(
        Model=(
            "AWS::SageMaker::Model",
            {
                "ExecutionRoleArn": "arn:aws:iam::123456789012:role/r",
                "PrimaryContainer": {"Image": "i", **container},
            },
        )
    )


def role_and_model(depends: bool) -> dict:
    tpl = template(
        Role=("AWS::IAM::Role", {"AssumeRolePolicyDocument": {}}),
        Policy=("AWS::IAM::Policy", {"Roles": [{"Ref": "Role"}], "PolicyDocument": {}}),
        Model=("AWS::SageMaker::Model", {"ExecutionRoleArn": {"Fn::GetAtt": ["Role", "Arn"]}}),
    )
    if depends:
        tpl["Resources"]["Model"]["DependsOn"] = ["Policy", "Role"]
    return tpl


L40S_POOL = [{"InstanceType": "ml.g6e.2xlarge", "Priority": 1}]

PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/sonic"

S3_PREFIX = {
    "S3DataSource": {
        "S3DataType": "S3Prefix",
        "CompressionType": "None",
        "S3Uri": "s3://b/models/v1/",
    }
}


def scaling(
    resource_id="endpoint/voxtral-realtime/variant/AllTraffic",
    low=1,
    high=4,
    dimension="sagemaker:variant:DesiredInstanceCount",
    namespace="sagemaker",
    policy=None,
) -> dict:
    resources = {
        "Config": config(key=None),
        "Endpoint": (
            "AWS::SageMaker::Endpoint",
            {
                "EndpointName": "voxtral-realtime",
                "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            },
        ),
        "Target": (
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ResourceId": resource_id,
                "MinCapacity": low,
                "MaxCapacity": high,
                "ScalableDimension": dimension,
                "ServiceNamespace": namespace,
            },
        ),
    }
    if policy is not None:
        resources["Policy"] = (
            "AWS::ApplicationAutoScaling::ScalingPolicy",
            {
                "PolicyName": "p",
                "PolicyType": "TargetTrackingScaling",
                "ScalingTargetId": {"Ref": "Target"},
                "TargetTrackingScalingPolicyConfiguration": {"TargetValue": 3, **policy},
            },
        )
    return template(**resources)


INVOCATIONS = {
    "PredefinedMetricSpecification": {
        "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
    }
}

ACTIVE_STREAMS = {
    "CustomizedMetricSpecification": {
        "MetricName": "ActiveStreams",
        "Namespace": "RealtimeVoice/Bridge",
        "Statistic": "Average",
    }
}


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (
        aws_sagemaker.KmsKeyWithLocalStorage,
        template(C=config("ml.g6.4xlarge")),
        "local NVMe storage",
        template(C=config("ml.g6.4xlarge", key=None)),
    ),
    (
        aws_sagemaker.KmsKeyWithLocalStorage,
        template(C=config(None, InstancePools=L40S_POOL)),
        "ml.g6e.2xlarge has local NVMe",
        template(C=config(None, key=None, InstancePools=L40S_POOL)),
    ),
    (
        aws_sagemaker.KmsKeyWithLocalStorage,
        template(C=config("ml.zz9.xlarge")),
        "not in the instance catalogue",
        template(C=config("ml.zz9.xlarge", key=None)),
    ),
    (
        aws_sagemaker.ModelDataSourceLimits,
        model(ModelPackageName=PACKAGE, ModelDataSource=S3_PREFIX),
        "model package",
        model(ModelDataSource=S3_PREFIX),
    ),
    (
        aws_sagemaker.ModelDataSourceLimits,
        model(
            ModelDataSource={
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                    "S3Uri": "s3://b/models/v1",
                }
            }
        ),
        "must end with '/'",
        model(ModelDataSource=S3_PREFIX),
    ),
    (
        aws_sagemaker.ModelDataSourceLimits,
        model(
            ModelDataSource={
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "CompressionType": "Gzip",
                    "S3Uri": "s3://b/m/",
                }
            }
        ),
        "Gzip",
        model(ModelDataSource=S3_PREFIX),
    ),
    (
        aws_sagemaker.ModelDataSourceLimits,
        model(Mode="MultiModel", ModelDataSource=S3_PREFIX),
        "multi-model",
        model(Mode="SingleModel", ModelDataSource=S3_PREFIX),
    ),
    (
        aws_sagemaker.MarketplacePackageIsIsolated,
        model(ModelPackageName=PACKAGE),
        "needs EnableNetworkIsolation",
        template(
            Model=(
                "AWS::SageMaker::Model",
                {"EnableNetworkIsolation": True, "PrimaryContainer": {"ModelPackageName": PACKAGE}},
            )
        ),
    ),
    (
        aws_sagemaker.ProvisionTimeoutRange,
        template(C=config(VariantInstanceProvisionTimeoutInSeconds=240)),
        "300-3600",
        template(C=config(VariantInstanceProvisionTimeoutInSeconds=300)),
    ),
    (
        aws_sagemaker.ContainerEnvironmentSize,
        model(Environment={"BIG": "x" * 1025}),
        "1024-byte",
        model(Environment={"BIG": "x" * 1024}),
    ),
    (
        aws_sagemaker.ContainerEnvironmentSize,
        model(Environment={f"K{i}": "x" * 1000 for i in range(40)}),
        "over 32 KB",
        model(Environment={f"K{i}": "x" * 1000 for i in range(30)}),
    ),
    (
        aws_sagemaker.InstancePoolPriorities,
        template(
            C=config(
                None,
                key=None,
                InstancePools=[
                    {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                    {"InstanceType": "ml.g6e.2xlarge", "Priority": 6},
                ],
            )
        ),
        "outside 1-5",
        template(
            C=config(
                None,
                key=None,
                InstancePools=[
                    {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                    {"InstanceType": "ml.g6e.2xlarge", "Priority": 2},
                ],
            )
        ),
    ),
    (
        aws_sagemaker.ReplacedSageMakerResourcesHaveNoName,
        template(
            C=(
                "AWS::SageMaker::EndpointConfig",
                {**config(key=None)[1], "EndpointConfigName": "voxtral"},
            )
        ),
        "EndpointConfigName is fixed",
        template(C=config(key=None)),
    ),
    (
        aws_sagemaker.ReplacedSageMakerResourcesHaveNoName,
        template(M=("AWS::SageMaker::Model", {"ModelName": "voxtral"})),
        "ModelName is fixed",
        template(M=("AWS::SageMaker::Model", {})),
    ),
    (
        aws_sagemaker.ExecutionRoleOutlivesTheEndpoint,
        role_and_model(depends=False),
        "does not depend on it",
        role_and_model(depends=True),
    ),
    (
        aws_sagemaker.InstancePoolPriorities,
        template(
            C=config(
                None,
                key=None,
                InstancePools=[
                    {"InstanceType": "ml.g6.4xlarge", "Priority": 1},
                    {"InstanceType": "ml.g6.4xlarge", "Priority": 2},
                ],
            )
        ),
        "repeat",
        template(
            C=config(
                None, key=None, InstancePools=[{"InstanceType": "ml.g6.4xlarge", "Priority": 1}]
            )
        ),
    ),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling(low=5, high=4),
        "exceeds MaxCapacity",
        scaling(low=4, high=4),
    ),
    (aws_sagemaker.ScalableTargetNamesItsResource, scaling(low=0), "at least 1", scaling(low=1)),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling("endpoint/other/variant/AllTraffic"),
        "no endpoint 'other'",
        scaling(),
    ),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling("endpoint/voxtral-realtime/variant/Main"),
        "no variant 'Main'",
        scaling(),
    ),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling("voxtral-realtime/AllTraffic"),
        "is not endpoint/",
        scaling(),
    ),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling(dimension="sagemaker:inference-component:DesiredCopyCount"),
        "not a dimension of an endpoint variant",
        scaling(),
    ),
    (
        aws_sagemaker.ScalableTargetNamesItsResource,
        scaling("service/c", namespace="ecs", dimension="ecs:service:DesiredCount"),
        "service/<cluster>",
        scaling("service/c/s", namespace="ecs", dimension="ecs:service:DesiredCount"),
    ),
    (
        aws_sagemaker.TargetTrackingMetric,
        scaling(policy={**ACTIVE_STREAMS, **INVOCATIONS}),
        "exactly one",
        scaling(policy=ACTIVE_STREAMS),
    ),
    (
        aws_sagemaker.TargetTrackingMetric,
        scaling(
            policy={
                "CustomizedMetricSpecification": {"MetricName": "ActiveStreams", "Namespace": "n"}
            }
        ),
        "needs MetricName, Namespace and Statistic",
        scaling(policy=ACTIVE_STREAMS),
    ),
    (
        aws_sagemaker.TargetTrackingMetric,
        scaling(
            policy={
                "CustomizedMetricSpecification": {
                    **ACTIVE_STREAMS["CustomizedMetricSpecification"],
                    "Metrics": [{"Id": "m", "Expression": "1"}],
                }
            }
        ),
        "cannot be combined",
        scaling(policy=ACTIVE_STREAMS),
    ),
    (
        aws_sagemaker.TargetTrackingMetric,
        scaling(
            policy={
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "ECSServiceAverageCPUUtilization"
                }
            }
        ),
        "not a metric of sagemaker",
        scaling(policy=INVOCATIONS),
    ),
    (
        aws_sagemaker.TargetTrackingMetric,
        scaling(
            policy={
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance",
                    "ResourceLabel": "app/x/y/targetgroup/z/w",
                }
            }
        ),
        "ResourceLabel",
        scaling(
            policy={
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                }
            }
        ),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []
