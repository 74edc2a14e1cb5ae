"""AlarmTopic in a bare stack: its defaults and a bad address."""

from __future__ import annotations

import pytest

from constructs_lib.monitoring.topic import AlarmTopic, AlarmTopicProps
from constructs_lib.sagemaker_endpoint.scaling_props import (
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
)
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import bare_stack, only, resources

SCALING = InstanceScaling(
    1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE)
)


def test_alarm_topic_defaults_and_a_bad_address():
    plain = bare_stack()
    AlarmTopic(plain, "Topic")
    _, topic = only(plain, "AWS::SNS::Topic")
    assert topic["Properties"]["DisplayName"] == "Test alarms"
    assert resources(plain, "AWS::SNS::Subscription") == {}
    stack = bare_stack()
    with pytest.raises(
        PropsError, match=r"email='oncall': must be one e-mail address such as 'oncall@example.com'"
    ):
        AlarmTopic(stack, "Bad", AlarmTopicProps(email="oncall"))
    AlarmTopic(stack, "Mailed", AlarmTopicProps(email="oncall@example.com"))
    (subscription,) = resources(stack, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"
