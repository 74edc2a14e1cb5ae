"""The API model check (tools/cfn_rules/api_models.py): properties against botocore's input
shapes."""

from __future__ import annotations

import botocore.session
import pytest

from tools.cfn_rules import _gate  # noqa: F401  (puts the rules folder on sys.path)

# isort: split

import api_models


def check(resource_type: str, props: dict) -> list[str]:
    return [
        f"{'/'.join(map(str, path))}: {message}"
        for path, message in api_models.check_resource(resource_type, props, ())
    ]


VARIANT = {
    "VariantName": "AllTraffic",
    "ModelName": "m",
    "InitialInstanceCount": 1,
    "InstanceType": "ml.g6.4xlarge",
}


@pytest.mark.parametrize(
    ("resource_type", "props", "expected"),
    [
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [{**VARIANT, "ModelNmae": "m"}]},
            "ProductionVariants/0/ModelNmae: ProductionVariant has no member 'ModelNmae'",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [VARIANT], "KmsKeyID2": "k"},
            "KmsKeyID2: CreateEndpointConfig has no member 'KmsKeyID2'",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [{**VARIANT, "InstanceType": "ml.g6.5xlarge"}]},
            "'ml.g6.5xlarge' is not one of ProductionVariantInstanceType's values",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [{**VARIANT, "VariantName": "All Traffic"}]},
            "'All Traffic' does not match VariantName's pattern",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [{**VARIANT, "ModelDataDownloadTimeoutInSeconds": 4000}]},
            "4000 is above the maximum 3600",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": []},
            "0 items, fewer than the minimum 1",
        ),
        (
            "AWS::SageMaker::EndpointConfig",
            {"ProductionVariants": [{**VARIANT, "InitialInstanceCount": "one"}]},
            "expected an integer",
        ),
        ("AWS::SageMaker::Model", {"EnableNetworkIsolation": "yes"}, "expected a boolean"),
        (
            "AWS::SageMaker::Model",
            {"PrimaryContainer": {"Environment": {"K": "x" * 1025}}},
            "1025 characters, more than",
        ),
        (
            "AWS::SageMaker::Model",
            {
                "VpcConfig": {
                    "Subnets": [f"subnet-{i}" for i in range(17)],
                    "SecurityGroupIds": ["sg-1"],
                }
            },
            "17 items, more than the maximum 16",
        ),
        (
            "AWS::SageMaker::Endpoint",
            {"EndpointName": "voxtral_realtime"},
            "does not match EndpointName's pattern",
        ),
        (
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {"ScalableDimension": "sagemaker:variant:Count"},
            "is not one of ScalableDimension's values",
        ),
        (
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {"Tags": [{"Key": "k" * 129, "Value": "v"}]},
            "Tags/" + "k" * 129 + ": 129 characters, more than the maximum 128",
        ),
        (
            "AWS::ApplicationAutoScaling::ScalingPolicy",
            {"PolicyType": "TargetTracking"},
            "is not one of PolicyType's",
        ),
        (
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ScheduledActions": [
                    {"ScheduledActionName": "night", "Shedule": "cron(0 0 * * ? *)"}
                ]
            },
            "ScheduledActions/0/Shedule: PutScheduledActionRequest has no member 'Shedule'",
        ),
        (
            "AWS::CloudWatch::Alarm",
            {"ComparisonOperator": "GreaterThan"},
            "is not one of ComparisonOperator's",
        ),
        (
            "AWS::CloudWatch::Alarm",
            {"TreatMissingData": "nothing", "EvaluationPeriods": 0},
            "0 is below the minimum 1",
        ),
        (
            "AWS::ECS::TaskDefinition",
            {"ContainerDefinitions": [{"Name": "c", "PortMappings": [{"Protocol": "TCP"}]}]},
            "'TCP' is not one of TransportProtocol's values",
        ),
        (
            "AWS::ECS::TaskDefinition",
            {"NetworkMode": "vpc"},
            "'vpc' is not one of NetworkMode's values",
        ),
        (
            "AWS::ECS::Service",
            {"PlacementStrategies": [{"Type": "pack"}]},
            "'pack' is not one of PlacementStrategyType",
        ),
        (
            "AWS::ECS::Cluster",
            {"ClusterSettings": [{"Name": "containerInsight", "Value": "enabled"}]},
            "'containerInsight' is not one of ClusterSettingName's values",
        ),
        (
            "AWS::ECS::CapacityProvider",
            {
                "AutoScalingGroupProvider": {
                    "AutoScalingGroupArn": "a",
                    "ManagedTerminationProtection": "ON",
                }
            },
            "'ON' is not one of ManagedTerminationProtection's values",
        ),
    ],
)
def test_a_value_the_api_refuses_is_a_finding(resource_type, props, expected):
    found = check(resource_type, props)
    assert any(expected in f for f in found), found


