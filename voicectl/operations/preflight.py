"""``voicectl preflight ACTION``: what ``make deploy|diff|destroy|bootstrap`` is about to do, and
whether it can.

Prints the action, the account and region it acts on and the stacks and endpoints the settings
produce, then one line per check. Stops with exit code 1 and a message saying what to do when there
are no AWS credentials, or when a check finds what would fail the action after it started; a check
that cannot be made (a missing permission, an API unavailable in the partition) says so
(``UNCHECKED``) and does not stop anything. Read-only.

Checks, by action:

- every action: credentials (STS GetCallerIdentity) and the settings (``config.settings``);
- ``bootstrap``: each ``aws://ACCOUNT/REGION`` argument is well formed and is the credentials'
  account; the bootstrap version already there, if any (SSM GetParameter);
- ``diff`` and ``deploy``: the CDK bootstrap version (SSM parameter
  ``/cdk-bootstrap/<qualifier>/version``) is at least :data:`MIN_BOOTSTRAP_VERSION`;
- ``deploy``: a hub token when the deploy stages the gated model; the AWS Marketplace subscription
  to the Sonic listing (SageMaker DescribeModelPackage, AWS Marketplace Discovery GetListing, AWS
  Marketplace Agreement SearchAgreements); the SageMaker service quota "<instance type> for endpoint
  usage" of each instance type against the maximum instance count, and against the peak while an
  update runs old and new instances side by side (Service Quotas ListServiceQuotas,
  ListAWSDefaultServiceQuotas); the bridge image's CUDA against the NVIDIA driver of
  ``voxtral.inference_ami_version`` (:mod:`constructs_lib.facts.cuda_compat`); a key the user brings
  (``encryption.kms_key_arn``, ``connect.stream_kms_key_arn``): enabled, symmetric
  (SYMMETRIC_DEFAULT, ENCRYPT_DECRYPT), and a policy holding what CloudWatch Logs, EventBridge and
  the app's IAM-granted roles (SQS, DynamoDB, Kinesis Video Streams) need (KMS DescribeKey,
  GetKeyPolicy).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import botocore.exceptions

from config.settings import Settings, SettingsError, load_settings
from constructs_lib.facts import cuda_compat
from voice_client.aws import aws_session, describe_aws_failure, error_code, is_access_denied
from voicectl.cli import UsageError

#: SSM parameter the CDK bootstrap stack writes (default qualifier "hnb659fds"; CDK bootstrapping
#: guide).
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/{qualifier}/version"
DEFAULT_QUALIFIER = "hnb659fds"
#: Context key that overrides the qualifier (CDK bootstrapping guide, "Customizing bootstrapping").
QUALIFIER_CONTEXT_KEY = "@aws-cdk/core:bootstrapQualifier"
#: The bootstrap version this app's stacks require: ``requiresBootstrapStackVersion`` of every stack
#: in ``cdk.out/manifest.json`` (aws-cdk-lib's DefaultStackSynthesizer; tests/app/test_preflight.py
#: keeps them equal).
MIN_BOOTSTRAP_VERSION = 6
ACTIONS = ("deploy", "diff", "destroy", "bootstrap")

#: The AWS Marketplace listing of Cartesia Sonic 3.6 for SageMaker and its display name (when the
#: Discovery API cannot be asked). Source: cartesia-ai/cartesia-aws,
#: sonic-3-6-jumpstart/Sonic-3-6-Jumpstart.ipynb, "Subscribe to the model package". The listing id
#: is the ``prodview-`` part of the listing's address (unconfirmed: the Discovery API reference
#: shows no example id).
SONIC_LISTING_ID = "prodview-h5rfrnvkbnlki"
SONIC_LISTING_URL = f"https://aws.amazon.com/marketplace/pp/{SONIC_LISTING_ID}"
SONIC_LISTING_NAME = "Sonic 3.6 (Cartesia)"
#: DescribeModelPackage error codes for a package that does not exist (here): SageMaker answers
#: ValidationException.
MISSING_PACKAGE_CODES = frozenset(
    {"ValidationException", "ResourceNotFound", "ResourceNotFoundException"}
)
#: AWS Marketplace's buyer APIs (Discovery, Agreement) have one endpoint, in us-east-1 (botocore's
#: endpoint data).
MARKETPLACE_REGION = "us-east-1"
#: Name of a SageMaker real-time instance quota in Service Quotas (service code "sagemaker").
ENDPOINT_QUOTA_NAME = "{instance_type} for endpoint usage"
QUOTA_CONSOLE_URL = (
    "https://{region}.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/{code}"
)
_ENVIRONMENT_ARG = re.compile(
    r"^aws://(?P<account>\d{12}|unknown-account)/(?P<region>[a-z]{2}(-gov)?-[a-z]+-\d|unknown-region)$"
)


class PreflightError(Exception):
    """The action cannot go ahead; the message says why and what to do.

    Attributes:
        lines: what the preflight printed before it stopped (account, stacks, checks), possibly
            empty.
    """

    def __init__(self, message: str, lines: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.lines = list(lines)


class Status(Enum):
    """A check's outcome: STOP stops the action; WARN and UNCHECKED are printed and let it go
    ahead."""

    OK = "OK"
    WARN = "WARN"
    UNCHECKED = "UNCHECKED"
    STOP = "STOP"


@dataclass(frozen=True)
class Finding:
    """One check's outcome, ``check`` naming what was checked and ``message`` what was found and
    what to do."""

    status: Status
    check: str
    message: str

    def line(self) -> str:
        return f"  {self.status.value:<9} {self.check}: {self.message}"


#: ``clients(service, region)`` -> a boto3 client (tests inject stubbed ones).
ClientFactory = Callable[[str, str], Any]


def parse_context_args(cdk_args: list[str]) -> dict[str, str]:
    """``-c key=value`` / ``--context key=value`` pairs from CDK CLI arguments (other arguments are
    ignored)."""
    context: dict[str, str] = {}
    for i, arg in enumerate(cdk_args):
        value = None
        if arg in ("-c", "--context") and i + 1 < len(cdk_args):
            value = cdk_args[i + 1]
        elif arg.startswith("--context="):
            value = arg.split("=", 1)[1]
        if value is not None and "=" in value:
            key, val = value.split("=", 1)
            context[key] = val
    return context


def environment_args(cdk_args: list[str]) -> list[tuple[str, str]]:
    """``(account, region)`` of each ``aws://ACCOUNT/REGION`` argument (``cdk bootstrap``'s
    targets).

    Raises:
        PreflightError: an ``aws://`` argument of another form.
    """
    targets = []
    for arg in cdk_args:
        if arg.startswith("aws://"):
            match = _ENVIRONMENT_ARG.match(arg)
            if match is None:
                raise PreflightError(
                    f"{arg!r} is not an environment of the form aws://<12-digit account>/<region>, "
                    "e.g. aws://123456789012/us-east-1"
                )
            targets.append((match["account"], match["region"]))
    return targets


def _describe(error: Exception) -> str:
    """A ClientError or BotoCoreError as ``Code: message`` (or its text)."""
    if isinstance(error, botocore.exceptions.ClientError):
        return f"{error_code(error)}: {error.response.get('Error', {}).get('Message', '')}".rstrip(
            ": "
        )
    return str(error)


def _unchecked(check: str, action: str, error: Exception, advice: str = "") -> Finding:
    """What could not be checked: the missing permission ``action`` (on AccessDenied) or the
    error."""
    reason = f"missing permission {action}" if is_access_denied(error) else f"{action} failed"
    return Finding(
        Status.UNCHECKED,
        check,
        f"could not check ({reason}: {_describe(error)})" + (f"; {advice}" if advice else ""),
    )


# --- CDK bootstrap ------------------------------------------------------------------------------


def check_bootstrap(
    ssm: Any, account: str, region: str, qualifier: str, *, required: bool
) -> Finding:
    """The CDK bootstrap version in ``region``: STOP when ``required`` and it is missing or older
    than :data:`MIN_BOOTSTRAP_VERSION`."""
    name = BOOTSTRAP_VERSION_PARAMETER.format(qualifier=qualifier)
    command = f"make bootstrap CDK_ARGS=aws://{account}/{region}"
    check = f"CDK bootstrap of {region}"
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except botocore.exceptions.ClientError as error:
        if error_code(error) == "ParameterNotFound":
            if not required:
                return Finding(
                    Status.OK,
                    check,
                    "not bootstrapped yet; cdk bootstrap creates the CDKToolkit stack",
                )
            return Finding(
                Status.STOP,
                check,
                f"account {account} in {region} is not bootstrapped for the CDK (no SSM "
                f"parameter {name}). Run: {command}",
            )
        return _unchecked(
            check, "ssm:GetParameter", error, f"if it is not bootstrapped, run: {command}"
        )
    except botocore.exceptions.BotoCoreError as error:
        return _unchecked(check, "ssm:GetParameter", error)
    if not value.isdigit():
        return Finding(
            Status.WARN, check, f"SSM parameter {name} holds {value!r}, not a version number"
        )
    if not required:
        return Finding(
            Status.OK,
            check,
            f"bootstrapped at version {value}; cdk bootstrap updates it to the CLI's version",
        )
    if int(value) < MIN_BOOTSTRAP_VERSION:
        return Finding(
            Status.STOP,
            check,
            f"version {value} is older than the {MIN_BOOTSTRAP_VERSION} this app needs. "
            f"Run: {command}",
        )
    return Finding(
        Status.OK, check, f"version {value} (this app needs {MIN_BOOTSTRAP_VERSION} or later)"
    )


# --- Sonic: AWS Marketplace subscription --------------------------------------------------------


def check_sonic_package(sagemaker: Any, settings: Settings) -> Finding:
    """The Sonic model package exists in the stack's region and supports ``sonic.instance_type``
    (and every type of ``sonic.instance_pools``)."""
    arn, types = settings.sonic_model_package_arn, settings.sonic.variant().instance_types
    key = "sonic.instance_pools" if settings.sonic.instance_pools else "sonic.instance_type"
    check = "Sonic model package"
    try:
        package = sagemaker.describe_model_package(ModelPackageName=arn)
    except botocore.exceptions.ClientError as error:
        if "subscri" in str(error).lower():
            return Finding(
                Status.STOP, check, f"{_describe(error)}. Subscribe to {SONIC_LISTING_URL} first"
            )
        if (
            error_code(error) not in MISSING_PACKAGE_CODES
        ):  # a missing permission, throttling, a server error
            return _unchecked(check, "sagemaker:DescribeModelPackage", error)
        return Finding(
            Status.STOP,
            check,
            f"{arn} cannot be read in {settings.region} ({_describe(error)}); set "
            "sonic.model_package_arn to the package of this region from the listing's usage "
            "instructions",
        )
    except botocore.exceptions.BotoCoreError as error:
        return _unchecked(check, "sagemaker:DescribeModelPackage", error)
    supported = (
        package.get("InferenceSpecification", {}).get("SupportedRealtimeInferenceInstanceTypes")
        or []
    )
    unsupported = [t for t in types if supported and t not in supported]
    if unsupported:
        return Finding(
            Status.STOP,
            check,
            f"{package.get('ModelPackageName', arn)} does not support "
            f"{key}={', '.join(unsupported)}; it supports {', '.join(supported)}",
        )
    return Finding(
        Status.OK,
        check,
        f"{package.get('ModelPackageName', arn)} ({package.get('ModelPackageStatus', '?')})"
        + (f", supports {', '.join(types)}" if supported else ""),
    )


def check_sonic_subscription(discovery: Any, agreement: Any, account: str) -> Finding:
    """An active AWS Marketplace purchase agreement of ``account`` for the Sonic listing's
    product."""
    check = "Sonic Marketplace subscription"
    how = (
        f"open {SONIC_LISTING_URL}, choose 'Continue to Subscribe' and accept the offer (needs "
        "aws-marketplace:Subscribe; the AWS managed policy AWSMarketplaceManageSubscriptions "
        "has it), or deploy without Sonic: -c sonic.enabled=false"
    )
    try:
        listing = discovery.get_listing(listingId=SONIC_LISTING_ID)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        return _unchecked(
            check,
            "aws-marketplace:GetListing",
            error,
            f"without a subscription creating the Sonic Model fails; to subscribe, {how}",
        )
    name = listing.get("listingName") or SONIC_LISTING_NAME
    products = sorted(
        {
            entity["product"]["productId"]
            for entity in listing.get("associatedEntities", [])
            if entity.get("product", {}).get("productId")
        }
    )
    if not products:
        return Finding(
            Status.UNCHECKED, check, f"the listing '{name}' names no product to look for; {how}"
        )
    try:
        found = []
        for product in products:
            found += agreement.search_agreements(
                catalog="AWSMarketplace",
                filters=[
                    {"name": "PartyType", "values": ["Acceptor"]},
                    {"name": "AgreementType", "values": ["PurchaseAgreement"]},
                    {"name": "ResourceIdentifier", "values": [product]},
                    {"name": "Status", "values": ["ACTIVE"]},
                ],
            ).get("agreementViewSummaries", [])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        return _unchecked(
            check,
            "aws-marketplace:SearchAgreements",
            error,
            f"without a subscription to '{name}' creating the Sonic Model fails; to subscribe, "
            f"{how}",
        )
    if not found:
        return Finding(
            Status.STOP,
            check,
            f"account {account} is not subscribed to the AWS Marketplace listing "
            f"'{name}' (product {', '.join(products)}), so creating the Sonic Model would "
            'fail with "Caller '
            f'is not subscribed to the marketplace offering". To subscribe, {how}',
        )
    return Finding(
        Status.OK, check, f"'{name}': active agreement {found[0].get('agreementId', '?')}"
    )


# --- Service quotas -----------------------------------------------------------------------------


@dataclass
class InstanceNeed:
    """How many instances of one type the deploy may run at once.

    Attributes:
        instance_type: e.g. ``ml.g6.4xlarge``.
        steady: the sum of the endpoints' maximum instance counts (autoscaling may reach it).
        peak: ``steady`` plus what an update adds while old and new instances overlap.
        why: per endpoint, how ``steady`` and ``peak`` were counted.
    """

    instance_type: str
    steady: int = 0
    peak: int = 0
    why: list[str] = field(default_factory=list)


def instance_needs(settings: Settings) -> dict[str, InstanceNeed]:
    """``{instance type: need}`` of the enabled endpoints. Voxtral updates roll one batch of new
    instances in before old ones go (one, or ``voxtral.rollout_batch_percent`` of the count rounded
    up; RollingUpdatePolicy); Sonic updates are blue/green, all at once (Marketplace containers have
    no deployment guardrails), so a whole new fleet overlaps the old one. With instance pools, each
    pool's type needs the full count: SageMaker falls back to a pool when the ones before it have no
    capacity, and may then run every instance of the variant on it."""
    needs: dict[str, InstanceNeed] = {}

    def add(instance_types: tuple[str, ...], steady: int, peak: int, why: str) -> None:
        for instance_type in instance_types:
            need = needs.setdefault(instance_type, InstanceNeed(instance_type))
            need.steady += steady
            need.peak += peak
            need.why.append(
                why
                + (
                    f" (instance pool {instance_types.index(instance_type) + 1} of "
                    f"{len(instance_types)})"
                    if len(instance_types) > 1
                    else ""
                )
            )

    if settings.voxtral.enabled:
        v = settings.voxtral
        batch = math.ceil(v.max_capacity * v.batch_percent / 100) if v.batch_percent else 1
        add(
            v.variant().instance_types,
            v.max_capacity,
            v.max_capacity + batch,
            f"Voxtral up to {v.max_capacity}, {v.max_capacity + batch} during a rolling update",
        )
    if settings.sonic.enabled:
        s = settings.sonic
        add(
            s.variant().instance_types,
            s.max_capacity,
            2 * s.max_capacity,
            f"Sonic up to {s.max_capacity}, {2 * s.max_capacity} during a blue/green update",
        )
    return needs


def _endpoint_quotas(quotas: Any, names: set[str]) -> dict[str, dict]:
    """``{quota name: quota}`` for ``names``: the applied values, else AWS's defaults."""
    found: dict[str, dict] = {}
    for operation in ("list_service_quotas", "list_aws_default_service_quotas"):
        for page in quotas.get_paginator(operation).paginate(ServiceCode="sagemaker"):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") in names and quota["QuotaName"] not in found:
                    found[quota["QuotaName"]] = quota
            if names <= set(found):
                return found
    return found


