"""MonitoredEndpoint (endpoint, alarms, autoscaling and outputs), and the parts the endpoint stacks use besides it:
SageMakerExecutionRole, AlarmTopic, BridgeImage, each in a bare stack, bad props included."""

from __future__ import annotations

import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from constructs_lib.artifacts.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.sagemaker_endpoint.execution_role import SageMakerExecutionRole
from constructs_lib.sagemaker_endpoint.monitored_endpoint import MonitoredEndpoint, MonitoredEndpointProps
from constructs_lib.monitoring.topic import AlarmTopic, AlarmTopicProps
from constructs_lib.sagemaker_endpoint.scaling_props import INVOCATIONS_PER_INSTANCE, InstanceScaling, TargetTracking
from constructs_lib.validation import PropsError
from tests.constructs.conftest import ACCOUNT, bare_stack, endpoint_props, only, resources, statements

SCALING = InstanceScaling(1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE))


def test_monitored_endpoint_has_alarms_autoscaling_and_prefixed_outputs():
    stack = bare_stack()
    composite = MonitoredEndpoint(stack, "Speech", MonitoredEndpointProps(
        name="Asr", endpoint=endpoint_props(endpoint_name="asr"), scaling=SCALING,
        outputs={"Extra": ("value", "An extra output")}))
    template = Template.from_stack(stack).to_json()
    assert sorted(template["Outputs"]) == ["AsrEndpointName", "AsrExtra", "AsrInvokePolicyArn", "AsrLogGroupName",
                                           "AsrRegion"]
    assert template["Outputs"]["AsrExtra"] == {"Description": "An extra output", "Value": "value"}
    assert len(resources(stack, "AWS::CloudWatch::Alarm")) == 10  # no rollback percent: no rate alarm
    _, target = only(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 3)
    assert only(stack, "AWS::SageMaker::Endpoint")[1]["Properties"]["RetainAllVariantProperties"] is True
    # Parts side by side under the composite.
    assert [child.node.id for child in composite.node.children] == ["Asr", "Alarms", "Autoscaling"]
    assert composite.scaling is composite.endpoint.scalable_instance_count


def test_a_fixed_size_has_no_scalable_target_and_resets_the_count_on_update():
    stack = bare_stack()
    MonitoredEndpoint(stack, "Speech", MonitoredEndpointProps(
        name="Asr", endpoint=endpoint_props(variant=ProductionVariant("ml.g6.4xlarge", initial_instance_count=2)),
        scaling=InstanceScaling(2, 2)))
    assert resources(stack, "AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert only(stack, "AWS::SageMaker::Endpoint")[1]["Properties"]["RetainAllVariantProperties"] is False


def test_the_id_default_keeps_the_logical_ids_of_an_endpoint_built_at_the_stack_root():
    """What the app's stacks rely on: under a MonitoredEndpoint with the id "Default", the resources have the logical
    ids they had when the stack built the endpoint, its alarms and its scaling itself (CDK leaves "Default" out)."""
    direct = bare_stack()
    RealtimeEndpoint(direct, "Asr", endpoint_props(endpoint_name="asr"))
    grouped = bare_stack()
    MonitoredEndpoint(grouped, "Default", MonitoredEndpointProps(name="Asr", endpoint=endpoint_props(endpoint_name="asr"),
                                                                 scaling=SCALING))
    direct_ids = set(Template.from_stack(direct).to_json()["Resources"])
    grouped_ids = set(Template.from_stack(grouped).to_json()["Resources"])
    assert direct_ids < grouped_ids
    assert {"AutoscalingTarget3C959F55", "AlarmsEndpointHealthC6A4D23B"} <= grouped_ids  # the app's deployed ids


def test_monitored_endpoint_checks_its_scaling_before_building_anything():
    stack = bare_stack()
    with pytest.raises(PropsError) as caught:
        MonitoredEndpoint(stack, "Speech", MonitoredEndpointProps(
            name="Asr", endpoint=endpoint_props(), scaling=InstanceScaling(2, 1)))
    assert caught.value.problems == ["max_capacity=1: must be at least min_capacity=2"]
    with pytest.raises(PropsError, match=r"tracking=null: must be a TargetTracking while min_capacity < max_capacity"):
        MonitoredEndpoint(stack, "Speech", MonitoredEndpointProps(
            name="Asr", endpoint=endpoint_props(), scaling=InstanceScaling(1, 2)))
    assert stack.node.try_find_child("Speech") is None


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


def test_alarm_topic_defaults_and_a_bad_address():
    plain = bare_stack()
    AlarmTopic(plain, "Topic")
    _, topic = only(plain, "AWS::SNS::Topic")
    assert topic["Properties"]["DisplayName"] == "Test alarms"
    assert resources(plain, "AWS::SNS::Subscription") == {}
    stack = bare_stack()
    with pytest.raises(PropsError, match=r"email='oncall': must be one e-mail address such as 'oncall@example.com'"):
        AlarmTopic(stack, "Bad", AlarmTopicProps(email="oncall"))
    AlarmTopic(stack, "Mailed", AlarmTopicProps(email="oncall@example.com"))
    (subscription,) = resources(stack, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"


def test_bridge_image_needs_a_build_context_or_an_image_in_the_stack_region(tmp_path):
    stack = bare_stack()
    with pytest.raises(PropsError, match="container_dir or prebuilt_image_uri: give one"):
        BridgeImage(stack, "None", BridgeImageProps())
    with pytest.raises(PropsError, match=r"container_dir='.*': must be a folder with a Dockerfile"):
        BridgeImage(stack, "Empty", BridgeImageProps(container_dir=tmp_path))
    with pytest.raises(PropsError, match="the image is in eu-west-1 but the stack deploys to us-east-1"):
        BridgeImage(stack, "Elsewhere", BridgeImageProps(
            prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"))
    image = BridgeImage(stack, "Prebuilt", BridgeImageProps(
        prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1"))
    assert (image.image_uri, image.copy, image.tag) == (f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1", None, None)


def test_the_dashboard_checks_its_name_and_each_endpoint():
    from constructs_lib.monitoring.dashboard import DashboardEndpoint, OperationsDashboard, OperationsDashboardProps
    from constructs_lib.monitoring.thresholds import EndpointAlarmThresholds

    with pytest.raises(PropsError) as caught:
        OperationsDashboard(bare_stack(), "Dashboard", OperationsDashboardProps(dashboard_name="ops board", endpoints=[
            DashboardEndpoint("Speech", "asr", "ml.inf2.xlarge", EndpointAlarmThresholds(disk_percent=0))]))
    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "dashboard_name='ops board'", "instance_type='ml.inf2.xlarge'", "disk_percent=0"]
    stack = bare_stack()
    OperationsDashboard(stack, "Dashboard", OperationsDashboardProps(dashboard_name="ops-us-east-1", endpoints=[
        DashboardEndpoint("Speech", "asr", "ml.g6.4xlarge", min_capacity=1, max_capacity=4)]))
    _, dashboard = only(stack, "AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "ops-us-east-1"
    assert "## Speech: `asr`" in str(dashboard["Properties"]["DashboardBody"])
