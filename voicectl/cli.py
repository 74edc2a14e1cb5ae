"""The ``voicectl`` command line: one argparse parser, one subcommand per module.

A subcommand module exposes ``register(subparsers) -> None``; it adds its parser and sets ``func`` to a callable
``func(args) -> int`` (the process exit code). Add new modules to ``SUBCOMMAND_MODULES``. A module that fails to
import (a missing optional dependency, a broken install) does not take the other subcommands down: its subcommand
is still listed and reports the import error when it is used.

AWS: :func:`aws_session` is the one place every subcommand gets its boto3 session and Region from (``--region``, then
``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the profile's: the order of the AWS SDKs and CLI, "Environment
variables" before "Shared config file" in the AWS SDKs and Tools reference guide, "AWS Region"; boto3 itself reads
``AWS_DEFAULT_REGION`` and the profile but not ``AWS_REGION``). :func:`describe_aws_failure` turns the exceptions of
a missing setup (no credentials, an expired SSO token, a missing profile, no Region, no network) or a refused
request into ``(exit code, message)``, so that :func:`run_command` prints one line, never a traceback, for them: 2
when the user's input or configuration is wrong (no Region, unknown profile), 1 when AWS could not be asked or
refused. They live here, not in a module of their own, because ``voicectl.stage_model`` uses them and the in-stack
staging build ships only ``voicectl/__init__.py``, ``cli.py``, ``stage_model.py`` and ``staging/`` (SOURCE_FILES
in constructs_lib/model_staging.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

DESCRIPTION = (
    "Work with the real-time voice endpoints on Amazon SageMaker: transcribe recordings or the microphone through "
    "the Voxtral endpoint, make the Sonic endpoint speak, and check or stage a deployment."
)
"""What ``voicectl --help`` says about the tool."""

# Modules are imported lazily by name so that a subcommand whose optional dependency is missing (gradio for `mic`)
# does not break the others.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "voicectl.preflight",
    "voicectl.stage_model",
    "voicectl.transcribe",
    "voicectl.speak",
    "voicectl.mic",
    "voicectl.verify",
    "voicectl.cost",
)

EXIT_UNAVAILABLE = 1
"""Exit code of a subcommand whose module could not be imported."""


class UsageError(Exception):
    """Bad input from the user: the message names what was wrong and what is allowed. Exit code 2."""


def subcommand_name(module_name: str) -> str:
    """The subcommand a module registers, by convention: ``voicectl.stage_model`` -> ``stage-model``."""
    return module_name.rsplit(".", 1)[-1].replace("_", "-")


def _register_unavailable(subparsers: argparse._SubParsersAction, module_name: str, error: BaseException) -> None:
    """Register a stand-in subcommand that reports why ``module_name`` could not be imported."""
    name = subcommand_name(module_name)
    reason = f"{type(error).__name__}: {error}"
    # No option prefix: every argument after the name is accepted as is, so the import error is what gets reported.
    parser = subparsers.add_parser(name, help=f"(unavailable: {reason})", add_help=False, prefix_chars="\x00",
                                   description=f"This subcommand could not be loaded ({reason}).")
    parser.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)

    def unavailable(args: argparse.Namespace) -> int:
        print(f"voicectl {name}: this subcommand could not be loaded ({reason}); reinstall the project "
              "(`make deps`, or `pip install .` from the repository root)", file=sys.stderr)
        return EXIT_UNAVAILABLE

    parser.set_defaults(func=unavailable)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered (stand-ins for modules that fail to import)."""
    parser = argparse.ArgumentParser(prog="voicectl", description=DESCRIPTION)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except Exception as error:  # any import-time failure: report it only when the subcommand is used
            _register_unavailable(subparsers, name, error)
            continue
        module.register(subparsers)
    return parser


