"""MonitoredEndpoint (endpoint, alarms, autoscaling and outputs) in a bare stack, bad props
included."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.monitored_endpoint import (
    MonitoredEndpoint,
    MonitoredEndpointProps,
)
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.sagemaker_endpoint.scaling_props import (
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
)
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import bare_stack, endpoint_props, only, resources

SCALING = InstanceScaling(
    1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE)
)


def test_monitored_endpoint_has_alarms_autoscaling_and_prefixed_outputs():
    stack = bare_stack()
    composite = MonitoredEndpoint(
        stack,
        "Speech",
        MonitoredEndpointProps(
            name="Asr",
            endpoint=endpoint_props(endpoint_name="asr"),
            scaling=SCALING,
            outputs={"Extra": ("value", "An extra output")},
        ),
    )
    template = Template.from_stack(stack).to_json()
    assert sorted(template["Outputs"]) == [
        "AsrEndpointName",
        "AsrExtra",
        "AsrInvokePolicyArn",
        "AsrLogGroupName",
        "AsrRegion",
    ]
    assert template["Outputs"]["AsrExtra"] == {"Description": "An extra output", "Value": "value"}
    assert (
        len(resources(stack, "AWS::CloudWatch::Alarm")) == 10
    )  # no rollback percent: no rate alarm
    _, target = only(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 3)
    assert (
        only(stack, "AWS::SageMaker::Endpoint")[1]["Properties"]["RetainAllVariantProperties"]
        is True
    )
    # Parts side by side under the composite.
    assert [child.node.id for child in composite.node.children] == ["Asr", "Alarms", "Autoscaling"]
    assert composite.scaling is composite.endpoint.scalable_instance_count


def test_a_fixed_size_has_no_scalable_target_and_resets_the_count_on_update():
    stack = bare_stack()
    MonitoredEndpoint(
        stack,
        "Speech",
        MonitoredEndpointProps(
            name="Asr",
            endpoint=endpoint_props(
                variant=ProductionVariant("ml.g6.4xlarge", initial_instance_count=2)
            ),
            scaling=InstanceScaling(2, 2),
        ),
    )
    assert resources(stack, "AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert (
        only(stack, "AWS::SageMaker::Endpoint")[1]["Properties"]["RetainAllVariantProperties"]
        is False
    )


def test_the_id_default_keeps_the_logical_ids_of_an_endpoint_built_at_the_stack_root():
    """What the app's stacks rely on: under a MonitoredEndpoint with the id "Default", the resources
    have the logical ids they had when the stack built the endpoint, its alarms and its scaling
    itself (CDK leaves "Default" out)."""
    direct = bare_stack()
    RealtimeEndpoint(direct, "Asr", endpoint_props(endpoint_name="asr"))
    grouped = bare_stack()
    MonitoredEndpoint(
        grouped,
        "Default",
        MonitoredEndpointProps(
            name="Asr", endpoint=endpoint_props(endpoint_name="asr"), scaling=SCALING
        ),
    )
    direct_ids = set(Template.from_stack(direct).to_json()["Resources"])
    grouped_ids = set(Template.from_stack(grouped).to_json()["Resources"])
    assert direct_ids < grouped_ids
    assert {
        "AutoscalingTarget3C959F55",
        "AlarmsEndpointHealthC6A4D23B",
    } <= grouped_ids  # the app's deployed ids


def test_monitored_endpoint_checks_its_scaling_before_building_anything():
    stack = bare_stack()
    with pytest.raises(PropsError) as caught:
        MonitoredEndpoint(
            stack,
            "Speech",
            MonitoredEndpointProps(
                name="Asr", endpoint=endpoint_props(), scaling=InstanceScaling(2, 1)
            ),
        )
    assert caught.value.problems == ["max_capacity=1: must be at least min_capacity=2"]
    with pytest.raises(
        PropsError,
        match=r"tracking=null: must be a TargetTracking while min_capacity < max_capacity",
    ):
        MonitoredEndpoint(
            stack,
            "Speech",
            MonitoredEndpointProps(
                name="Asr", endpoint=endpoint_props(), scaling=InstanceScaling(1, 2)
            ),
        )
    assert stack.node.try_find_child("Speech") is None
