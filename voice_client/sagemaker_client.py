"""The SDK client of SageMaker's bidirectional streams (``aws-sdk-sagemaker-runtime-http2``, the
Smithy-generated async client; API reference:
https://docs.aws.amazon.com/sdk-for-python/v1/reference/clients/sagemaker-runtime-http2/), built
with these choices (:mod:`voice_client.sagemaker_stream` opens its streams):

- Transport: ``smithy_http.aio.crt.AWSCRTHTTPClient`` (awscrt) forced to HTTP/2. The package's
  default transport (aiohttp) cannot stream a request body while reading the response; smithy-core
  refuses it for duplex operations (``SUPPORTS_DUPLEX_STREAMING``, ``smithy_core/aio/client.py``).
- Endpoint: ``https://runtime.sagemaker.<region>.amazonaws.com:8443``. Bidirectional streams are
  served on port 8443, not on the runtime's usual 443 (AWS ML blog "Introducing bidirectional
  streaming for real-time inference on Amazon SageMaker AI", 2025-11; request path
  ``/endpoints/<EndpointName>/invocations-bidirectional-stream``).
- Signing: SigV4 for the ``sagemaker`` signing name (the service model's ``sigV4ServiceName``); each
  event of the request stream is signed too (``smithy_aws_event_stream.aio.AWSEventPublisher``).
- Credentials: :class:`BotocoreCredentialsResolver` adapts botocore's standard provider chain
  (environment, shared config and credentials files with profiles, SSO, assume-role, web identity,
  credential_process, ECS container and EC2 instance roles) and its automatic refresh of temporary
  credentials. The SDK's own chain covers only environment, static profile keys and
  credential_process unless extra packages are installed, so we reuse botocore's (which boto3
  already brings) rather than copy credentials into the environment.
"""

from __future__ import annotations

import asyncio
from typing import Any

from voice_client.errors import no_credentials_message
from voice_client.realtime import RealtimeError

BIDI_PORT = 8443
"""Port of SageMaker's bidirectional streaming runtime endpoint (AWS blog cited in the module
docstring)."""

SIGV4_SIGNING_NAME = "sagemaker"
"""SigV4 signing name of SageMaker Runtime HTTP2 (service model ``sigV4ServiceName``)."""

CREDENTIALS_TIMEOUT_S = 60.0
"""Seconds allowed to resolve credentials (the chain may call STS, SSO or the instance metadata
service)."""


