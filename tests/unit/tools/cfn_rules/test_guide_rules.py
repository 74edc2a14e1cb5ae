"""The developer guides' rules (tests/tools/cfn_rules/guide_rules.py): each fails on a template written to break
it and holds on the same template mended."""

from __future__ import annotations

import pytest

from tests.tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

import guide_rules as gr  # noqa: E402


def endpoint(kind: str, value, count=1) -> dict:
    return {"Resources": {
        "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {
            "ProductionVariants": [{"VariantName": "v", "InitialInstanceCount": count}]}},
        "Endpoint": {"Type": "AWS::SageMaker::Endpoint", "Properties": {
            "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            "DeploymentConfig": {"RollingUpdatePolicy": {"MaximumBatchSize": {"Type": kind, "Value": value},
                                                         "WaitIntervalInSeconds": 600}}}}}}


def found(tpl) -> list[str]:
    return [message for _, message in gr.RollingUpdateBatchSize().findings(tpl)]


@pytest.mark.parametrize("kind, value, count", [("INSTANCE_COUNT", 1, 1), ("CAPACITY_PERCENT", 25, 4),
                                                ("CAPACITY_PERCENT", 50, 2)])
def test_a_batch_of_at_least_one_instance_holds(kind, value, count):
    assert found(endpoint(kind, value, count)) == []


def test_a_percent_below_one_instance_asks_for_an_instance_count():
    assert found(endpoint("CAPACITY_PERCENT", 25, 1)) == [
        "25 % of 1 instance(s) is less than one instance (rounding unconfirmed): use INSTANCE_COUNT 1"]


def test_a_percent_outside_5_to_50_and_a_count_below_1_fail():
    assert found(endpoint("CAPACITY_PERCENT", 60, 4)) == ["60 % is outside 5-50 %"]
    assert found(endpoint("INSTANCE_COUNT", 0)) == ["a batch of 0 is below the minimum 1"]