def run_command(name: str, func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run one subcommand's ``func(args)`` and return the exit code: its own, 2 for :class:`UsageError`, 130 for
    Ctrl-C, and 1 or 2 for a missing AWS setup or a request AWS refused (:func:`describe_aws_failure`);
    each failure is one line on stderr, ``voicectl <name>: <what happened>``."""
    try:
        return int(func(args) or 0)
    except UsageError as error:
        print(f"voicectl {name}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"voicectl {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        # No credentials, no Region, no network, a refused request: one line, not a traceback.
        described = describe_aws_failure(error)
        if described is None:
            raise
        code, message = described
        print(f"voicectl {name}: {message}", file=sys.stderr)
        return code


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_command(args.command, args.func, args)


# --- AWS: the session every subcommand uses, and one line for what went wrong -------------------------------------

#: Environment variables that name the Region, in the order they are honoured (after an explicit --region).
REGION_ENV_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")

NO_REGION = "no AWS Region: pass --region, set AWS_REGION, or set a region in your profile"
NO_CREDENTIALS_HINT = (
    "Configure them the usual way (for example `aws configure sso` and `export AWS_PROFILE=<profile>`, or an "
    "instance or container role), then run the command again."
)
EXPIRED_HINT = "renew them (for example `aws sso login`) and run the command again"

#: ClientError codes meaning the credentials themselves were refused (expired, revoked, malformed).
REJECTED_CREDENTIAL_CODES = frozenset({
    "ExpiredToken", "ExpiredTokenException", "RequestExpired", "InvalidClientTokenId", "UnrecognizedClientException",
    "SignatureDoesNotMatch", "InvalidSignatureException", "TokenRefreshRequired", "AuthFailure",
})
#: ClientError codes of a permission the caller lacks.
ACCESS_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Unauthorized"})


def region_from_environment() -> str | None:
    """The first non-empty of :data:`REGION_ENV_VARS`, or None."""
    for name in REGION_ENV_VARS:
        if value := os.environ.get(name, "").strip():
            return value
    return None


def aws_session(profile: str | None = None, region: str | None = None, *, region_required: bool = True) -> Any:
    """A ``boto3.Session`` for ``profile`` (None: the default chain) in ``region`` (None: AWS_REGION,
    AWS_DEFAULT_REGION, then the profile's). Makes no AWS call.

    Raises:
        UsageError: the profile does not exist, or ``region_required`` and no Region is configured anywhere.
    """
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=profile or None, region_name=region or region_from_environment())
        # A profile named by AWS_PROFILE is only looked up at the first call; look it up now.
        if session.profile_name not in ("default", None) and session.profile_name not in session.available_profiles:
            raise botocore.exceptions.ProfileNotFound(profile=session.profile_name)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from error
    if region_required and not session.region_name:
        raise UsageError(NO_REGION)
    return session


def error_code(error: BaseException) -> str:
    """The ``Error.Code`` of a botocore ClientError ("" for anything else)."""
    response = getattr(error, "response", None)
    return response.get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


def is_access_denied(error: BaseException) -> bool:
    """Whether ``error`` is a ClientError saying the caller lacks a permission."""
    return error_code(error) in ACCESS_DENIED_CODES


def describe_aws_failure(error: BaseException) -> tuple[int, str] | None:
    """``(exit code, one-line message)`` for an exception of a missing or broken AWS setup, or a request AWS refused;
    None for anything else (a genuine bug, which should keep its traceback)."""
    import botocore.exceptions as be

    if isinstance(error, (be.NoCredentialsError, be.PartialCredentialsError)):
        return 1, f"no AWS credentials found ({error}). {NO_CREDENTIALS_HINT}"
    if isinstance(error, be.ProfileNotFound):
        return 2, f"{error}; list profiles with `aws configure list-profiles`"
    if isinstance(error, be.NoRegionError):
        return 2, NO_REGION
    if isinstance(error, (be.TokenRetrievalError, be.SSOTokenLoadError, be.UnauthorizedSSOTokenError)):
        return 1, f"the AWS credentials could not be loaded ({error}); {EXPIRED_HINT}"
    if isinstance(error, be.ClientError):
        code = error_code(error)
        if code in REJECTED_CREDENTIAL_CODES:
            return 1, f"AWS rejected the credentials ({error}); {EXPIRED_HINT}"
        if code in ACCESS_DENIED_CODES:
            return 1, f"access denied: {error}"
        return 1, f"AWS refused a request: {error}"
    if isinstance(error, (be.EndpointConnectionError, be.ConnectTimeoutError, be.ReadTimeoutError)):
        return 1, f"could not reach AWS ({error}); check the network, a proxy (HTTPS_PROXY) and the Region"
    if isinstance(error, be.BotoCoreError):
        return 1, f"AWS could not be asked: {error}"
    return None
