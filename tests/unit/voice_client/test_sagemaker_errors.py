"""voice_client.sagemaker_errors: SageMaker's and the SDK's errors become RealtimeErrors that name
what happened and what to try (the response stream's error events: test_sagemaker_stream.py)."""

from __future__ import annotations

import pytest

from voice_client.sagemaker_errors import SIGNATURE_ERRORS, describe_error


def test_an_unresolvable_runtime_host_is_named_in_the_error():
    """A DNS failure (awscrt AWS_IO_DNS_*) names the host and URL the client called, and what to
    check."""
    from voice_client.sagemaker_errors import describe_error

    error = RuntimeError("AWS_IO_DNS_INVALID_NAME: Host name was invalid for dns resolution")
    message = str(
        describe_error(
            error, "voxtral-realtime", "https://runtime.sagemaker.xx-east-1.amazonaws.com:8443"
        )
    )
    assert "runtime host runtime.sagemaker.xx-east-1.amazonaws.com" in message
    assert (
        "does not resolve (DNS): check --endpoint-url, AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, "
        "--region"
    ) in message
    refused = describe_error(
        RuntimeError("AWS_IO_SOCKET_CONNECTION_REFUSED: refused"), "e", "https://127.0.0.1:1"
    )
    assert "runtime host 127.0.0.1 (https://127.0.0.1:1) cannot be reached" in str(refused)
    assert "runtime host" not in str(
        describe_error(RuntimeError("AWS_IO_DNS_INVALID_NAME"), "e")
    )  # URL unknown


def test_errors_raised_when_the_stream_opens_keep_their_code_and_say_what_to_do():
    from aws_sdk_sagemaker_runtime_http2 import models

    unavailable = describe_error(models.ServiceUnavailableError(message="down."), "ep")
    assert (str(unavailable), unavailable.code) == (
        "SageMaker is unavailable for 'ep': down. Retry in a moment",
        "ServiceUnavailableError",
    )
    rejected = describe_error(models.InputValidationError(message="no such endpoint"), "ep")
    assert rejected.code == "InputValidationError"
    assert str(rejected).startswith(
        "SageMaker rejected the request for endpoint 'ep': no such endpoint. Check the endpoint "
        "name and Region"
    )


@pytest.mark.parametrize("name", sorted(SIGNATURE_ERRORS))
def test_a_refused_signature_is_named_with_what_to_check(name):
    """smithy keeps only the error's name, in its message."""
    error = RuntimeError(f"Unknown error - status: 403 - id: com.amazon.coral.service#{name}")
    described = describe_error(error, "ep")
    assert described.code == name
    assert str(described) == (
        f"AWS refused the signature of the call to 'ep' ({name}): check the credentials (`aws sts "
        "get-caller-identity`), the Region (--region) and this machine's clock"
    )


def test_access_denied_names_the_action_the_caller_needs():
    class AccessDeniedException(Exception):
        pass

    described = describe_error(AccessDeniedException("not authorized."), "ep")
    assert described.code == "AccessDenied"
    assert str(described) == (
        "access denied invoking 'ep' (not authorized); the caller needs "
        "sagemaker:InvokeEndpointWithBidirectionalStream on the endpoint ARN"
    )


def test_an_untrusted_certificate_points_to_aws_ca_bundle():
    error = RuntimeError("AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE: TLS negotiation failed")
    described = describe_error(error, "ep", "https://localhost:8443")
    assert described.code == "RuntimeError"
    assert "the runtime's certificate is not trusted" in str(described)
    assert "set AWS_CA_BUNDLE to its PEM file" in str(described)