def test_values_the_api_takes_pass():
    assert (
        check(
            "AWS::SageMaker::EndpointConfig",
            {
                "ProductionVariants": [
                    {**VARIANT, "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}
                ],
                "Tags": [{"Key": "project", "Value": "sagemaker-realtime-voice"}],
            },
        )
        == []
    )
    # ECS's API is camelCase; CloudFormation's names match ignoring case; ClusterSettings is
    # settings.
    assert (
        check(
            "AWS::ECS::Cluster",
            {"ClusterSettings": [{"Name": "containerInsights", "Value": "enhanced"}]},
        )
        == []
    )
    breaker = {"DeploymentCircuitBreaker": {"Enable": True, "Rollback": True}}
    assert (
        check(
            "AWS::ECS::Service",
            {
                "PlacementStrategies": [{"Type": "spread", "Field": "instanceId"}],
                "DeploymentConfiguration": breaker,
            },
        )
        == []
    )
    # CloudFormation's Tags list becomes Application Auto Scaling's tag map.
    assert (
        check(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {"Tags": [{"Key": "project", "Value": "x"}]},
        )
        == []
    )
    # Members of UpdateEndpoint and CloudFormation-only properties.
    assert (
        check(
            "AWS::SageMaker::Endpoint",
            {"EndpointName": "voxtral-realtime", "RetainAllVariantProperties": True},
        )
        == []
    )
    assert (
        check("AWS::ApplicationAutoScaling::ScalingPolicy", {"ScalingTargetId": {"Ref": "T"}}) == []
    )
    # CloudFormation sends numbers in string members as text.
    assert check("AWS::ECS::TaskDefinition", {"Cpu": 1024, "Memory": "2048"}) == []


def test_intrinsic_values_are_skipped_but_their_neighbours_are_checked():
    props = {
        "ProductionVariants": [
            {
                **VARIANT,
                "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                "InstanceType": {"Ref": "Type"},
                "VariantName": "a b",
            }
        ],
        "KmsKeyId": {"Fn::ImportValue": "Key"},
    }
    found = check("AWS::SageMaker::EndpointConfig", props)
    assert [f.split(":")[0] for f in found] == ["ProductionVariants/0/VariantName"]


def test_every_mapping_names_a_real_operation_and_member():
    session = botocore.session.get_session()
    for resource_type, (service, operation) in api_models.OPERATIONS.items():
        assert (
            session.get_service_model(service).operation_model(operation).input_shape is not None
        ), resource_type
    for (resource_type, prop), (operation, how) in api_models.OTHER_OPERATIONS.items():
        service = api_models.OPERATIONS[resource_type][0]
        shape = session.get_service_model(service).operation_model(operation).input_shape
        assert how == "items" or prop.lower() in {m.lower() for m in shape.members}, (
            resource_type,
            prop,
        )
    for (owner, _prop), member in api_models.RENAMES.items():
        resource_type = owner if owner in api_models.OPERATIONS else "AWS::ECS::Cluster"
        service, operation = api_models.OPERATIONS[resource_type]
        assert (
            member
            in session.get_service_model(service).operation_model(operation).input_shape.members
        )


def test_every_pattern_of_the_checked_services_compiles():
    """A pattern the check could not compile would be a check that cannot fail."""
    session = botocore.session.get_session()
    count = 0
    for service in {s for s, _ in api_models.OPERATIONS.values()}:
        model = session.get_service_model(service)
        for name in model.shape_names:
            pattern = model.shape_for(name).metadata.get("pattern")
            if pattern:
                api_models._pattern(pattern)
                count += 1
    assert count > 100
