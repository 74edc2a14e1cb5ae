"""The rule book (tools/cfn_rules/aws_rules.py): each rule fails on a template written to
break it and holds on the same template mended; the rules load into cfn-lint with --append-rules.
That every app a session synthesizes is held to them (tests/conftest.py synthesize) is tested in
tests/app/test_aws_rules.py."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tools.cfn_rules import _gate

# isort: split

import aws_rules  # put on sys.path by _gate, as cfn-lint imports it

RULES_DIR = ROOT / "tools" / "cfn_rules"
KEY = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"


def template(**resources: tuple[str, dict] | dict) -> dict:
    """``template(Lid=("AWS::X::Y", {props}))``: a template dict; a dict value is a whole
    resource."""
    return {
        "Resources": {
            lid: r if isinstance(r, dict) else {"Type": r[0], "Properties": r[1]}
            for lid, r in resources.items()
        }
    }


def findings(rule: type, tpl: dict) -> list[str]:
    return [message for _, message in rule().findings(tpl)]


def config(instance_type="ml.g6.4xlarge", key=KEY, **variant) -> tuple[str, dict]:
    props = {
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InitialInstanceCount": 1,
                "InstanceType": instance_type,
                **variant,
            }
        ]
    }
    if key:
        props["KmsKeyId"] = key
    return "AWS::SageMaker::EndpointConfig", props


def ecs_app(
    protected=True,
    termination="ENABLED",
    scaling="ENABLED",
    remover=False,
    gpus="1",
    instance_type="g6.xlarge",
    target_type="ip",
    ordered=True,
    **service,
) -> dict:
    resources = {
        "Template": (
            "AWS::EC2::LaunchTemplate",
            {"LaunchTemplateData": {"InstanceType": instance_type}},
        ),
        "Group": (
            "AWS::AutoScaling::AutoScalingGroup",
            {"MinSize": "0", "MaxSize": "2", "NewInstancesProtectedFromScaleIn": protected},
        ),
        "Provider": (
            "AWS::ECS::CapacityProvider",
            {
                "AutoScalingGroupProvider": {
                    "AutoScalingGroupArn": {"Ref": "Group"},
                    "ManagedScaling": {"Status": scaling},
                    "ManagedTerminationProtection": termination,
                }
            },
        ),
        "Task": (
            "AWS::ECS::TaskDefinition",
            {
                "NetworkMode": "awsvpc",
                "ContainerDefinitions": [
                    {
                        "Name": "Bridge",
                        "MemoryReservation": 8192,
                        "ResourceRequirements": [{"Type": "GPU", "Value": gpus}],
                    }
                ],
            },
        ),
        "Targets": (
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {"TargetType": target_type, "Port": 8080},
        ),
        "Service": (
            "AWS::ECS::Service",
            {
                "TaskDefinition": {"Ref": "Task"},
                "CapacityProviderStrategy": [{"CapacityProvider": {"Ref": "Provider"}}],
                "NetworkConfiguration": {"AwsvpcConfiguration": {"Subnets": ["s-1"]}},
                "LoadBalancers": [{"TargetGroupArn": {"Ref": "Targets"}}],
                **service,
            },
        ),
    }
    resources["Association"] = (
        "AWS::ECS::ClusterCapacityProviderAssociations",
        {
            "Cluster": "c",
            "CapacityProviders": [{"Ref": "Provider"}],
            "DefaultCapacityProviderStrategy": [],
        },
    )
    if remover:
        resources["Unprotect"] = (
            "Custom::RemoveInstanceProtection",
            {"ServiceToken": "arn:x", "GroupName": {"Ref": "Group"}},
        )
    tpl = template(**resources)
    if ordered:
        tpl["Resources"]["Service"]["DependsOn"] = ["Association"]
    return tpl


def load_balancer(
    idle="70", logs=True, prefix="alb", sse="AES256", grantee=None, delay="25", subnets=2
) -> dict:
    attributes = [{"Key": "idle_timeout.timeout_seconds", "Value": idle}]
    if logs:
        attributes += [
            {"Key": "access_logs.s3.enabled", "Value": "true"},
            {"Key": "access_logs.s3.bucket", "Value": {"Ref": "Logs"}},
            {"Key": "access_logs.s3.prefix", "Value": prefix},
        ]
    principal = grantee or {
        "AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::127311923021:root"]]}
    }
    return template(
        Balancer=(
            "AWS::ElasticLoadBalancingV2::LoadBalancer",
            {
                "Type": "application",
                "Subnets": [f"subnet-{i}" for i in range(subnets)],
                "LoadBalancerAttributes": attributes,
            },
        ),
        Logs=(
            "AWS::S3::Bucket",
            {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": sse}}
                    ]
                }
            },
        ),
        LogsPolicy=(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": "Logs"},
                "PolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": "s3:PutObject",
                            "Principal": principal,
                            "Resource": {
                                "Fn::Join": [
                                    "",
                                    [
                                        {"Fn::GetAtt": ["Logs", "Arn"]},
                                        f"/{prefix}/AWSLogs/",
                                        {"Ref": "AWS::AccountId"},
                                        "/*",
                                    ],
                                ]
                            },
                        }
                    ]
                },
            },
        ),
        Targets=(
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {
                "Protocol": "HTTP",
                "HealthCheckIntervalSeconds": 10,
                "HealthCheckTimeoutSeconds": 5,
                "TargetGroupAttributes": [
                    {"Key": "deregistration_delay.timeout_seconds", "Value": delay}
                ],
            },
        ),
    )


ROOT_PRINCIPAL = {
    "AWS": {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
        ]
    }
}


def key(window=7, statements=None, **props) -> dict:
    statements = (
        statements
        if statements is not None
        else [{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*", "Resource": "*"}]
    )
    return template(
        Key=(
            "AWS::KMS::Key",
            {
                "PendingWindowInDays": window,
                "EnableKeyRotation": True,
                "KeyPolicy": {"Version": "2012-10-17", "Statement": statements},
                **props,
            },
        )
    )


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

#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (
        aws_rules.KmsKeyWithLocalStorage,
        template(C=config("ml.g6.4xlarge")),
        "local NVMe storage",
        template(C=config("ml.g6.4xlarge", key=None)),
    ),
    (
        aws_rules.KmsKeyWithLocalStorage,
        template(C=config(None, InstancePools=L40S_POOL)),
        "ml.g6e.2xlarge has local NVMe",
        template(C=config(None, key=None, InstancePools=L40S_POOL)),
    ),
    (
        aws_rules.KmsKeyWithLocalStorage,
        template(C=config("ml.zz9.xlarge")),
        "not in the instance catalogue",
        template(C=config("ml.zz9.xlarge", key=None)),
    ),
    (
        aws_rules.ModelDataSourceLimits,
        model(ModelPackageName=PACKAGE, ModelDataSource=S3_PREFIX),
        "model package",
        model(ModelDataSource=S3_PREFIX),
    ),
    (
        aws_rules.ModelDataSourceLimits,
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
        aws_rules.ModelDataSourceLimits,
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
        aws_rules.ModelDataSourceLimits,
        model(Mode="MultiModel", ModelDataSource=S3_PREFIX),
        "multi-model",
        model(Mode="SingleModel", ModelDataSource=S3_PREFIX),
    ),
    (
        aws_rules.MarketplacePackageIsIsolated,
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
        aws_rules.ProvisionTimeoutRange,
        template(C=config(VariantInstanceProvisionTimeoutInSeconds=240)),
        "300-3600",
        template(C=config(VariantInstanceProvisionTimeoutInSeconds=300)),
    ),
    (
        aws_rules.ContainerEnvironmentSize,
        model(Environment={"BIG": "x" * 1025}),
        "1024-byte",
        model(Environment={"BIG": "x" * 1024}),
    ),
    (
        aws_rules.ContainerEnvironmentSize,
        model(Environment={f"K{i}": "x" * 1000 for i in range(40)}),
        "over 32 KB",
        model(Environment={f"K{i}": "x" * 1000 for i in range(30)}),
    ),
    (
        aws_rules.InstancePoolPriorities,
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
        aws_rules.ReplacedSageMakerResourcesHaveNoName,
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
        aws_rules.ReplacedSageMakerResourcesHaveNoName,
        template(M=("AWS::SageMaker::Model", {"ModelName": "voxtral"})),
        "ModelName is fixed",
        template(M=("AWS::SageMaker::Model", {})),
    ),
    (
        aws_rules.ExecutionRoleOutlivesTheEndpoint,
        role_and_model(depends=False),
        "does not depend on it",
        role_and_model(depends=True),
    ),
    (
        aws_rules.InstancePoolPriorities,
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
]


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


def alarm(**props) -> dict:
    base = {
        "ComparisonOperator": "GreaterThanThreshold",
        "Threshold": 1,
        "EvaluationPeriods": 3,
        "MetricName": "ModelLatency",
        "Namespace": "AWS/SageMaker",
        "Statistic": "Average",
        "Period": 60,
    }
    return template(Alarm=("AWS::CloudWatch::Alarm", {**base, **props}))


def math_alarm(returned=1, **extra) -> dict:
    metrics = [
        {
            "Id": f"m{i}",
            "ReturnData": i < returned,
            "MetricStat": {
                "Metric": {"MetricName": "x", "Namespace": "n"},
                "Period": 60,
                "Stat": "Sum",
            },
        }
        for i in range(2)
    ]
    return template(
        Alarm=(
            "AWS::CloudWatch::Alarm",
            {
                "ComparisonOperator": "GreaterThanThreshold",
                "Threshold": 1,
                "EvaluationPeriods": 1,
                "Metrics": metrics,
                **extra,
            },
        )
    )


def security_group(
    description="Tasks of voxtral-realtime", rule_description="Callers", low=80, high=80, **props
):
    return template(
        Group=(
            "AWS::EC2::SecurityGroup",
            {
                "GroupDescription": description,
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": low,
                        "ToPort": high,
                        "CidrIp": "10.0.0.0/16",
                        "Description": rule_description,
                    }
                ],
                **props,
            },
        )
    )


def endpoints(hostnames=True, support=True, kind="Interface", **props) -> dict:
    endpoint = {
        "VpcId": {"Ref": "Vpc"},
        "VpcEndpointType": kind,
        "ServiceName": "com.amazonaws.us-east-1.ecr.api",
    }
    if kind == "Interface":
        endpoint.update({"PrivateDnsEnabled": True, "SubnetIds": ["s"]})
    else:
        endpoint["RouteTableIds"] = ["r"]
    endpoint.update(props)
    return template(
        Vpc=(
            "AWS::EC2::VPC",
            {
                "CidrBlock": "10.0.0.0/16",
                "EnableDnsHostnames": hostnames,
                "EnableDnsSupport": support,
            },
        ),
        Endpoint=("AWS::EC2::VPCEndpoint", endpoint),
    )


def zoned_endpoint(*zones: str) -> dict:
    tpl = endpoints(SubnetIds=[{"Ref": f"Subnet{i}"} for i in range(len(zones))])
    for i, zone in enumerate(zones):
        tpl["Resources"][f"Subnet{i}"] = {
            "Type": "AWS::EC2::Subnet",
            "Properties": {
                "AvailabilityZone": {"Fn::Select": [ord(zone) - ord("a"), {"Fn::GetAZs": ""}]}
            },
        }
    return tpl


def twice(kind="Interface", **second) -> dict:
    """Two endpoints of one service in one VPC; ``second``: what the second one has instead."""
    tpl = endpoints(kind=kind)
    tpl["Resources"]["Again"] = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {**tpl["Resources"]["Endpoint"]["Properties"], **second},
    }
    return tpl


def bucket_policy(resource=None, principal=True) -> dict:
    statement = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": resource or {"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/*"]]},
    }
    if principal:
        statement["Principal"] = {"Service": "sagemaker.amazonaws.com"}
    return template(
        Bucket=("AWS::S3::Bucket", {}),
        Other=("AWS::S3::Bucket", {}),
        Policy=(
            "AWS::S3::BucketPolicy",
            {"Bucket": {"Ref": "Bucket"}, "PolicyDocument": {"Statement": [statement]}},
        ),
    )


def stores(emptied=True, empty_on_delete=True, policy="Delete") -> dict:
    tpl = template(
        Bucket={"Type": "AWS::S3::Bucket", "DeletionPolicy": policy, "Properties": {}},
        Repository={
            "Type": "AWS::ECR::Repository",
            "DeletionPolicy": policy,
            "Properties": {"EmptyOnDelete": empty_on_delete},
        },
    )
    if emptied:
        tpl["Resources"]["BucketAutoDelete"] = {
            "Type": "Custom::S3AutoDeleteObjects",
            "Properties": {"ServiceToken": "arn:x", "BucketName": {"Ref": "Bucket"}},
        }
    return tpl


def secret(**props) -> dict:
    return template(Secret=("AWS::SecretsManager::Secret", props))


def project(image="aws/codebuild/standard:7.0", kind="LINUX_CONTAINER", **props) -> dict:
    return template(
        Build=(
            "AWS::CodeBuild::Project",
            {
                "Environment": {
                    "Image": image,
                    "Type": kind,
                    "ComputeType": "BUILD_GENERAL1_MEDIUM",
                },
                "QueuedTimeoutInMinutes": 5,
                **props,
            },
        )
    )


def target_group(**props) -> dict:
    return template(
        Targets=(
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {
                "Protocol": "HTTP",
                "HealthCheckIntervalSeconds": 10,
                "HealthCheckTimeoutSeconds": 5,
                "Matcher": {"HttpCode": "200"},
                **props,
            },
        )
    )


def group(**props) -> dict:
    return template(G=("AWS::AutoScaling::AutoScalingGroup", props))


def task(**container) -> dict:
    return template(
        Task=("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [{"Name": "c", **container}]})
    )


CASES += [
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling(low=5, high=4),
        "exceeds MaxCapacity",
        scaling(low=4, high=4),
    ),
    (aws_rules.ScalableTargetNamesItsResource, scaling(low=0), "at least 1", scaling(low=1)),
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling("endpoint/other/variant/AllTraffic"),
        "no endpoint 'other'",
        scaling(),
    ),
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling("endpoint/voxtral-realtime/variant/Main"),
        "no variant 'Main'",
        scaling(),
    ),
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling("voxtral-realtime/AllTraffic"),
        "is not endpoint/",
        scaling(),
    ),
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling(dimension="sagemaker:inference-component:DesiredCopyCount"),
        "not a dimension of an endpoint variant",
        scaling(),
    ),
    (
        aws_rules.ScalableTargetNamesItsResource,
        scaling("service/c", namespace="ecs", dimension="ecs:service:DesiredCount"),
        "service/<cluster>",
        scaling("service/c/s", namespace="ecs", dimension="ecs:service:DesiredCount"),
    ),
    (
        aws_rules.TargetTrackingMetric,
        scaling(policy={**ACTIVE_STREAMS, **INVOCATIONS}),
        "exactly one",
        scaling(policy=ACTIVE_STREAMS),
    ),
    (
        aws_rules.TargetTrackingMetric,
        scaling(
            policy={
                "CustomizedMetricSpecification": {"MetricName": "ActiveStreams", "Namespace": "n"}
            }
        ),
        "needs MetricName, Namespace and Statistic",
        scaling(policy=ACTIVE_STREAMS),
    ),
    (
        aws_rules.TargetTrackingMetric,
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
        aws_rules.TargetTrackingMetric,
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
        aws_rules.TargetTrackingMetric,
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
    (aws_rules.AlarmEvaluationWindow, alarm(Period=90), "not 10, 20, 30", alarm(Period=120)),
    (
        aws_rules.AlarmEvaluationWindow,
        alarm(Period=300, EvaluationPeriods=300),
        "exceeds 86400",
        alarm(Period=300, EvaluationPeriods=288),
    ),
    (
        aws_rules.AlarmEvaluationWindow,
        alarm(Period=3600, EvaluationPeriods=169),
        "exceeds 604800",
        alarm(Period=3600, EvaluationPeriods=168),
    ),
    (
        aws_rules.AlarmEvaluationWindow,
        alarm(DatapointsToAlarm=4),
        "exceeds EvaluationPeriods",
        alarm(DatapointsToAlarm=3),
    ),
    (aws_rules.AlarmEvaluationWindow, math_alarm(returned=2), "exactly one must", math_alarm()),
    (
        aws_rules.AlarmEvaluationWindow,
        math_alarm(Namespace="n"),
        "cannot be combined",
        math_alarm(),
    ),
    (
        aws_rules.CapacityProviderName,
        template(P=("AWS::ECS::CapacityProvider", {"Name": "ecs-gpu"})),
        "not allowed",
        template(P=("AWS::ECS::CapacityProvider", {"Name": "voxtral-gpu"})),
    ),
    (
        aws_rules.ManagedTerminationProtection,
        ecs_app(scaling="DISABLED", remover=True),
        "needs managed scaling",
        ecs_app(remover=True),
    ),
    (
        aws_rules.ManagedTerminationProtection,
        ecs_app(protected=False),
        "does not protect new instances",
        ecs_app(protected=False, termination="DISABLED"),
    ),
    (
        aws_rules.ProtectedInstancesBlockDeletion,
        ecs_app(),
        "cdk destroy can hang",
        ecs_app(remover=True),
    ),
    (
        aws_rules.ProtectedInstancesBlockDeletion,
        ecs_app(termination="DISABLED"),
        "cdk destroy can hang",
        ecs_app(protected=False, termination="DISABLED"),
    ),
    (
        aws_rules.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, LaunchType="EC2"),
        "exclude each other",
        ecs_app(remover=True),
    ),
    (
        aws_rules.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, target_type="instance"),
        "TargetType ip",
        ecs_app(remover=True),
    ),
    (
        aws_rules.ServiceLaunchTypeOrStrategy,
        ecs_app(remover=True, NetworkConfiguration={}),
        "NetworkConfiguration",
        ecs_app(remover=True),
    ),
    (
        aws_rules.ServiceLaunchTypeOrStrategy,
        ecs_app(
            remover=True,
            DeploymentController={"Type": "CODE_DEPLOY"},
            DeploymentConfiguration={
                "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}
            },
        ),
        "circuit breaker",
        ecs_app(
            remover=True,
            DeploymentConfiguration={
                "DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}
            },
        ),
    ),
    (
        aws_rules.ServiceDependsOnItsCapacityProviderAssociation,
        ecs_app(remover=True, ordered=False),
        "does not depend on Association",
        ecs_app(remover=True),
    ),
    (
        aws_rules.AutoScalingGroupSizes,
        group(MinSize="3", MaxSize="2"),
        "exceeds MaxSize",
        group(MinSize="2", MaxSize="2"),
    ),
    (
        aws_rules.AutoScalingGroupSizes,
        group(MinSize="0", MaxSize="2", DesiredCapacity="3"),
        "outside 0-2",
        group(MinSize="0", MaxSize="2", DesiredCapacity="2"),
    ),
    (
        aws_rules.ContainerDefinitionRules,
        task(Image="i"),
        "needs Memory or MemoryReservation",
        task(Image="i", MemoryReservation=512),
    ),
    (
        aws_rules.ContainerDefinitionRules,
        task(Memory=512, MemoryReservation=512),
        "must exceed",
        task(Memory=1024, MemoryReservation=512),
    ),
    (
        aws_rules.ContainerDefinitionRules,
        task(Memory=512, Essential=False),
        "no container is essential",
        task(Memory=512, Essential=True),
    ),
    (
        aws_rules.ContainerDefinitionRules,
        task(Memory=512, HealthCheck={"Command": ["CMD-SHELL", "true"], "StartPeriod": 600}),
        "outside 0-300",
        task(Memory=512, HealthCheck={"Command": ["CMD-SHELL", "true"], "StartPeriod": 300}),
    ),
    (
        aws_rules.ContainerDefinitionRules,
        task(Memory=512, HealthCheck={"Command": ["curl", "-f", "x"]}),
        "CMD or CMD-SHELL",
        task(Memory=512, HealthCheck={"Command": ["CMD", "curl", "-f", "x"]}),
    ),
    (
        aws_rules.GpusFitTheInstance,
        ecs_app(remover=True, gpus="2"),
        "has 1",
        ecs_app(remover=True, gpus="1"),
    ),
    (
        aws_rules.GpusFitTheInstance,
        ecs_app(remover=True, instance_type="zz9.xlarge"),
        "GPU count is unknown",
        ecs_app(remover=True),
    ),
    (
        aws_rules.PlacementStrategyFields,
        ecs_app(remover=True, PlacementStrategies=[{"Type": "binpack", "Field": "instanceId"}]),
        "binpack cannot use",
        ecs_app(remover=True, PlacementStrategies=[{"Type": "spread", "Field": "instanceId"}]),
    ),
    (
        aws_rules.LoadBalancerAttributes,
        load_balancer(idle="4001"),
        "outside 1-4000",
        load_balancer(idle="4000"),
    ),
    (
        aws_rules.LoadBalancerAttributes,
        load_balancer(delay="3601"),
        "outside 0-3600",
        load_balancer(delay="3600"),
    ),
    (
        aws_rules.LoadBalancerAttributes,
        load_balancer(subnets=1),
        "two Availability Zones",
        load_balancer(),
    ),
    (
        aws_rules.TargetGroupHealthCheck,
        target_group(HealthCheckTimeoutSeconds=10),
        "not below the interval",
        target_group(),
    ),
    (
        aws_rules.TargetGroupHealthCheck,
        target_group(HealthyThresholdCount=1),
        "outside 2-10",
        target_group(),
    ),
    (
        aws_rules.TargetGroupHealthCheck,
        target_group(Matcher={"HttpCode": "200-599"}),
        "outside 200-499",
        target_group(Matcher={"HttpCode": "200-499"}),
    ),
    (aws_rules.AccessLogBucket, load_balancer(sse="aws:kms"), "SSE-S3 only", load_balancer()),
    (
        aws_rules.AccessLogBucket,
        load_balancer(prefix="AWSLogs"),
        "must not include AWSLogs",
        load_balancer(),
    ),
    (
        aws_rules.AccessLogBucket,
        load_balancer(grantee={"Service": "delivery.logs.amazonaws.com"}),
        "neither the Region's ELB account",
        load_balancer(grantee={"Service": aws_rules.ELB_LOG_PRINCIPAL}),
    ),
    (
        aws_rules.SecurityGroupText,
        security_group("Tasks of voxtral-realtime: the bridge port, not 8443 → 8080"),
        "characters EC2 refuses",
        security_group("Tasks of voxtral-realtime: the bridge port, not 8443 to 8080"),
    ),
    (
        aws_rules.SecurityGroupText,
        security_group(rule_description="callers’ CIDR"),  # noqa: RUF001 (the quote is the point)
        "characters EC2 refuses",
        security_group(rule_description="callers CIDR"),
    ),
    (
        aws_rules.SecurityGroupText,
        security_group(low=8443, high=8080),
        "exceeds ToPort",
        security_group(low=8080, high=8443),
    ),
    (
        aws_rules.SecurityGroupText,
        security_group(GroupName="sg-bridge"),
        "not allowed",
        security_group(GroupName="bridge"),
    ),
    (aws_rules.VpcEndpointDns, endpoints(hostnames=False), "EnableDnsHostnames", endpoints()),
    (
        aws_rules.VpcEndpointDns,
        endpoints(kind="Gateway", SubnetIds=["s"]),
        "for interface endpoints",
        endpoints(kind="Gateway"),
    ),
    (
        aws_rules.VpcEndpointDns,
        zoned_endpoint("a", "a"),
        "one subnet per Availability Zone",
        zoned_endpoint("a", "b"),
    ),
    (
        aws_rules.OneEndpointPerServiceInAVpc,
        twice(),
        "has private DNS for this service in the VPC already",
        twice(PrivateDnsEnabled=False),
    ),
    (
        aws_rules.OneEndpointPerServiceInAVpc,
        twice(kind="Gateway"),
        "routes this service on",
        twice(kind="Gateway", RouteTableIds=["other"]),
    ),
    (aws_rules.KeyPolicyKeepsTheKeyManageable, key(window=31), "outside 7-30", key(window=30)),
    (
        aws_rules.KeyPolicyKeepsTheKeyManageable,
        key(
            statements=[
                {
                    "Effect": "Allow",
                    "Action": "kms:Decrypt",
                    "Principal": ROOT_PRINCIPAL,
                    "Resource": "*",
                }
            ]
        ),
        "account root manage",
        key(),
    ),
    (
        aws_rules.KeyPolicyKeepsTheKeyManageable,
        key(
            statements=[
                {
                    "Effect": "Allow",
                    "Principal": ROOT_PRINCIPAL,
                    "Action": "kms:*",
                    "Resource": "*",
                },
                {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"},
            ]
        ),
        "without Principal",
        key(),
    ),
    (
        aws_rules.KeyPolicyKeepsTheKeyManageable,
        key(KeySpec="RSA_2048"),
        "rotation is for symmetric keys",
        key(),
    ),
    (
        aws_rules.BucketPolicyResources,
        bucket_policy({"Fn::GetAtt": ["Other", "Arn"]}),
        "is not bucket Bucket",
        bucket_policy(),
    ),
    (
        aws_rules.BucketPolicyResources,
        bucket_policy(principal=False),
        "needs a Principal",
        bucket_policy(),
    ),
    (aws_rules.DeletedStoresAreEmptiedFirst, stores(emptied=False), "nothing empties it", stores()),
    (
        aws_rules.DeletedStoresAreEmptiedFirst,
        stores(empty_on_delete=False),
        "EmptyOnDelete is not true",
        stores(),
    ),
    (
        aws_rules.DeletedStoresAreEmptiedFirst,
        stores(emptied=False),
        "Bucket is deleted",
        stores(emptied=False, policy="Retain"),
    ),
    (
        aws_rules.SecretValueSource,
        secret(SecretString="x", GenerateSecretString={"PasswordLength": 48}),
        "exclude each other",
        secret(GenerateSecretString={"PasswordLength": 48}),
    ),
    (
        aws_rules.SecretValueSource,
        secret(GenerateSecretString={"PasswordLength": 5000}),
        "outside 1-4096",
        secret(GenerateSecretString={"PasswordLength": 4096}),
    ),
    (
        aws_rules.CodeBuildEnvironment,
        project(kind="ARM_CONTAINER"),
        "needs LINUX_CONTAINER",
        project(),
    ),
    (aws_rules.CodeBuildEnvironment, project(QueuedTimeoutInMinutes=4), "outside 5-480", project()),
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


def test_every_rule_has_a_case_and_states_its_source():
    assert {c[0] for c in CASES} | {aws_rules.LogGroupKeyLetsCloudWatchLogsIn} == set(
        aws_rules.RULES
    )
    ids = [rule.id for rule in _gate.ALL_RULES]
    assert len(ids) == len(set(ids)) and all(i.startswith("E9") and len(i) == 5 for i in ids)
    for rule in _gate.ALL_RULES:
        assert rule.source_url.startswith("https://"), rule.id
        assert len(rule.shortdesc) > 40 and rule.description, rule.id


def test_intrinsic_values_are_not_guessed():
    """A value CloudFormation computes is unknown at synth: the rules skip it rather than guess."""
    tpl = template(
        C=config({"Ref": "InstanceType"}),
        T=(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "MinCapacity": {"Ref": "Low"},
                "MaxCapacity": 1,
                "ServiceNamespace": "sagemaker",
                "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                "ResourceId": {
                    "Fn::Join": ["", ["endpoint/", {"Ref": "Name"}, "/variant/AllTraffic"]]
                },
            },
        ),
    )
    assert _gate.template_findings({"Probe": tpl}) == []


LOGS_STATEMENT = {
    "Effect": "Allow",
    "Principal": {"Service": "logs.us-east-1.amazonaws.com"},
    "Resource": "*",
    "Action": [
        "kms:Decrypt*",
        "kms:Describe*",
        "kms:Encrypt*",
        "kms:GenerateDataKey*",
        "kms:ReEncrypt*",
    ],
    "Condition": {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": [
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":logs:us-east-1:",
                            {"Ref": "AWS::AccountId"},
                            ":log-group:/aws/sagemaker/Endpoints/*",
                        ],
                    ]
                },
                "arn:aws:logs:us-east-1:123456789012:log-group:RealtimeVoice-*",
            ]
        }
    },
}


def keyed_app(
    statement: dict | None, name: str | None = "/aws/sagemaker/Endpoints/voxtral-realtime"
) -> dict:
    """A Foundation stack exporting its key, and an endpoint stack whose log group imports it."""
    owner = [{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*", "Resource": "*"}]
    foundation = key(statements=owner + ([statement] if statement else []))
    foundation["Outputs"] = {
        "KeyArn": {
            "Value": {"Fn::GetAtt": ["Key", "Arn"]},
            "Export": {"Name": "RealtimeVoice-Foundation:KeyArn"},
        }
    }
    group = {"KmsKeyId": {"Fn::ImportValue": "RealtimeVoice-Foundation:KeyArn"}}
    if name:
        group["LogGroupName"] = name
    return {
        "RealtimeVoice-Foundation": foundation,
        "RealtimeVoice-Voxtral": template(Logs=("AWS::Logs::LogGroup", group)),
    }


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        (keyed_app(None), "does not let CloudWatch Logs use it"),
        (
            keyed_app({**LOGS_STATEMENT, "Action": ["kms:Decrypt*", "kms:Encrypt*"]}),
            "does not let CloudWatch Logs use it",
        ),
        (
            keyed_app(LOGS_STATEMENT, name="/ecs/voxtral"),
            "to log groups that '/ecs/voxtral' is not",
        ),
    ],
)
def test_a_log_group_key_must_let_cloudwatch_logs_in_across_stacks(app, expected):
    (line,) = _gate.template_findings(app, rules=(aws_rules.LogGroupKeyLetsCloudWatchLogsIn,))
    assert (
        line.startswith("E9602 RealtimeVoice-Voxtral: Resources/Logs/Properties/KmsKeyId: ")
        and expected in line
    )


@pytest.mark.parametrize("name", ["/aws/sagemaker/Endpoints/voxtral-realtime", None])
def test_a_log_group_the_key_lets_in_passes(name):
    """A named group under /aws/sagemaker/Endpoints/, and one CloudFormation names
    RealtimeVoice-Voxtral-Logs-..."""
    app = keyed_app(LOGS_STATEMENT, name=name)
    assert _gate.template_findings(app, rules=(aws_rules.LogGroupKeyLetsCloudWatchLogsIn,)) == []


def test_a_generated_log_group_name_is_not_guessed_in_a_single_template():
    """cfn-lint reads one template and knows no stack name: a group CloudFormation names is not
    matched against the condition (the gate, reading the app, does match it)."""
    foundation = keyed_app(LOGS_STATEMENT)["RealtimeVoice-Foundation"]
    foundation["Resources"]["Logs"] = {
        "Type": "AWS::Logs::LogGroup",
        "Properties": {"KmsKeyId": {"Fn::GetAtt": ["Key", "Arn"]}},
    }
    assert list(aws_rules.LogGroupKeyLetsCloudWatchLogsIn().findings(foundation)) == []
    other = {"Other-Stack": foundation}
    (line,) = _gate.template_findings(other, rules=(aws_rules.LogGroupKeyLetsCloudWatchLogsIn,))
    assert "'Other-Stack-Logs-*' is not" in line


def test_findings_name_rule_stack_path_and_source():
    (line,) = _gate.template_findings({"RealtimeVoice-Voxtral": template(C=config())})
    assert line.startswith(
        "E9101 RealtimeVoice-Voxtral: Resources/C/Properties/ProductionVariants/0/InstanceType: "
    )
    assert line.endswith(
        "(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html)"
    )


def test_cfn_lint_loads_the_rules_with_append_rules(tmp_path):
    """The same folder .cfnlintrc.yaml appends: cfn-lint finds the broken EndpointConfig
    (in-process, one template)."""
    import cfnlint.api
    from cfnlint.rules import RulesCollection

    rules = RulesCollection()
    rules.create_from_directory(str(RULES_DIR))
    assert {r.id for r in rules} >= {rule.id for rule in _gate.ALL_RULES}
    broken = template(C=config())
    broken["Resources"]["C"]["Properties"]["ProductionVariants"][0]["ModelName"] = "m"
    matches = cfnlint.api.lint(json.dumps(broken), rules=rules, regions=["us-east-1"])
    assert [m.rule.id for m in matches] == ["E9101"], matches
    assert "append_rules: [tools/cfn_rules]" in (ROOT / ".cfnlintrc.yaml").read_text()