def check_quotas(quotas: Any, region: str, needs: dict[str, InstanceNeed]) -> list[Finding]:
    """One finding per instance type: STOP below the steady need, WARN below the peak."""
    names = {ENDPOINT_QUOTA_NAME.format(instance_type=t): t for t in needs}
    try:
        found = _endpoint_quotas(quotas, set(names))
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        console = (
            f"https://{region}.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas"
        )
        return [
            _unchecked(
                f"service quota '{name}'",
                "servicequotas:ListServiceQuotas",
                error,
                f"{names[name]} needs {needs[names[name]].steady}; look it up in {console}",
            )
            for name in sorted(names)
        ]
    findings = []
    for name, instance_type in sorted(names.items()):
        need, check = needs[instance_type], f"service quota '{name}'"
        if name not in found:
            findings.append(
                Finding(
                    Status.UNCHECKED,
                    check,
                    f"Service Quotas lists no such SageMaker quota in {region}",
                )
            )
            continue
        quota = found[name]
        value = int(quota.get("Value", 0))
        link = QUOTA_CONSOLE_URL.format(region=region, code=quota.get("QuotaCode", ""))
        request = (
            f"request an increase at {link} or with `aws service-quotas "
            "request-service-quota-increase --service-code sagemaker --quota-code "
            f"{quota.get('QuotaCode', '')} --desired-value {need.peak} --region {region}`"
        )
        counted = (
            "; ".join(need.why)
            + f"; the quota is shared with every other endpoint of the account in {region}"
        )
        if value < need.steady:
            findings.append(
                Finding(
                    Status.STOP,
                    check,
                    f"{value} in {region}, below the {need.steady} this deploy may run "
                    f"({counted}); SageMaker would fail the endpoint after the stack waited for "
                    f"it. Lower the max instances, choose another instance type, or {request}",
                )
            )
        elif value < need.peak:
            findings.append(
                Finding(
                    Status.WARN,
                    check,
                    f"{value} in {region}: enough for {need.steady}, not for the "
                    f"{need.peak} an update may run at the maximum count ({counted}); {request}",
                )
            )
        else:
            findings.append(Finding(Status.OK, check, f"{value} in {region} ({counted})"))
    return findings