def bidi_endpoint_uri(region: str) -> str:
    """Runtime URI for bidirectional streams in ``region`` (e.g.
    ``https://runtime.sagemaker.us-east-1.amazonaws.com:8443``)."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{BIDI_PORT}"


class BotocoreCredentialsResolver:
    """Smithy identity resolver backed by botocore's credential provider chain (with refresh).

    ``session`` is a ``botocore.session.Session`` (or ``boto3.Session``); credentials are looked up
    once, then ``get_frozen_credentials()`` is called per signature, which refreshes temporary
    credentials shortly before they expire (botocore ``RefreshableCredentials``). Nothing is written
    to the environment.
    """

    def __init__(self, session: Any) -> None:
        self._session = getattr(
            session, "_session", session
        )  # boto3.Session wraps a botocore Session
        self._credentials: Any = None

    async def get_identity(self, *, properties: Any = None) -> Any:
        """Return the current credentials as a ``smithy_aws_core.identity.AWSCredentialsIdentity``.

        Raises:
            smithy_core.exceptions.SmithyIdentityError: no credentials are configured, or a refresh
                failed.
        """
        from smithy_aws_core.identity import AWSCredentialsIdentity
        from smithy_core.exceptions import SmithyIdentityError

        try:
            if self._credentials is None:
                # The first lookup may call STS, SSO or the instance metadata service: keep it off
                # the event loop.
                self._credentials = await asyncio.to_thread(self._session.get_credentials)
            if self._credentials is None:
                raise SmithyIdentityError(
                    "none found in the environment, profiles, SSO, container or instance role"
                )
            refresh_needed = getattr(self._credentials, "refresh_needed", None)
            if callable(refresh_needed) and refresh_needed():
                frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
            else:
                frozen = self._credentials.get_frozen_credentials()
        except SmithyIdentityError:
            raise
        except (
            Exception
        ) as error:  # botocore raises many types (NoCredentialsError, SSO token errors, ...)
            raise SmithyIdentityError(f"cannot load AWS credentials: {error}") from error
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key,
            secret_access_key=frozen.secret_key,
            session_token=frozen.token,
        )

    async def invalidate(self) -> None:
        """Forget the cached provider so the next call runs the chain again."""
        self._credentials = None


async def resolve_credentials(
    resolver: BotocoreCredentialsResolver, timeout_s: float = CREDENTIALS_TIMEOUT_S
) -> None:
    """Resolve ``resolver``'s identity once, before any stream opens.

    smithy-core 0.9 does not report an identity failure on a duplex stream: ``duplex_stream`` awaits
    a request future that is only completed after signing (``smithy_core/aio/client.py``), so the
    call would hang forever.

    Raises:
        RealtimeError: no credentials, an expired SSO token, or a lookup slower than ``timeout_s``
            (code ``credentials``), with what to run.
    """
    from smithy_core.exceptions import SmithyIdentityError

    try:
        await asyncio.wait_for(resolver.get_identity(properties={}), timeout_s)
    except SmithyIdentityError as error:
        raise RealtimeError(no_credentials_message(error), code="credentials") from error
    except TimeoutError:
        raise RealtimeError(
            f"resolving AWS credentials took more than {timeout_s:.0f} s; check the profile's "
            "credential source (SSO, role, instance metadata)",
            code="credentials",
        ) from None


def default_http_transport(ca_bundle: str | None = None) -> Any:
    """An awscrt HTTP client that insists on HTTP/2 (needed for a duplex stream).

    ``ca_bundle`` (a PEM file of certificate authorities, as ``AWS_CA_BUNDLE`` or a profile's
    ``ca_bundle`` names it) replaces the system's trust store, as it does for botocore: for a
    TLS-inspecting proxy, or a local runtime (``voicectl local-runtime``).

    Raises:
        awscrt.exceptions.AwsCrtError: ``ca_bundle`` cannot be read as PEM certificates.
    """
    from awscrt import io as crt_io
    from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

    client = AWSCRTHTTPClient(client_config=AWSCRTHTTPClientConfig(force_http_2=True))
    if ca_bundle:
        options = crt_io.TlsContextOptions()
        options.override_default_trust_store_from_path(None, ca_bundle)
        # smithy-http 0.6 takes no TLS settings (a TODO in smithy_http/aio/crt.py): replace the TLS
        # context it made.
        client._tls_ctx = crt_io.ClientTlsContext(options)
    return client


def ca_bundle_of(session: Any) -> str | None:
    """The CA bundle botocore would use for ``session`` (``AWS_CA_BUNDLE``, or the profile's
    ``ca_bundle``), if any."""
    return getattr(session, "_session", session).get_config_variable("ca_bundle")


_CRT_STREAM_COMPLETED = "AWS_ERROR_HTTP_STREAM_HAS_COMPLETED"


def ignore_completed_stream_writes(loop: asyncio.AbstractEventLoop) -> None:
    """Keep awscrt's background request-body task from printing a traceback when the service ends
    the stream first.

    When SageMaker answers an error (a ModelError, an unknown endpoint, a refused signature) while
    the request stream is open, awscrt's task writing the request body fails with
    ``AWS_ERROR_HTTP_STREAM_HAS_COMPLETED`` and nobody awaits it, so asyncio prints "Task exception
    was never retrieved" after the error has been reported properly. Only that failure is dropped;
    every other unhandled error still reaches the previous handler.
    """
    previous = loop.get_exception_handler()
    if getattr(previous, "ignores_completed_stream_writes", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if error is not None and _CRT_STREAM_COMPLETED in f"{error} {getattr(error, 'name', '')}":
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.ignores_completed_stream_writes = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


async def create_client(
    region: str,
    credentials_resolver: Any,
    *,
    http_transport: Any = None,
    endpoint_uri: str | None = None,
    ca_bundle: str | None = None,
    profile: str | None = None,
) -> Any:
    """Build an ``AsyncSageMakerRuntimeHTTP2Client`` for ``region``.

    Args:
        region: AWS Region of the endpoint, e.g. ``us-east-1``.
        credentials_resolver: a Smithy identity resolver (normally
            :class:`BotocoreCredentialsResolver`).
        http_transport: the HTTP client; the default is :func:`default_http_transport`. Tests pass
            ``smithy_http.testing.MockHTTPClient``.
        endpoint_uri: the runtime's URL (``--endpoint-url``: a VPC interface endpoint's DNS name
            with port 8443, a local runtime). Without it the SDK's standard settings apply
            (``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2``, ``AWS_ENDPOINT_URL``, the profile's
            ``services`` section or ``endpoint_url``), else :func:`bidi_endpoint_uri`.
        ca_bundle: certificate authorities to trust instead of the system's (see
            :func:`default_http_transport`).
        profile: the AWS profile whose configuration file settings apply.
    """
    from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
    from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
    from smithy_aws_core.auth import SigV4AuthScheme
    from smithy_core.shapes import ShapeID

    overrides: dict[str, Any] = {"endpoint_uri": endpoint_uri} if endpoint_uri else {}
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        profile=profile,
        region=region,
        transport=http_transport
        if http_transport is not None
        else default_http_transport(ca_bundle),
        aws_credentials_identity_resolver=credentials_resolver,
        auth_schemes={ShapeID("aws.auth#sigv4"): SigV4AuthScheme(service=SIGV4_SIGNING_NAME)},
        **overrides,
    )
    if (
        not config.endpoint_uri
    ):  # the SDK's own default is the runtime on port 443; streams are served on 8443
        config.endpoint_uri = bidi_endpoint_uri(region)
    ignore_completed_stream_writes(asyncio.get_running_loop())
    return AsyncSageMakerRuntimeHTTP2Client(config=config)
