"""``voicectl preflight ACTION``: what ``make deploy|diff|destroy`` is about to do, and whether it can.

Prints the action, the account and region it acts on and the stacks and endpoints the settings produce; stops
with exit code 1 and a message saying what to do when there are no AWS credentials or (for deploy and diff) the
environment is not bootstrapped for the CDK. Read-only: it calls only STS GetCallerIdentity and SSM GetParameter.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions

from config.settings import SettingsError, load_settings

#: SSM parameter the CDK bootstrap stack writes (default qualifier "hnb659fds"; CDK bootstrapping guide).
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/{qualifier}/version"
DEFAULT_QUALIFIER = "hnb659fds"
ACTIONS = ("deploy", "diff", "destroy")


class PreflightError(Exception):
    """The action cannot go ahead; the message says why and what to do."""


def parse_context_args(cdk_args: list[str]) -> dict[str, str]:
    """``-c key=value`` / ``--context key=value`` pairs from CDK CLI arguments (other arguments are ignored)."""
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


def check(action: str, cdk_args: list[str], project_dir: Path = Path(".")) -> list[str]:
    """Run the checks for ``action`` and return the lines to print.

    Raises:
        PreflightError: no credentials, an invalid setting, or (deploy, diff) an environment not bootstrapped.
    """
    context: dict[str, Any] = json.loads((project_dir / "cdk.json").read_text())["context"]
    context.update(parse_context_args(cdk_args))
    try:
        settings = load_settings(context)
    except SettingsError as error:
        raise PreflightError(str(error)) from None

    try:
        session = boto3.Session(region_name=settings.region)
        identity = session.client("sts").get_caller_identity()
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError) as error:
        raise PreflightError(
            f"no AWS credentials found ({error}). Configure them the usual way (for example `aws configure sso` "
            "and `export AWS_PROFILE=<profile>`, or an instance or container role), then run the command again."
        ) from None
    except botocore.exceptions.ClientError as error:
        raise PreflightError(f"the AWS credentials were rejected: {error}") from None
    except botocore.exceptions.BotoCoreError as error:
        # A missing profile, an expired SSO token, no network to STS, ...
        raise PreflightError(f"could not check the AWS credentials: {error}") from None
    account = identity["Account"]

    lines = [
        f"{action}: account {account} ({identity['Arn']}), region {settings.region}",
    ]
    prefix = settings.stack_name_prefix
    lines.append(f"  {prefix}-Operations: alarm topic, dashboard")
    if settings.voxtral.enabled:
        v = settings.voxtral
        lines.append(f"  {prefix}-Artifacts: bridge image repository, model bucket")
        lines.append(f"  {prefix}-Voxtral: endpoint {v.endpoint_name} on {v.initial_instance_count} x {v.instance_type}")
    if settings.sonic.enabled:
        s = settings.sonic
        lines.append(f"  {prefix}-Sonic: endpoint {s.endpoint_name} on {s.initial_instance_count} x {s.instance_type}")

    if action == "deploy" and settings.voxtral.enabled and settings.voxtral.stages_model \
            and settings.voxtral.hf_token_secret_arn is None:
        raise PreflightError(
            f"voxtral.stage_model is on but voxtral.hf_token_secret_arn is unset: the model hub repository "
            f"{settings.voxtral.model_id} is gated, so the staging build would fail in the middle of the deploy. "
            "Accept the model's terms on the hub, store an access token as the plain text of a Secrets Manager "
            "secret and pass -c voxtral.hf_token_secret_arn=<secret ARN>; or stage the weights yourself and pass "
            "-c voxtral.stage_model=false (or -c voxtral.model_s3_uri=s3://...)."
        )
    if action in ("deploy", "diff"):
        name = BOOTSTRAP_VERSION_PARAMETER.format(qualifier=DEFAULT_QUALIFIER)
        try:
            session.client("ssm").get_parameter(Name=name)
        except botocore.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
                raise PreflightError(
                    f"account {account} in {settings.region} is not bootstrapped for the CDK (no SSM parameter "
                    f"{name}). Run: make bootstrap CDK_ARGS=aws://{account}/{settings.region}"
                ) from None
            raise PreflightError(f"could not check the CDK bootstrap of {settings.region}: {error}") from None
    return lines


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``preflight`` to the voicectl parser."""
    parser = subparsers.add_parser("preflight", help="check credentials and bootstrap before deploy, diff or destroy")
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("cdk_args", nargs=argparse.REMAINDER, help="the CDK CLI arguments (for -c key=value)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        lines = check(args.action, args.cdk_args)
    except PreflightError as error:
        print(f"make {args.action}: stopped: {error}")
        return 1
    print("\n".join(lines))
    return 0
