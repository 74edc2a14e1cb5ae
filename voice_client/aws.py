"""One place where ``voicectl`` makes its boto3 session and says, in one line, why AWS could not be
reached.

Region: :func:`aws_session` takes ``--region``, then ``AWS_REGION``, then ``AWS_DEFAULT_REGION``,
then the profile's ``region`` (the order of the AWS SDKs and CLI: "Environment variables" before
"Shared config file" in the AWS SDKs and Tools reference guide, "AWS Region"). boto3 itself reads
``AWS_DEFAULT_REGION`` and the profile but not ``AWS_REGION``, so :func:`aws_session` passes
``AWS_REGION`` on explicitly.

Failures: :func:`describe_aws_failure` turns the exceptions of a missing setup (no credentials, an
expired SSO token, a missing profile, no Region, no network) or a refused request into ``(exit code,
message)``, so that :func:`voicectl.cli.run_command` prints one line and never a traceback for them:
2 when the user's input or configuration is wrong (no Region, unknown profile), 1 when AWS could not
be asked or refused.

(The staging command, ``constructs_lib/artifacts/model_staging_build/stage_model``, runs alone in
CodeBuild and imports nothing of voicectl; ``voicectl stage-model`` hands it a session from here.)
"""

from __future__ import annotations

import os
from typing import Any

from voice_client.errors import UsageError

#: Environment variables that name the Region, in the order they are honoured (after an explicit
#: --region).
REGION_ENV_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")

NO_REGION = "no AWS Region: pass --region, set AWS_REGION, or set a region in your profile"
NO_CREDENTIALS_HINT = (
    "Configure them the usual way (for example `aws configure sso` and `export "
    "AWS_PROFILE=<profile>`, or an instance or container role), then run the command again."
)
EXPIRED_HINT = "renew them (for example `aws sso login`) and run the command again"

#: ClientError codes meaning the credentials themselves were refused (expired, revoked, malformed).
REJECTED_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "TokenRefreshRequired",
        "AuthFailure",
    }
)
#: ClientError codes of a permission the caller lacks.
ACCESS_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Unauthorized"}
)


def region_from_environment() -> str | None:
    """The first non-empty of :data:`REGION_ENV_VARS`, or None."""
    for name in REGION_ENV_VARS:
        if value := os.environ.get(name, "").strip():
            return value
    return None


def aws_session(
    profile: str | None = None, region: str | None = None, *, region_required: bool = True
) -> Any:
    """A ``boto3.Session`` for ``profile`` (None: the default chain) in ``region`` (None:
    AWS_REGION, AWS_DEFAULT_REGION, then the profile's). Makes no AWS call.

    Raises:
        UsageError: the profile does not exist, or ``region_required`` and no Region is configured
            anywhere.
    """
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(
            profile_name=profile or None, region_name=region or region_from_environment()
        )
        # A profile named by AWS_PROFILE is only looked up at the first call; look it up now.
        if (
            session.profile_name not in ("default", None)
            and session.profile_name not in session.available_profiles
        ):
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
    """``(exit code, one-line message)`` for an exception of a missing or broken AWS setup, or a
    request AWS refused; None for anything else (a genuine bug, which should keep its traceback)."""
    import botocore.exceptions as be

    if isinstance(error, (be.NoCredentialsError, be.PartialCredentialsError)):
        return 1, f"no AWS credentials found ({error}). {NO_CREDENTIALS_HINT}"
    if isinstance(error, be.ProfileNotFound):
        return 2, f"{error}; list profiles with `aws configure list-profiles`"
    if isinstance(error, be.NoRegionError):
        return 2, NO_REGION
    if isinstance(
        error, (be.TokenRetrievalError, be.SSOTokenLoadError, be.UnauthorizedSSOTokenError)
    ):
        return 1, f"the AWS credentials could not be loaded ({error}); {EXPIRED_HINT}"
    if isinstance(error, be.ClientError):
        code = error_code(error)
        if code in REJECTED_CREDENTIAL_CODES:
            return 1, f"AWS rejected the credentials ({error}); {EXPIRED_HINT}"
        if code in ACCESS_DENIED_CODES:
            return 1, f"access denied: {error}"
        return 1, f"AWS refused a request: {error}"
    if isinstance(error, (be.EndpointConnectionError, be.ConnectTimeoutError, be.ReadTimeoutError)):
        return 1, (
            f"could not reach AWS ({error}); check the network, a proxy (HTTPS_PROXY) and the "
            "Region"
        )
    if isinstance(error, be.BotoCoreError):
        return 1, f"AWS could not be asked: {error}"
    return None
