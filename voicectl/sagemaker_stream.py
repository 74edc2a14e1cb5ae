"""SageMaker bidirectional streaming transport: realtime messages through ``InvokeEndpointWithBidirectionalStream``.

Built on ``aws-sdk-sagemaker-runtime-http2`` (the Smithy-generated async client; API reference:
https://docs.aws.amazon.com/sdk-for-python/v1/reference/clients/sagemaker-runtime-http2/) with these choices:

- Transport: ``smithy_http.aio.crt.AWSCRTHTTPClient`` (awscrt) forced to HTTP/2. The package's default transport
  (aiohttp) cannot stream a request body while reading the response; smithy-core refuses it for duplex operations
  (``SUPPORTS_DUPLEX_STREAMING``, ``smithy_core/aio/client.py``).
- Endpoint: ``https://runtime.sagemaker.<region>.amazonaws.com:8443``. Bidirectional streams are served on port 8443,
  not on the runtime's usual 443 (AWS ML blog "Introducing bidirectional streaming for real-time inference on Amazon
  SageMaker AI", 2025-11; request path ``/endpoints/<EndpointName>/invocations-bidirectional-stream``).
- Signing: SigV4 for the ``sagemaker`` signing name (the service model's ``sigV4ServiceName``); each event of the
  request stream is signed too (``smithy_aws_event_stream.aio.AWSEventPublisher``).
- Credentials: :class:`BotocoreCredentialsResolver` adapts botocore's standard provider chain (environment,
  shared config and credentials files with profiles, SSO, assume-role, web identity, credential_process, ECS
  container and EC2 instance roles) and its automatic refresh of temporary credentials. The SDK's own chain covers
  only environment, static profile keys and credential_process unless extra packages are installed, so we reuse
  botocore's (which boto3 already brings) rather than copy credentials into the environment.
- Payload parts: each realtime message is one ``RequestPayloadPart`` with ``DataType="UTF8"``, which the SageMaker
  sidecar forwards as a WebSocket text frame (vLLM reads text frames only: ``websocket.receive_text()``).
  Response payload parts may carry ``CompletionState="PARTIAL"`` for a frame split in several parts; they are joined
  until a part that is not ``PARTIAL``.
- Errors: ``ModelStreamError`` and ``InternalStreamFailure`` arrive as events of the response stream, which the SDK
  raises from ``receive()``; ``ModelError``, ``InputValidationError``, ``ServiceUnavailableError`` and
  ``InternalServerError`` are raised when the stream opens. Each becomes a :class:`~voicectl.realtime.RealtimeError`
  naming what happened and what to try.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from voicectl.realtime import RealtimeError, TransportClosed

BIDI_PORT = 8443
"""Port of SageMaker's bidirectional streaming runtime endpoint (AWS blog cited in the module docstring)."""

SIGV4_SIGNING_NAME = "sagemaker"
"""SigV4 signing name of SageMaker Runtime HTTP2 (service model ``sigV4ServiceName``)."""

PAYLOAD_DATA_TYPE = "UTF8"
"""``RequestPayloadPart.DataType`` for JSON text: delivered to the container as a WebSocket text frame."""

PARTIAL = "PARTIAL"
"""``CompletionState`` of a payload part that does not end its frame."""

CLOSE_TIMEOUT_S = 5.0
"""Seconds allowed to close each direction of the stream before giving up on a clean close."""



