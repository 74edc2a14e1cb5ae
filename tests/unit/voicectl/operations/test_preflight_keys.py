"""The keys a user brings (voicectl/operations/preflight_keys.py) in a deploy's preflight: KMS
DescribeKey and GetKeyPolicy against moto, the statements each key's policy must hold, and the keys
that stop a deploy (stand-ins: test_preflight.py)."""

from __future__ import annotations

from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    ACCOUNT,
    ENOUGH,
    REGION,
    StubbedAws,
    findings,
    fixture_aws,
    fixture_fake_credentials,
    stub_quotas,
    stub_sonic,
)
from voicectl.operations.preflight_findings import Finding, Status

ROOT_STATEMENT = {
    "Sid": "Account",
    "Effect": "Allow",
    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
    "Action": "kms:*",
    "Resource": "*",
}
LOGS_STATEMENT = {
    "Sid": "Logs",
    "Effect": "Allow",
    "Principal": {"Service": f"logs.{REGION}.amazonaws.com"},
    "Action": [
        "kms:Encrypt*",
        "kms:Decrypt*",
        "kms:ReEncrypt*",
        "kms:GenerateDataKey*",
        "kms:Describe*",
    ],
    "Resource": "*",
}
EVENTS_STATEMENT = {
    "Sid": "Events",
    "Effect": "Allow",
    "Principal": {"Service": "events.amazonaws.com"},
    "Action": ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"],
    "Resource": "*",
}
CONNECT_ARGS = [
    "-c",
    "connect.enabled=true",
    "-c",
    "connect.instance_arn=arn:aws:connect:us-east-1:123456789012:instance/"
    "11111111-2222-3333-4444-555555555555",
]


def user_key(aws: StubbedAws, *statements: dict, spec: str = "SYMMETRIC_DEFAULT") -> str:
    import json

    key = aws.session.client("kms").create_key(
        Policy=json.dumps({"Version": "2012-10-17", "Statement": list(statements)}),
        KeySpec=spec,
        KeyUsage="ENCRYPT_DECRYPT",
    )
    return key["KeyMetadata"]["Arn"]


def key_findings(aws: StubbedAws, key: str, *cdk_args: str) -> Finding:
    """The key's finding of one deploy preflight (a test may run several: the bootstrap version is
    overwritten)."""
    aws.session.client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    stub_sonic(aws)
    stub_quotas(aws, ENOUGH)
    return findings(aws, "-c", f"encryption.kms_key_arn={key}", *cdk_args)[
        "key encryption.kms_key_arn"
    ]


def test_a_users_key_with_the_statements_the_stacks_need_passes(aws):
    key = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, EVENTS_STATEMENT)
    found = key_findings(aws, key, *CONNECT_ARGS)
    assert (found.status, found.message) == (
        Status.OK,
        f"{key}: an enabled symmetric key whose policy allows what the stacks need",
    )


def test_a_users_key_without_eventbridges_statement_stops_a_deploy_with_connect(aws):
    key = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT)
    assert key_findings(aws, key).status == Status.OK  # no bus without Connect
    found = key_findings(aws, key, *CONNECT_ARGS)
    assert found.status == Status.STOP
    assert found.message.startswith(
        f"{key}: its policy does not allow events.amazonaws.com kms:DescribeKey, "
        "kms:GenerateDataKey, kms:Decrypt: the transcripts bus"
    )


def test_a_users_key_without_the_logs_or_account_statements_names_both(aws):
    key = user_key(aws, {**ROOT_STATEMENT, "Action": ["kms:Describe*", "kms:Put*"]})
    found = key_findings(aws, key)
    assert found.status == Status.STOP
    assert (
        f"allow the account ({ACCOUNT}:root) kms:Decrypt, kms:GenerateDataKey, kms:CreateGrant: "
        in found.message
    )
    assert (
        f"allow logs.{REGION}.amazonaws.com kms:Encrypt*, kms:Decrypt*, kms:ReEncrypt*, "
        "kms:GenerateDataKey*"
    ) in found.message


def test_an_asymmetric_or_disabled_or_unknown_key_stops(aws):
    rsa = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, spec="RSA_2048")
    found = key_findings(aws, rsa)
    assert (
        found.status == Status.STOP
        and "it is a RSA_2048 key for ENCRYPT_DECRYPT; Amazon Connect" in found.message
    )
    disabled = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT)
    aws.session.client("kms").disable_key(
        KeyId=disabled.rsplit("/", 1)[1]
    )  # moto 5 takes the id only
    assert "its state is Disabled, not Enabled" in key_findings(aws, disabled).message
    unknown = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    found = key_findings(aws, unknown)
    assert (found.status, found.message) == (
        Status.STOP,
        f"{unknown} does not exist (or is in another Region): "
        "give a key of this account and Region",
    )


def test_a_stream_key_is_checked_when_connect_is_on(aws):
    data = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, EVENTS_STATEMENT)
    stream = user_key(
        aws, LOGS_STATEMENT
    )  # no account statement: the consumers' IAM grant would not work
    key_findings(aws, data)
    found = findings(
        aws,
        "-c",
        f"encryption.kms_key_arn={data}",
        "-c",
        f"connect.stream_kms_key_arn={stream}",
        *CONNECT_ARGS,
    )["key connect.stream_kms_key_arn"]
    assert found.status == Status.STOP and f"allow the account ({ACCOUNT}:root)" in found.message
