"""The IAM check (tools/cfn_rules/iam_actions.py): statements against the Service
Authorization Reference."""

from __future__ import annotations

import json

import pytest

from tools.cfn_rules import _gate  # noqa: F401  (puts the rules folder on sys.path)

# isort: split

import iam_actions

ROLE = "arn:aws:iam::123456789012:role/r"


def check(statement: dict) -> list[str]:
    return [message for _, message in iam_actions.statement_findings(statement, ())]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            {"Effect": "Allow", "Action": "s3:GetObjcet", "Resource": "*"},
            "s3:GetObjcet is not an action",
        ),
        (
            {"Effect": "Allow", "Action": "sagemakr:InvokeEndpoint", "Resource": "*"},
            "sagemakr:InvokeEndpoint is not",
        ),
        (
            {"Effect": "Allow", "Action": "kms:Decrpyt*", "Resource": "*"},
            "kms:Decrpyt* is not an action",
        ),
        (
            {
                "Effect": "Allow",
                "Action": "ecr:GetAuthorizationToken",
                "Resource": "arn:aws:ecr:us-east-1:1:repository/r",
            },
            "ecr:GetAuthorizationToken has no resource-level permissions",
        ),
        (
            {
                "Effect": "Allow",
                "Action": "ec2:DescribeTags",
                "Resource": "arn:aws:ec2:us-east-1:1:instance/*",
            },
            "ec2:DescribeTags has no resource-level permissions",
        ),
        (
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": "arn:aws:s3:::b",
                "Condition": {"StringLike": {"s3:prefixes": "models/"}},
            },
            "s3:prefixes is not a condition key of s3",
        ),
        (
            {
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::b/*",
                "Condition": {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}},
            },
            "belongs to kms",
        ),
        (
            {
                "Effect": "Deny",
                "Action": "s3:*",
                "Resource": "*",
                "Condition": {"StringNotEquals": {"aws:SourceVPCEndpoint": "vpce-1"}},
            },
            "aws:SourceVPCEndpoint is not a global",
        ),
    ],
)
def test_a_statement_that_grants_nothing_or_misnames_is_a_finding(statement, expected):
    found = check(statement)
    assert any(expected in f for f in found), found


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:List*"], "Resource": "arn:aws:s3:::b/*"},
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "RealtimeVoice/Bridge"}},
        },
        {
            "Effect": "Allow",
            "Action": "kms:Decrypt",
            "Resource": "*",
            "Condition": {
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": "arn:aws:logs:us-east-1:1:log-group:x"
                }
            },
        },
        {
            "Effect": "Deny",
            "Action": "s3:*",
            "Principal": {"AWS": "*"},
            "Resource": "arn:aws:s3:::b",
            "Condition": {
                "Bool": {"aws:SecureTransport": "false"},
                "StringNotEquals": {"aws:SourceVpce": "vpce-1"},
            },
        },
        {
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
        },
        {
            "Effect": "Allow",
            "Action": "sagemaker:InvokeEndpointWithBidirectionalStream",
            "Resource": "arn:aws:sagemaker:us-east-1:1:endpoint/voxtral-realtime",
        },
        {
            "Effect": "Allow",
            "Action": {"Fn::If": ["C", "s3:GetObject", "s3:PutObject"]},
            "Resource": "*",
        },
    ],
)
def test_statements_iam_honours_pass(statement):
    assert check(statement) == []


def test_every_policy_of_a_template_is_read():
    """Role inline and trust policies, managed policies, key, bucket (as a JSON string too) and
    repository policies, Lambda permissions: a bad action in each is found."""
    bad = {"Effect": "Allow", "Action": "s3:GetObjcet", "Resource": "*", "Principal": {"AWS": ROLE}}
    doc = {"Version": "2012-10-17", "Statement": [bad]}
    template = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": "sts:AssumeRol",
                                "Principal": {"Service": "ecs.amazonaws.com"},
                            }
                        ]
                    },
                    "Policies": [{"PolicyName": "p", "PolicyDocument": doc}],
                },
            },
            "Managed": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": doc}},
            "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": doc}},
            "BucketPolicy": {
                "Type": "AWS::S3::BucketPolicy",
                "Properties": {"Bucket": "b", "PolicyDocument": json.dumps(doc)},
            },
            "Repository": {
                "Type": "AWS::ECR::Repository",
                "Properties": {"RepositoryPolicyText": doc},
            },
            "Permission": {
                "Type": "AWS::Lambda::Permission",
                "Properties": {"Action": "lambda:InvokeFuntion"},
            },
        }
    }
    found = {path[1] for path, _ in iam_actions.IamStatements().findings(template)}
    assert found == {"Role", "Managed", "Key", "BucketPolicy", "Repository", "Permission"}
    paths = [
        path for path, _ in iam_actions.IamStatements().findings(template) if path[1] == "Role"
    ]
    assert {p[3] for p in paths} == {"AssumeRolePolicyDocument", "Policies"}


def test_newer_actions_are_few_sourced_and_really_missing_from_the_data():
    """The list of actions newer than the data stays short: an entry the data has caught up with
    must go."""
    assert len(iam_actions.NEWER_ACTIONS) <= 5
    for action, source in iam_actions.NEWER_ACTIONS.items():
        assert source.startswith("https://docs.aws.amazon.com/"), action
        version = iam_actions.data_version()
        assert iam_actions.expand(action) == [], (
            f"{action} is in the data now ({version}): remove it"
        )
