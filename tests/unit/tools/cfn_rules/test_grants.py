"""What the required grants share (tools/cfn_rules/_grants.py): whether statements allow an action
on a resource, the statements of a role and of a key policy, and the keys and roles a value names
across the app's stacks. The rules built on them are tested in test_grants_<family>.py."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.grants_kit import KEY_REF, ROLE_ARN, ROOT, allow, res, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import _grants

QUEUE_ARN = {"Fn::GetAtt": ["Queue", "Arn"]}


@pytest.mark.parametrize(
    ("statement", "action", "expected"),
    [
        (allow("ec2:*"), "ec2:CreateNetworkInterface", True),
        (allow("EC2:createnetworkinterface"), "ec2:CreateNetworkInterface", True),  # any case
        (allow("ec2:Describe*"), "ec2:CreateNetworkInterface", False),
        ({**allow("ec2:*"), "Effect": "Deny"}, "ec2:CreateNetworkInterface", False),
        ({"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}, "kms:Decrypt", True),
    ],
)
def test_an_allow_statement_grants_the_actions_its_patterns_match(statement, action, expected):
    assert _grants.allows([statement], action) is expected


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("*", True),
        (QUEUE_ARN, True),  # as written
        ({"Fn::Join": ["", [QUEUE_ARN, "/*"]]}, True),  # names the same logical id
        ({"Fn::GetAtt": ["Other", "Arn"]}, False),
        ("arn:aws:sqs:us-east-1:123456789012:other", False),
    ],
)
def test_a_grant_on_a_resource_counts_for_that_resource_only(resource, expected):
    statements = [allow("sqs:SendMessage", resource=resource)]
    assert _grants.allows(statements, "sqs:SendMessage", QUEUE_ARN) is expected
    assert _grants.allows(statements, "sqs:SendMessage") is True  # no resource asked


def test_an_arn_pattern_covers_the_arns_it_matches():
    pattern = "arn:aws:kinesisvideo:us-east-1:1:stream/voice*/*"
    assert _grants.covers([pattern], "arn:aws:kinesisvideo:us-east-1:1:stream/voice-a/1")
    assert not _grants.covers([pattern], "arn:aws:kinesisvideo:us-east-1:1:stream/other/1")


def test_a_role_holds_its_inline_attached_and_aws_managed_policies():
    inline = allow("s3:GetObject")
    attached = allow("sqs:SendMessage")
    managed = allow("kms:Decrypt")
    tpl = template(
        Role=res(
            "AWS::IAM::Role",
            Policies=[{"PolicyName": "p", "PolicyDocument": {"Statement": [inline]}}],
            ManagedPolicyArns=[
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                        ],
                    ]
                }
            ],
        ),
        Policy=res(
            "AWS::IAM::Policy", Roles=[{"Ref": "Role"}], PolicyDocument={"Statement": [attached]}
        ),
        Managed=res(
            "AWS::IAM::ManagedPolicy",
            Roles=[{"Ref": "Role"}],
            PolicyDocument={"Statement": [managed]},
        ),
        Elsewhere=res(
            "AWS::IAM::Policy", Roles=[{"Ref": "Other"}], PolicyDocument={"Statement": [allow("*")]}
        ),
    )
    assert _grants.role_statements(tpl, "Role") == [
        inline,
        attached,
        managed,
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        },
    ]
    assert _grants.role_statements(tpl, "Missing") == []


def test_the_statements_of_a_key_and_those_for_a_service():
    events = allow("kms:Decrypt", Principal={"Service": "events.amazonaws.com"})
    joined = allow(
        "kms:Decrypt",
        Principal={"Service": {"Fn::Join": ["", ["logs.", "us-east-1", ".amazonaws.com"]]}},
    )
    owner = allow("kms:*", Principal=ROOT)
    app = {
        "Foundation": template(
            Key=res("AWS::KMS::Key", KeyPolicy={"Statement": [owner, events, joined]})
        )
    }
    statements = _grants.key_statements(app, ("Foundation", "Key"))
    assert statements == [owner, events, joined]
    assert _grants.service_statements(statements, "events.amazonaws.com") == [events]
    assert _grants.service_statements(statements, "logs.us-east-1.amazonaws.com") == [joined]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (allow("kms:*", Principal=ROOT), True),
        (allow("*", Principal=ROOT), True),
        (allow("kms:Decrypt", Principal=ROOT), False),
        (allow("kms:*", Principal={"AWS": "arn:aws:iam::123456789012:role/r"}), False),
        ({**allow("kms:*", Principal=ROOT), "Effect": "Deny"}, False),
    ],
)
def test_a_key_policy_delegates_to_iam_when_the_account_root_may_do_everything(statement, expected):
    assert _grants.account_root_manages([statement]) is expected


def test_a_key_or_role_is_found_across_the_stacks_and_one_given_by_arn_is_not():
    foundation = template(
        Key=res("AWS::KMS::Key", KeyPolicy={}),
        Role=res("AWS::IAM::Role", AssumeRolePolicyDocument={}),
    )
    foundation["Outputs"] = {
        "KeyArn": {"Value": KEY_REF, "Export": {"Name": "Foundation:KeyArn"}},
        "RoleArn": {"Value": ROLE_ARN, "Export": {"Name": "Foundation:RoleArn"}},
    }
    app = {"Foundation": foundation, "Voxtral": template()}
    assert _grants.key_of(app, "Foundation", KEY_REF) == ("Foundation", "Key")
    assert _grants.key_of(app, "Voxtral", {"Fn::ImportValue": "Foundation:KeyArn"}) == (
        "Foundation",
        "Key",
    )
    assert _grants.role_of(app, "Voxtral", {"Fn::ImportValue": "Foundation:RoleArn"}) == (
        "Foundation",
        "Role",
    )
    assert _grants.key_of(app, "Foundation", ROLE_ARN) is None  # a role, not a key
    assert _grants.role_of(app, "Foundation", KEY_REF) is None
    assert _grants.key_of(app, "Voxtral", "arn:aws:kms:us-east-1:123456789012:key/k") is None


def test_an_app_rule_over_one_template_reads_it_as_an_app_of_one_stack():
    class Stacks(_grants.AppRule):
        def app_findings(self, templates):
            for stack in templates:
                yield stack, ("Resources",), f"read {stack}"

    assert list(Stacks().findings(template())) == [(("Resources",), "read Template")]
