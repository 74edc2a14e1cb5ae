"""The agent's IAM statements for Bedrock, without synthesizing an app (its alarm rules:
test_monitoring.py)."""

from __future__ import annotations

from aws_cdk import App, Stack

from constructs_lib.agent.service import bedrock_statements


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
