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

The deploy's checks of the Sonic subscription, the quotas and the keys are in
:mod:`~voicectl.operations.preflight_marketplace`, :mod:`~voicectl.operations.preflight_quotas` and
:mod:`~voicectl.operations.preflight_keys`, what a check finds in
:mod:`~voicectl.operations.preflight_findings`; this module checks the bootstrap and the image's
CUDA, and runs them all.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import botocore.exceptions

from config.settings import Settings, SettingsError, load_settings
from constructs_lib.facts import cuda_compat
from voice_client.aws import aws_session, describe_aws_failure, error_code
from voicectl.cli import UsageError
from voicectl.operations.preflight_findings import Finding, Status, unchecked
from voicectl.operations.preflight_keys import check_user_keys
from voicectl.operations.preflight_marketplace import (
    MARKETPLACE_REGION,
    check_sonic_package,
    check_sonic_subscription,
)
from voicectl.operations.preflight_quotas import check_quotas, instance_needs

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
        return unchecked(
            check, "ssm:GetParameter", error, f"if it is not bootstrapped, run: {command}"
        )
    except botocore.exceptions.BotoCoreError as error:
        return unchecked(check, "ssm:GetParameter", error)
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


def check_cuda(settings: Settings, project_dir: Path) -> Finding:
    """The Voxtral image's CUDA (from its tag, or the base image of
    ``project_dir/services/bridge/Dockerfile``) against the driver of
    ``voxtral.inference_ami_version``:
    the settings' own check (:meth:`config.settings.VoxtralSettings.image_compatibility`, table in
    :mod:`constructs_lib.facts.cuda_compat`)."""
    v = settings.voxtral
    try:
        result = v.image_compatibility(project_dir / "services" / "bridge")
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
