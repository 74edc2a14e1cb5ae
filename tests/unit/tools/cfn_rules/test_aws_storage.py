"""The rule book's rules for data at rest (tools/cfn_rules/aws_storage.py: KMS keys and the log
groups they encrypt, S3 and ECR, Secrets Manager): each rule fails on a template written to break it
and holds on the same template mended (test_aws_rules.py holds the book as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import findings, template
from tools.cfn_rules import _gate

# isort: split

import aws_storage

ROOT_PRINCIPAL = {
    "AWS": {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
        ]
    }
}


def key(window=7, statements=None, **props) -> dict:
    statements = (
        statements
        if statements is not None
        else [{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*", "Resource": "*"}]
    )
    return template(
        Key=(
            "AWS::KMS::Key",
            {
                "PendingWindowInDays": window,
                "EnableKeyRotation": True,
                "KeyPolicy": {"Version": "2012-10-17", "Statement": statements},
                **props,
            },
        )
    )


def bucket_policy(resource=None, principal=True) -> dict:
    statement = {
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": resource or {"Fn::Join": ["", [{"Fn::GetAtt": ["Bucket", "Arn"]}, "/*"]]},
    }
    if principal:
        statement["Principal"] = {"Service": "sagemaker.amazonaws.com"}
    return template(
        Bucket=("AWS::S3::Bucket", {}),
        Other=("AWS::S3::Bucket", {}),
        Policy=(
            "AWS::S3::BucketPolicy",
            {"Bucket": {"Ref": "Bucket"}, "PolicyDocument": {"Statement": [statement]}},
        ),
    )


def stores(emptied=True, empty_on_delete=True, policy="Delete") -> dict:
    tpl = template(
        Bucket={"Type": "AWS::S3::Bucket", "DeletionPolicy": policy, "Properties": {}},
        Repository={
            "Type": "AWS::ECR::Repository",
            "DeletionPolicy": policy,
            "Properties": {"EmptyOnDelete": empty_on_delete},
        },
    )
    if emptied:
        tpl["Resources"]["BucketAutoDelete"] = {
            "Type": "Custom::S3AutoDeleteObjects",
            "Properties": {"ServiceToken": "arn:x", "BucketName": {"Ref": "Bucket"}},
        }
    return tpl


def secret(**props) -> dict:
    return template(Secret=("AWS::SecretsManager::Secret", props))


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (aws_storage.KeyPolicyKeepsTheKeyManageable, key(window=31), "outside 7-30", key(window=30)),
    (
        aws_storage.KeyPolicyKeepsTheKeyManageable,
        key(
            statements=[
                {
                    "Effect": "Allow",
                    "Action": "kms:Decrypt",
                    "Principal": ROOT_PRINCIPAL,
                    "Resource": "*",
                }
            ]
        ),
        "account root manage",
        key(),
    ),
    (
        aws_storage.KeyPolicyKeepsTheKeyManageable,
        key(
            statements=[
                {
                    "Effect": "Allow",
                    "Principal": ROOT_PRINCIPAL,
                    "Action": "kms:*",
                    "Resource": "*",
                },
                {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"},
            ]
        ),
        "without Principal",
        key(),
    ),
    (
        aws_storage.KeyPolicyKeepsTheKeyManageable,
        key(KeySpec="RSA_2048"),
        "rotation is for symmetric keys",
        key(),
    ),
    (
        aws_storage.BucketPolicyResources,
        bucket_policy({"Fn::GetAtt": ["Other", "Arn"]}),
        "is not bucket Bucket",
        bucket_policy(),
    ),
    (
        aws_storage.BucketPolicyResources,
        bucket_policy(principal=False),
        "needs a Principal",
        bucket_policy(),
    ),
    (
        aws_storage.DeletedStoresAreEmptiedFirst,
        stores(emptied=False),
        "nothing empties it",
        stores(),
    ),
    (
        aws_storage.DeletedStoresAreEmptiedFirst,
        stores(empty_on_delete=False),
        "EmptyOnDelete is not true",
        stores(),
    ),
    (
        aws_storage.DeletedStoresAreEmptiedFirst,
        stores(emptied=False),
        "Bucket is deleted",
        stores(emptied=False, policy="Retain"),
    ),
    (
        aws_storage.SecretValueSource,
        secret(SecretString="x", GenerateSecretString={"PasswordLength": 48}),
        "exclude each other",
        secret(GenerateSecretString={"PasswordLength": 48}),
    ),
    (
        aws_storage.SecretValueSource,
        secret(GenerateSecretString={"PasswordLength": 5000}),
        "outside 1-4096",
        secret(GenerateSecretString={"PasswordLength": 4096}),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []


LOGS_STATEMENT = {
    "Effect": "Allow",
    "Principal": {"Service": "logs.us-east-1.amazonaws.com"},
    "Resource": "*",
    "Action": [
        "kms:Decrypt*",
        "kms:Describe*",
        "kms:Encrypt*",
        "kms:GenerateDataKey*",
        "kms:ReEncrypt*",
    ],
    "Condition": {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": [
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":logs:us-east-1:",
                            {"Ref": "AWS::AccountId"},
                            ":log-group:/aws/sagemaker/Endpoints/*",
                        ],
                    ]
                },
                "arn:aws:logs:us-east-1:123456789012:log-group:RealtimeVoice-*",
            ]
        }
    },
}


def keyed_app(
    statement: dict | None, name: str | None = "/aws/sagemaker/Endpoints/voxtral-realtime"
) -> dict:
    """A Foundation stack exporting its key, and an endpoint stack whose log group imports it."""
    owner = [{"Effect": "Allow", "Principal": ROOT_PRINCIPAL, "Action": "kms:*", "Resource": "*"}]
    foundation = key(statements=owner + ([statement] if statement else []))
    foundation["Outputs"] = {
        "KeyArn": {
            "Value": {"Fn::GetAtt": ["Key", "Arn"]},
            "Export": {"Name": "RealtimeVoice-Foundation:KeyArn"},
        }
    }
    group = {"KmsKeyId": {"Fn::ImportValue": "RealtimeVoice-Foundation:KeyArn"}}
    if name:
        group["LogGroupName"] = name
    return {
        "RealtimeVoice-Foundation": foundation,
        "RealtimeVoice-Voxtral": template(Logs=("AWS::Logs::LogGroup", group)),
    }


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        (keyed_app(None), "does not let CloudWatch Logs use it"),
        (
            keyed_app({**LOGS_STATEMENT, "Action": ["kms:Decrypt*", "kms:Encrypt*"]}),
            "does not let CloudWatch Logs use it",
        ),
        (
            keyed_app(LOGS_STATEMENT, name="/ecs/voxtral"),
            "to log groups that '/ecs/voxtral' is not",
        ),
    ],
)
def test_a_log_group_key_must_let_cloudwatch_logs_in_across_stacks(app, expected):
    (line,) = _gate.template_findings(app, rules=(aws_storage.LogGroupKeyLetsCloudWatchLogsIn,))
    assert (
        line.startswith("E9602 RealtimeVoice-Voxtral: Resources/Logs/Properties/KmsKeyId: ")
        and expected in line
    )


@pytest.mark.parametrize("name", ["/aws/sagemaker/Endpoints/voxtral-realtime", None])
def test_a_log_group_the_key_lets_in_passes(name):
    """A named group under /aws/sagemaker/Endpoints/, and one CloudFormation names
    RealtimeVoice-Voxtral-Logs-..."""
    app = keyed_app(LOGS_STATEMENT, name=name)
    assert _gate.template_findings(app, rules=(aws_storage.LogGroupKeyLetsCloudWatchLogsIn,)) == []


def test_a_generated_log_group_name_is_not_guessed_in_a_single_template():
    """cfn-lint reads one template and knows no stack name: a group CloudFormation names is not
    matched against the condition (the gate, reading the app, does match it)."""
    foundation = keyed_app(LOGS_STATEMENT)["RealtimeVoice-Foundation"]
    foundation["Resources"]["Logs"] = {
        "Type": "AWS::Logs::LogGroup",
        "Properties": {"KmsKeyId": {"Fn::GetAtt": ["Key", "Arn"]}},
    }
    assert list(aws_storage.LogGroupKeyLetsCloudWatchLogsIn().findings(foundation)) == []
    other = {"Other-Stack": foundation}
    (line,) = _gate.template_findings(other, rules=(aws_storage.LogGroupKeyLetsCloudWatchLogsIn,))
    assert "'Other-Stack-Logs-*' is not" in line
