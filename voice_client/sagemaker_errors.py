"""SageMaker's and the SDK's errors of a bidirectional stream as :class:`RealtimeError` s that say
what happened and what to try (:func:`describe_error`).

``ModelStreamError`` and ``InternalStreamFailure`` arrive as events of the response stream, which
the SDK raises from ``receive()``; ``ModelError``, ``InputValidationError``,
``ServiceUnavailableError`` and ``InternalServerError`` are raised when the stream opens; AWS's
front end refuses a bad signature with errors the service model does not list, and awscrt names a
host it could not resolve or reach.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from voice_client.realtime import RealtimeError

SIGNATURE_ERRORS = frozenset(
    {
        "MissingAuthenticationTokenException",
        "IncompleteSignatureException",
        "InvalidSignatureException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
    }
)
"""Errors AWS's front end answers (HTTP 400/403) for a request that is unsigned, signed wrongly or
with an unknown or expired key."""

UNREACHABLE_ERRORS = (
    "AWS_IO_DNS",
    "AWS_IO_SOCKET_CONNECTION_REFUSED",
    "AWS_IO_SOCKET_TIMEOUT",
    "AWS_IO_SOCKET_NO_ROUTE_TO_HOST",
    "AWS_IO_SOCKET_NETWORK_DOWN",
)
"""awscrt error names (``aws-c-io`` ``include/aws/io/io.h``) meaning the runtime host was not
resolved or not reached."""


def describe_error(
    error: BaseException, endpoint_name: str, runtime_url: str | None = None
) -> RealtimeError:
    """Turn an SDK exception into a :class:`RealtimeError` that says what happened and what to try.

    ``runtime_url`` (the runtime the client calls, e.g.
    ``https://runtime.sagemaker.us-east-1.amazonaws.com:8443``) is named when the host could not be
    resolved or reached, so that a mistyped ``--endpoint-url`` or Region shows.
    """
    from aws_sdk_sagemaker_runtime_http2 import models

    name = type(error).__name__
    detail = (getattr(error, "message", None) or str(error) or name).rstrip(
        "."
    )  # our sentences add their own
    if isinstance(error, models.ModelStreamError):
        code = getattr(error, "error_code", None)
        return RealtimeError(
            f"ModelStreamError from endpoint {endpoint_name!r} ({code}): {detail}. The container "
            "ended the stream; see the endpoint's CloudWatch logs "
            "(/aws/sagemaker/Endpoints/<name>)",
            code="ModelStreamError",
        )
    if isinstance(error, models.InternalStreamFailure):
        return RealtimeError(
            f"InternalStreamFailure on endpoint {endpoint_name!r}: {detail}. SageMaker lost the "
            "stream; retry, and if it persists check the endpoint's health and AWS Health "
            "Dashboard",
            code="InternalStreamFailure",
        )
    if isinstance(error, models.ModelError):
        status = getattr(error, "original_status_code", None)
        return RealtimeError(
            f"ModelError from endpoint {endpoint_name!r} (container status {status}): "
            f"{getattr(error, 'original_message', None) or detail}. Is the container healthy? See "
            f"{getattr(error, 'log_stream_arn', None) or 'the endpoint CloudWatch logs'}",
            code="ModelError",
        )
    if isinstance(error, models.InputValidationError):
        return RealtimeError(
            f"SageMaker rejected the request for endpoint {endpoint_name!r}: {detail}. Check the "
            "endpoint name and Region (`aws sagemaker describe-endpoint --endpoint-name ...`) "
            "and that its container supports bidirectional streaming",
            code="InputValidationError",
        )
    if isinstance(error, models.ServiceUnavailableError):
        return RealtimeError(
            f"SageMaker is unavailable for {endpoint_name!r}: {detail}. Retry in a moment",
            code="ServiceUnavailableError",
        )
    if isinstance(error, models.InternalServerError):
        return RealtimeError(
            f"SageMaker internal error for {endpoint_name!r}: {detail}. Retry in a moment",
            code="InternalServerError",
        )
    from smithy_core.exceptions import SmithyIdentityError

    if isinstance(error, SmithyIdentityError):
        return RealtimeError(f"AWS credentials problem: {detail}", code="credentials")
    # AWS's front end refuses a bad signature with errors the service model does not list; smithy
    # keeps only their name, in its message ("... - status: 403 - id:
    # <namespace>#InvalidSignatureException").
    refused = re.search(r"- id: \S*#(\w+)", detail)
    if refused and refused.group(1) in SIGNATURE_ERRORS:
        return RealtimeError(
            f"AWS refused the signature of the call to {endpoint_name!r} ({refused.group(1)}): "
            "check the credentials (`aws sts get-caller-identity`), the Region (--region) and "
            "this machine's clock",
            code=refused.group(1),
        )
    status = getattr(getattr(error, "response_metadata", None), "status_code", None)
    if status == 403 or "AccessDenied" in name:
        return RealtimeError(
            f"access denied invoking {endpoint_name!r} ({detail}); the caller needs "
            "sagemaker:InvokeEndpointWithBidirectionalStream on the endpoint ARN",
            code="AccessDenied",
        )
    hint = (
        (
            "; the runtime's certificate is not trusted: for a private certificate authority (a "
            "TLS-inspecting proxy, voicectl local-runtime) set AWS_CA_BUNDLE to its PEM file"
        )
        if "TLS_ERROR" in detail
        else ""
    )
    if runtime_url and any(marker in detail for marker in UNREACHABLE_ERRORS):
        host = urlsplit(runtime_url).hostname
        what = "does not resolve (DNS)" if "DNS" in detail else "cannot be reached"
        hint = (
            f"; the runtime host {host} ({runtime_url}) {what}: check --endpoint-url, "
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, --region and the network"
        )
    return RealtimeError(
        f"calling endpoint {endpoint_name!r} failed ({name}: {detail}){hint}", code=name
    )