# --- GPU image CUDA against the AMI's driver ----------------------------------------------------


#: Preflight status of each verdict. INCOMPATIBLE is already a settings error (config/settings.py),
#: so the preflight stops before it gets here; the mapping keeps the check complete on its own.
CUDA_STATUS = {
    cuda_compat.Verdict.COMPATIBLE: Status.OK,
    cuda_compat.Verdict.MINOR_VERSION_COMPATIBILITY: Status.WARN,
    cuda_compat.Verdict.FORWARD_COMPATIBILITY: Status.WARN,
    cuda_compat.Verdict.INCOMPATIBLE: Status.STOP,
    cuda_compat.Verdict.UNKNOWN: Status.UNCHECKED,
}


# --- customer managed keys the user brings ------------------------------------------------------

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
        return _unchecked(check, "kms:DescribeKey", error)
    except botocore.exceptions.BotoCoreError as error:
        return _unchecked(check, "kms:DescribeKey", error)
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
        return _unchecked(
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


def check_cuda(settings: Settings, project_dir: Path) -> Finding:
    """The Voxtral image's CUDA (from its tag, or the base image of
    ``project_dir/container/Dockerfile``) against the driver of ``voxtral.inference_ami_version``:
    the settings' own check (:meth:`config.settings.VoxtralSettings.image_compatibility`, table in
    :mod:`constructs_lib.facts.cuda_compat`)."""
    v = settings.voxtral
    try:
        result = v.image_compatibility(project_dir / "container")
    except ValueError as error:  # an AMI version the table does not know
        return Finding(
            Status.UNCHECKED, f"CUDA of the Voxtral image on {v.inference_ami_version}", str(error)
        )
    return Finding(
        CUDA_STATUS[result.verdict],
        f"CUDA of the Voxtral image on {v.inference_ami_version}",
        result.reason,
    )


# --- The whole preflight ------------------------------------------------------------------------


def _context(project_dir: Path, cdk_args: list[str]) -> dict[str, Any]:
    context: dict[str, Any] = json.loads((project_dir / "cdk.json").read_text())["context"]
    context.update(parse_context_args(cdk_args))
    return context


def _identity(session: Any, region: str) -> dict:
    """STS GetCallerIdentity. Raises PreflightError for every way it can fail (no credentials, an
    expired SSO token, rejected credentials, no network), worded by
    :func:`voice_client.aws.describe_aws_failure`."""
    try:
        return session.client("sts", region_name=region).get_caller_identity()
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        described = describe_aws_failure(error)
        raise PreflightError(
            described[1] if described else f"could not check the AWS credentials: {error}"
        ) from None


def _stack_lines(settings: Settings) -> list[str]:
    prefix = settings.stack_name_prefix
    lines = [f"  {prefix}-Operations: alarm topic, dashboard"]
    if settings.voxtral.enabled:
        v = settings.voxtral
        lines.append(f"  {prefix}-Artifacts: bridge image repository, model bucket")
        lines.append(
            f"  {prefix}-Voxtral: endpoint {v.endpoint_name} on {v.initial_instance_count} x "
            f"{' or '.join(v.variant().instance_types)}"
        )
    if settings.sonic.enabled:
        s = settings.sonic
        lines.append(
            f"  {prefix}-Sonic: endpoint {s.endpoint_name} on {s.initial_instance_count} x "
            f"{' or '.join(s.variant().instance_types)}"
        )
    return lines


def run_checks(
    action: str,
    cdk_args: list[str],
    project_dir: Path = Path("."),
    session: Any = None,
    clients: ClientFactory | None = None,
) -> tuple[list[str], list[Finding]]:
    """The lines to print (account, region, stacks) and the findings of every check for ``action``.

    Args:
        session: a boto3 Session (default: :func:`voice_client.aws.aws_session` for the settings'
            region).
        clients: makes the clients of the checks after the credentials (default: from ``session``).

    Raises:
        PreflightError: an invalid setting or ``aws://`` argument, or no usable credentials (nothing
            else can be checked then).
    """
    if session is None:
        # Before the settings: a missing profile (AWS_PROFILE) breaks any botocore call, even
        # reading an API model.
        try:
            session = aws_session(
                region_required=False
            )  # every client below names the settings' region
        except UsageError as error:
            raise PreflightError(str(error)) from None
    context = _context(project_dir, cdk_args)
    try:
        settings = load_settings(context)
    except SettingsError as error:
        raise PreflightError(str(error)) from None
    targets = environment_args(cdk_args) if action == "bootstrap" else []
    identity = _identity(session, settings.region)
    account = identity["Account"]
    client: ClientFactory = clients or (
        lambda service, region: session.client(service, region_name=region)
    )
    qualifier = str(context.get(QUALIFIER_CONTEXT_KEY) or DEFAULT_QUALIFIER)

    lines = [f"{action}: account {account} ({identity['Arn']}), region {settings.region}"]
    findings: list[Finding] = []
    if action == "bootstrap":
        for target_account, region in targets or [(account, settings.region)]:
            if target_account not in (account, "unknown-account"):
                findings.append(
                    Finding(
                        Status.STOP,
                        f"environment aws://{target_account}/{region}",
                        f"the credentials are for account {account}, not {target_account}: use the "
                        f"profile of {target_account} or bootstrap aws://{account}/{region}",
                    )
                )
                continue
            region = settings.region if region == "unknown-region" else region
            findings.append(
                check_bootstrap(client("ssm", region), account, region, qualifier, required=False)
            )
        return lines, findings
    lines += _stack_lines(settings)
    if action == "destroy":
        return lines, findings
    v = settings.voxtral
    if action == "deploy" and v.enabled and v.stages_model and v.hf_token_secret_arn is None:
        findings.append(
            Finding(
                Status.STOP,
                "model hub token",
                (
                    "voxtral.stage_model is on but voxtral.hf_token_secret_arn is unset: the "
                    f"model hub repository {v.model_id} is gated, so the staging build would "
                    "fail in the middle of the deploy. Accept the model's terms on the hub, "
                    "store an access token as the plain text of a Secrets Manager secret and "
                    "pass -c voxtral.hf_token_secret_arn=<secret ARN>; or stage the weights "
                    "yourself and pass -c voxtral.stage_model=false (or -c "
                    "voxtral.model_s3_uri=s3://...)."
                ),
            )
        )
    findings.append(
        check_bootstrap(
            client("ssm", settings.region), account, settings.region, qualifier, required=True
        )
    )
    if action != "deploy":
        return lines, findings
    if settings.sonic.enabled:
        findings.append(check_sonic_package(client("sagemaker", settings.region), settings))
        findings.append(
            check_sonic_subscription(
                client("marketplace-discovery", MARKETPLACE_REGION),
                client("marketplace-agreement", MARKETPLACE_REGION),
                account,
            )
        )
    findings += check_quotas(
        client("service-quotas", settings.region), settings.region, instance_needs(settings)
    )
    if settings.encryption.kms_key_arn or (
        settings.connect.enabled and settings.connect.stream_kms_key_arn
    ):
        findings += check_user_keys(client("kms", settings.region), settings, account)
    if v.enabled:
        findings.append(check_cuda(settings, project_dir))
    return lines, findings


def check(
    action: str,
    cdk_args: list[str],
    project_dir: Path = Path("."),
    session: Any = None,
    clients: ClientFactory | None = None,
) -> list[str]:
    """Run the checks for ``action`` (:func:`run_checks`) and return the lines to print.

    Raises:
        PreflightError: no credentials, an invalid setting, or a check that found what would make
            the action fail (every such finding is in the message; ``lines`` holds the report
            printed before).
    """
    lines, findings = run_checks(action, cdk_args, project_dir, session, clients)
    report = lines + [finding.line() for finding in findings]
    stops = [finding for finding in findings if finding.status is Status.STOP]
    if len(stops) == 1:
        raise PreflightError(stops[0].message, report)
    if stops:
        raise PreflightError(
            f"{len(stops)} problems:\n" + "\n".join(f"  - {s.check}: {s.message}" for s in stops),
            report,
        )
    return report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``preflight`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "preflight",
        help="check credentials, bootstrap, subscription, quotas and CUDA before make "
        "deploy|diff|destroy|bootstrap",
        description=(
            "Before make deploy, diff, destroy or bootstrap: print the account, region and "
            "stacks the action acts on, and check, read-only, what would make it fail after it "
            "started: credentials, the CDK bootstrap version, the Sonic Marketplace "
            "subscription, the SageMaker instance quotas, and the bridge image's CUDA against "
            "the inference AMI's driver. Stops with exit code 1 and what to do; a check it "
            "cannot make (a missing permission) is reported as UNCHECKED."
        ),
    )
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="the make target about to run. deploy: credentials, bootstrap, hub token, Sonic "
        "package and subscription, quotas, image CUDA; diff: credentials and bootstrap; "
        "destroy: credentials, and prints the stacks it removes; bootstrap: that the "
        "credentials are for the account of aws://ACCOUNT/REGION, and the current bootstrap",
    )
    parser.add_argument(
        "cdk_args",
        nargs=argparse.REMAINDER,
        metavar="CDK_ARGS",
        help="the CDK CLI arguments (-c key=value settings; aws://ACCOUNT/REGION for bootstrap)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        lines = check(args.action, args.cdk_args)
    except PreflightError as error:
        if error.lines:
            print("\n".join(error.lines))
        print(f"make {args.action}: stopped: {error}")
        return 1
    print("\n".join(lines))
    return 0
