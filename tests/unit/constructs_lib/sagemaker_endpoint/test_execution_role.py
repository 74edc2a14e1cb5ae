"""SageMakerExecutionRole in a bare stack: it starts empty and takes grants."""

from __future__ import annotations

from aws_cdk import aws_s3 as s3

from constructs_lib.artifacts.bridge_image import BridgeImage
from constructs_lib.monitoring.topic import AlarmTopic
from constructs_lib.sagemaker_endpoint.execution_role import SageMakerExecutionRole
from constructs_lib.sagemaker_endpoint.monitored_endpoint import MonitoredEndpoint
from constructs_lib.sagemaker_endpoint.scaling_props import INVOCATIONS_PER_INSTANCE, InstanceScaling, TargetTracking
from tests.unit.constructs_lib.construct_kit import bare_stack, only, resources, statements


SCALING = InstanceScaling(1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE))


def test_the_execution_role_starts_empty_and_is_grantable():
    empty = bare_stack()
    SageMakerExecutionRole(empty, "ExecutionRole")
    assert resources(empty, "AWS::IAM::Policy") == {}
    stack = bare_stack()
    role = SageMakerExecutionRole(stack, "ExecutionRole", description="Runs the model")
    s3.Bucket(stack, "Data").grant_read(role)  # an IGrantable: other constructs' grants land on the role
    role.grant_metrics("/aws/sagemaker/Endpoints", "Team/Bridge")
    by_sid = statements(stack)
    assert by_sid["PutMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "Team/Bridge"]}}
    assert any("s3:GetObject*" in s["Action"] for s in by_sid.values() if isinstance(s["Action"], list))
    _, resource = only(stack, "AWS::IAM::Role")
    assert resource["Properties"]["Description"] == "Runs the model"
    assert "ManagedPolicyArns" not in resource["Properties"]
    assert stack.resolve(role.role_arn) == {"Fn::GetAtt": [only(stack, "AWS::IAM::Role")[0], "Arn"]}
