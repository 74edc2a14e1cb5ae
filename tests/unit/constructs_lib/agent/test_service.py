"""The agent's IAM statements for Bedrock and its alarm rules, without synthesizing an app."""

from __future__ import annotations

from aws_cdk import App, Stack

from constructs_lib.agent.service import ALARM_RULE_NAMES, agent_alarm_rules, bedrock_statements


def test_a_model_id_is_granted_in_the_stack_region_and_a_profile_with_its_model_anywhere():
    stack = Stack(App(), "S", env={"region": "us-east-1", "account": "123456789012"})
    (plain,) = bedrock_statements(stack, "amazon.nova-lite-v1:0")
    assert stack.resolve(plain.to_statement_json())["Resource"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0",
            ],
        ]
    }
    profile, model = bedrock_statements(stack, "us.amazon.nova-lite-v1:0")
    assert stack.resolve(profile.to_statement_json())["Resource"]["Fn::Join"][1][-1] == (
        ":bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0"
    )
    assert stack.resolve(model.to_statement_json())["Resource"]["Fn::Join"][1][-1] == (
        ":bedrock:*::foundation-model/amazon.nova-lite-v1:0"
    )
    assert model.to_statement_json()["Action"] == "bedrock:InvokeModelWithResponseStream"


def test_alarm_rules_name_their_metrics_and_thresholds():
    rules = {rule.name: rule for rule in agent_alarm_rules("Prefix", 1200.0)}
    assert tuple(rules) == ALARM_RULE_NAMES
    assert (
        rules["voice-to-voice-p95"].threshold,
        rules["voice-to-voice-p95"].evaluation_periods,
    ) == (1200.0, 5)
    assert (
        rules["llm-errors"].metric.metric_name == "LlmErrors" and rules["llm-errors"].threshold == 0
    )
