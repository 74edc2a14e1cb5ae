"""The customer managed keys a user brings, checked by ``voicectl preflight deploy``
(:mod:`voicectl.operations.preflight`): ``encryption.kms_key_arn`` and
``connect.stream_kms_key_arn`` must be enabled symmetric encryption keys whose policies hold what
the stacks need (KMS DescribeKey, GetKeyPolicy). Read-only."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import botocore.exceptions

from config.settings import Settings
from voice_client.aws import error_code
from voicectl.operations.preflight_findings import Finding, Status, unchecked

#: CloudWatch Logs' key actions (CloudWatch Logs user guide, "Encrypt log data in CloudWatch Logs
#: using AWS KMS").
LOGS_KEY_ACTIONS = (
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
)
#: EventBridge's (EventBridge user guide, "Authorizing EventBridge to use a customer managed key").
EVENTS_KEY_ACTIONS = ("kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt")


@dataclass(frozen=True)
class KeyNeed:
    """One statement a key policy must hold: ``principal`` (a service principal, or ``"account"``
    for the account's root, which lets IAM policies grant the key) allowed ``actions``, for ``why``
    (with the source)."""

    principal: str
    actions: tuple[str, ...]
    why: str


def key_needs(settings: Settings, role: str) -> list[KeyNeed]:
    """What a user's key in ``role`` (``data``: encryption.kms_key_arn; ``stream``:
    connect.stream_kms_key_arn) must allow for the resources the settings make with it."""
    account = KeyNeed(
        "account",
        ("kms:Decrypt", "kms:GenerateDataKey", "kms:CreateGrant", "kms:DescribeKey"),
        "the app's roles are granted the key by IAM policies (S3, SQS, SageMaker volumes, DynamoDB "
        "grants, the consumers' Kinesis Video Streams reads), which a key policy must delegate to "
        "(KMS developer guide, 'Default key policy')",
    )
    if role == "stream":
        return [account]
    needs = [
        account,
        KeyNeed(
            f"logs.{settings.region}.amazonaws.com",
            LOGS_KEY_ACTIONS,
            "the log groups are encrypted with it (CloudWatch Logs user guide, 'Encrypt log data "
            "in CloudWatch Logs using AWS KMS')",
        ),
    ]
    if settings.connect.enabled:
        needs.append(
            KeyNeed(
                "events.amazonaws.com",
                EVENTS_KEY_ACTIONS,
                "the transcripts bus is encrypted with it (EventBridge user "
                "guide, 'Authorizing EventBridge to use a customer managed key')",
            )
        )
    return needs


def _principal_matches(statement: dict, principal: str, account: str) -> bool:
    given = statement.get("Principal")
    if given == "*" or given == {"AWS": "*"}:
        return True
    if not isinstance(given, dict):
        return False
    if principal == "account":
        aws = given.get("AWS")
        return any(
            p in (account, f"arn:aws:iam::{account}:root")
            or re.fullmatch(rf"arn:aws[a-z-]*:iam::{account}:root", str(p))
            for p in ([aws] if isinstance(aws, str) else aws or [])
        )
    service = given.get("Service")
    return principal in ([service] if isinstance(service, str) else service or [])


def missing_key_actions(policy: dict, need: KeyNeed, account: str) -> list[str]:
    """The actions of ``need`` that no Allow statement of ``policy`` (a key policy document) grants
    its principal. Conditions are not evaluated (a condition may still narrow a grant)."""
    import fnmatch

    def as_list(value: Any) -> list:
        return value if isinstance(value, list) else [] if value is None else [value]

    granted = [
        a
        for s in as_list(policy.get("Statement"))
        if s.get("Effect") == "Allow" and _principal_matches(s, need.principal, account)
        for a in as_list(s.get("Action"))
    ]
    return [
        want
        for want in need.actions
        if not any(
            fnmatch.fnmatchcase(want.lower(), g.lower())
            or fnmatch.fnmatchcase(g.lower(), want.lower())
            for g in granted
        )
    ]


def check_key(kms: Any, setting: str, key_arn: str, needs: list[KeyNeed], account: str) -> Finding:
    """A key the user brings (``setting`` = ``key_arn``): it exists, is enabled, a symmetric
    encryption key (SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT: Amazon Connect and Kinesis Video Streams
    accept only symmetric keys, EventBridge checks it with DescribeKey), and its policy holds every
    statement of ``needs`` (GetKeyPolicy)."""
    check = f"key {setting}"
    try:
        metadata = kms.describe_key(KeyId=key_arn)["KeyMetadata"]
    except botocore.exceptions.ClientError as error:
        if error_code(error) == "NotFoundException":
            return Finding(
                Status.STOP,
                check,
                f"{key_arn} does not exist (or is in another Region): give a key of "
                "this account and Region",
            )
        return unchecked(check, "kms:DescribeKey", error)
    except botocore.exceptions.BotoCoreError as error:
        return unchecked(check, "kms:DescribeKey", error)
    problems = []
    if metadata.get("KeyState") != "Enabled":
        problems.append(f"its state is {metadata.get('KeyState')}, not Enabled")
    spec = metadata.get("KeySpec") or metadata.get("CustomerMasterKeySpec")
    if spec != "SYMMETRIC_DEFAULT" or metadata.get("KeyUsage") != "ENCRYPT_DECRYPT":
        problems.append(
            f"it is a {spec} key for {metadata.get('KeyUsage')}; Amazon Connect, Kinesis Video "
            "Streams, EventBridge, SQS and DynamoDB take only symmetric encryption keys "
            "(SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT)"
        )
    try:
        policy = json.loads(kms.get_key_policy(KeyId=key_arn, PolicyName="default")["Policy"])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        if problems:
            return Finding(Status.STOP, check, f"{key_arn}: " + "; ".join(problems))
        return unchecked(
            check, "kms:GetKeyPolicy", error, "the key policy's statements were not read"
        )
    for need in needs:
        missing = missing_key_actions(policy, need, account)
        if missing:
            who = f"the account ({account}:root)" if need.principal == "account" else need.principal
            problems.append(f"its policy does not allow {who} {', '.join(missing)}: {need.why}")
    if problems:
        return Finding(Status.STOP, check, f"{key_arn}: " + "; ".join(problems))
    return Finding(
        Status.OK,
        check,
        f"{key_arn}: an enabled symmetric key whose policy allows what the stacks need",
    )


def check_user_keys(kms: Any, settings: Settings, account: str) -> list[Finding]:
    """:func:`check_key` for each key the settings name (encryption.kms_key_arn,
    connect.stream_kms_key_arn)."""
    findings = []
    if settings.encryption.kms_key_arn:
        findings.append(
            check_key(
                kms,
                "encryption.kms_key_arn",
                settings.encryption.kms_key_arn,
                key_needs(settings, "data"),
                account,
            )
        )
    stream = settings.connect.stream_kms_key_arn if settings.connect.enabled else None
    if stream and stream != settings.encryption.kms_key_arn:
        findings.append(
            check_key(
                kms, "connect.stream_kms_key_arn", stream, key_needs(settings, "stream"), account
            )
        )
    return findings
