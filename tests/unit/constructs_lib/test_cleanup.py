"""constructs_lib/cleanup.py: a cleanup handler's function in a bare stack: its own role (the
statements given plus writing its own log group), its log group, outside any VPC, and the reasons
for the custom-resource findings."""

from __future__ import annotations

from aws_cdk import Duration, aws_iam as iam

from constructs_lib.cleanup import CLEANUP_HANDLERS_DIR, cleanup_function
from tests.unit.constructs_lib.construct_kit import bare_stack, only


def build():
    stack = bare_stack()
    statement = iam.PolicyStatement(
        sid="Release", actions=["autoscaling:SetInstanceProtection"], resources=["*"]
    )
    function, role = cleanup_function(
        stack,
        "Release",
        handler="instance_protection.handler",
        statements=[statement],
        description="d" * 2000,
        timeout=Duration.minutes(5),
        key=None,
        log_retention_days=7,
    )
    return stack, function, role


def test_the_function_runs_its_handler_outside_any_vpc_with_its_own_log_group():
    stack, _function, _ = build()
    _, resource = only(stack, "AWS::Lambda::Function")
    properties = resource["Properties"]
    assert (
        properties["Handler"],
        properties["Runtime"],
        properties["Timeout"],
        properties["MemorySize"],
    ) == ("instance_protection.handler", "python3.14", 300, 128)
    assert "VpcConfig" not in properties and len(properties["Description"]) == 256
    log_id, log_group = only(stack, "AWS::Logs::LogGroup")
    assert (
        log_group["Properties"]["RetentionInDays"] == 7 and log_group["DeletionPolicy"] == "Delete"
    )
    assert properties["LoggingConfig"] == {"LogGroup": {"Ref": log_id}}
    assert {entry["id"] for entry in resource["Metadata"]["checkov"]["skip"]} == {
        "CKV_AWS_115",
        "CKV_AWS_116",
        "CKV_AWS_117",
    }
    assert (CLEANUP_HANDLERS_DIR / "instance_protection.py").is_file()


def test_the_role_holds_the_statements_given_and_writing_its_own_log_group_only():
    stack, _, _ = build()
    log_id, _ = only(stack, "AWS::Logs::LogGroup")
    _, role = only(stack, "AWS::IAM::Role")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"
    }
    assert (
        "ManagedPolicyArns" not in role["Properties"]
        and len(role["Properties"]["Description"]) == 1000
    )
    _, policy = only(stack, "AWS::IAM::Policy")
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Sid": "Release",
            "Action": "autoscaling:SetInstanceProtection",
            "Effect": "Allow",
            "Resource": "*",
        },
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_id, "Arn"]},
        },
    ]