def bidi_endpoint_uri(region: str) -> str:
    """Runtime URI for bidirectional streams in ``region`` (e.g. ``https://runtime.sagemaker.us-east-1.amazonaws.com:8443``)."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{BIDI_PORT}"


class BotocoreCredentialsResolver:
    """Smithy identity resolver backed by botocore's credential provider chain (with refresh).

    ``session`` is a ``botocore.session.Session`` (or ``boto3.Session``); credentials are looked up once, then
    ``get_frozen_credentials()`` is called per signature, which refreshes temporary credentials shortly before
    they expire (botocore ``RefreshableCredentials``). Nothing is written to the environment.
    """

    def __init__(self, session: Any) -> None:
        self._session = getattr(session, "_session", session)  # boto3.Session wraps a botocore Session
        self._credentials: Any = None

    async def get_identity(self, *, properties: Any = None) -> Any:
        """Return the current credentials as a ``smithy_aws_core.identity.AWSCredentialsIdentity``.

        Raises:
            smithy_core.exceptions.SmithyIdentityError: no credentials are configured, or a refresh failed.
        """
        from smithy_aws_core.identity import AWSCredentialsIdentity
        from smithy_core.exceptions import SmithyIdentityError

        try:
            if self._credentials is None:
                # The first lookup may call STS, SSO or the instance metadata service: keep it off the event loop.
                self._credentials = await asyncio.to_thread(self._session.get_credentials)
            if self._credentials is None:
                raise SmithyIdentityError(
                    "no AWS credentials found (environment, profiles, SSO, container or instance role); "
                    "run `aws configure` or `aws sso login`, or pass --profile"
                )
            refresh_needed = getattr(self._credentials, "refresh_needed", None)
            if callable(refresh_needed) and refresh_needed():
                frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
            else:
                frozen = self._credentials.get_frozen_credentials()
        except SmithyIdentityError:
            raise
        except Exception as error:  # botocore raises many types (NoCredentialsError, SSO token errors, ...)
            raise SmithyIdentityError(f"cannot load AWS credentials: {error}") from error
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key, secret_access_key=frozen.secret_key, session_token=frozen.token
        )

    async def invalidate(self) -> None:
        """Forget the cached provider so the next call runs the chain again."""
        self._credentials = None


def default_http_transport() -> Any:
    """An awscrt HTTP client that insists on HTTP/2 (needed for a duplex stream)."""
    from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

    return AWSCRTHTTPClient(client_config=AWSCRTHTTPClientConfig(force_http_2=True))


async def create_client(region: str, credentials_resolver: Any, *, http_transport: Any = None,
                        endpoint_uri: str | None = None) -> Any:
    """Build an ``AsyncSageMakerRuntimeHTTP2Client`` for ``region``.

    Args:
        region: AWS Region of the endpoint, e.g. ``us-east-1``.
        credentials_resolver: a Smithy identity resolver (normally :class:`BotocoreCredentialsResolver`).
        http_transport: the HTTP client; the default is :func:`default_http_transport`. Tests pass
            ``smithy_http.testing.MockHTTPClient``.
        endpoint_uri: override of :func:`bidi_endpoint_uri` (e.g. a VPC interface endpoint).
    """
    from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
    from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
    from smithy_aws_core.auth import SigV4AuthScheme
    from smithy_core.shapes import ShapeID

    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        region=region,
        endpoint_uri=endpoint_uri or bidi_endpoint_uri(region),
        transport=http_transport if http_transport is not None else default_http_transport(),
        aws_credentials_identity_resolver=credentials_resolver,
        auth_schemes={ShapeID("aws.auth#sigv4"): SigV4AuthScheme(service=SIGV4_SIGNING_NAME)},
    )
    return AsyncSageMakerRuntimeHTTP2Client(config=config)


def describe_error(error: BaseException, endpoint_name: str) -> RealtimeError:
    """Turn an SDK exception into a :class:`RealtimeError` that says what happened and what to try."""
    from aws_sdk_sagemaker_runtime_http2 import models

    name = type(error).__name__
    detail = getattr(error, "message", None) or str(error) or name
    if isinstance(error, models.ModelStreamError):
        code = getattr(error, "error_code", None)
        return RealtimeError(
            f"ModelStreamError from endpoint {endpoint_name!r} ({code}): {detail}. The container ended the stream; "
            "see the endpoint's CloudWatch logs (/aws/sagemaker/Endpoints/<name>)", code="ModelStreamError")
    if isinstance(error, models.InternalStreamFailure):
        return RealtimeError(
            f"InternalStreamFailure on endpoint {endpoint_name!r}: {detail}. SageMaker lost the stream; retry, and "
            "if it persists check the endpoint's health and AWS Health Dashboard", code="InternalStreamFailure")
    if isinstance(error, models.ModelError):
        status = getattr(error, "original_status_code", None)
        return RealtimeError(
            f"ModelError from endpoint {endpoint_name!r} (container status {status}): "
            f"{getattr(error, 'original_message', None) or detail}. Is the container healthy? See "
            f"{getattr(error, 'log_stream_arn', None) or 'the endpoint CloudWatch logs'}", code="ModelError")
    if isinstance(error, models.InputValidationError):
        return RealtimeError(
            f"SageMaker rejected the request for endpoint {endpoint_name!r}: {detail}. Check the endpoint name and "
            "Region (`aws sagemaker describe-endpoint --endpoint-name ...`) and that its container supports "
            "bidirectional streaming", code="InputValidationError")
    if isinstance(error, models.ServiceUnavailableError):
        return RealtimeError(f"SageMaker is unavailable for {endpoint_name!r}: {detail}. Retry in a moment",
                             code="ServiceUnavailableError")
    if isinstance(error, models.InternalServerError):
        return RealtimeError(f"SageMaker internal error for {endpoint_name!r}: {detail}. Retry in a moment",
                             code="InternalServerError")
    from smithy_core.exceptions import SmithyIdentityError

    if isinstance(error, SmithyIdentityError):
        return RealtimeError(f"AWS credentials problem: {detail}", code="credentials")
    status = getattr(getattr(error, "response_metadata", None), "status_code", None)
    if status == 403 or "AccessDenied" in name:
        return RealtimeError(
            f"access denied invoking {endpoint_name!r} ({detail}); the caller needs "
            "sagemaker:InvokeEndpointWithBidirectionalStream on the endpoint ARN", code="AccessDenied")
    return RealtimeError(f"calling endpoint {endpoint_name!r} failed ({name}: {detail})", code=name)


@dataclass
class SageMakerStreamTransport:
    """A :class:`~voicectl.realtime.RealtimeTransport` over one ``InvokeEndpointWithBidirectionalStream`` call."""

    stream: Any
    endpoint_name: str
    _output: Any = None
    _closed: bool = False

    @classmethod
    async def open(cls, client: Any, endpoint_name: str, *, target_variant: str | None = None) -> SageMakerStreamTransport:
        """Start a bidirectional stream to ``endpoint_name`` (optionally one ProductionVariant).

        Raises:
            RealtimeError: the call could not start (see :func:`describe_error`).
        """
        from aws_sdk_sagemaker_runtime_http2.models import InvokeEndpointWithBidirectionalStreamInput

        request = InvokeEndpointWithBidirectionalStreamInput(endpoint_name=endpoint_name, target_variant=target_variant)
        try:
            stream = await client.invoke_endpoint_with_bidirectional_stream(request)
        except Exception as error:
            raise describe_error(error, endpoint_name) from error
        return cls(stream=stream, endpoint_name=endpoint_name)

    async def send_text(self, text: str) -> None:
        """Send ``text`` as one UTF8 payload part.

        Raises:
            TransportClosed: the request stream can no longer be written (network drop or closed stream).
        """
        from aws_sdk_sagemaker_runtime_http2.models import RequestPayloadPart, RequestStreamEventPayloadPart

        event = RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=text.encode("utf-8"), data_type=PAYLOAD_DATA_TYPE))
        try:
            await self.stream.input_stream.send(event)
        except OSError as error:  # AWSEventPublisher wraps write failures in OSError
            raise TransportClosed(f"the request stream to {self.endpoint_name!r} is closed ({error.__cause__ or error})") from error

    async def receive_text(self) -> str | None:
        """Return the next complete response frame as text, or None at the end of the response stream.

        Raises:
            TransportClosed: the response stream broke (network drop).
            RealtimeError: SageMaker reported ModelStreamError, InternalStreamFailure or a call error.
        """
        from aws_sdk_sagemaker_runtime_http2.models import ResponseStreamEventPayloadPart

        frame = bytearray()
        while True:
            try:
                if self._output is None:
                    _, self._output = await self.stream.await_output()
                event = await self._output.receive()
            except OSError as error:  # AWSEventReceiver wraps read failures in OSError
                raise TransportClosed(f"the response stream from {self.endpoint_name!r} broke ({error.__cause__ or error})") from error
            except Exception as error:
                raise describe_error(error, self.endpoint_name) from error
            if event is None:
                if frame:
                    raise TransportClosed(f"the response stream ended inside a frame ({len(frame)} bytes)")
                return None
            if not isinstance(event, ResponseStreamEventPayloadPart):
                continue  # an event type newer than this SDK: nothing to deliver
            frame += event.value.bytes_ or b""
            if event.value.completion_state != PARTIAL:
                return frame.decode("utf-8")

    async def close(self) -> None:
        """Close the request stream (a signed empty frame ends it) and the response stream; idempotent."""
        if self._closed:
            return
        self._closed = True
        # Bounded: closing writes the end frame, which waits on a stuck connection forever otherwise.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.stream.input_stream.close(), CLOSE_TIMEOUT_S)
        if self._output is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._output.close(), CLOSE_TIMEOUT_S)
