"""Where the endpoints are: :class:`VoxtralTarget` (SageMaker bidirectional streaming or the ECS
target's WebSocket) and :class:`SonicTarget` (SageMaker ``InvokeEndpointWithResponseStream``).

Credentials come from botocore's standard chain (environment, profiles, SSO, the ECS container
credential provider ``AWS_CONTAINER_CREDENTIALS_FULL_URI``/``_RELATIVE_URI``, the instance profile),
not from ``AWS_ACCESS_KEY_ID`` only; ``endpoint_url`` reaches a VPC interface endpoint or a local
runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from voice_client.realtime.auth import BearerToken
from voice_client.realtime.transport import TransportOpener


@dataclass(frozen=True)
class VoxtralTarget:
    """A Voxtral endpoint: ``endpoint_name`` (SageMaker) or ``url`` (the ECS target's bridge),
    exactly one.

    Attributes:
        endpoint_name: the SageMaker EndpointName (stack output ``VoxtralEndpointName``).
        region: AWS Region; None = ``AWS_REGION``/``AWS_DEFAULT_REGION`` or the profile's.
        profile: AWS profile; None = the default chain.
        endpoint_url: the bidirectional runtime's URL (``https://HOST:8443``: a VPC interface
            endpoint, a local runtime); None = ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` or the
            Region's.
        url: the ECS target's WebSocket URL (``wss://<load
            balancer>/invocations-bidirectional-stream``).
        token: the bearer token the ECS target requires (:class:`BearerToken`; its value is never
            printed).
    """

    endpoint_name: str | None = None
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    url: str | None = None
    token: BearerToken | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.endpoint_name is None) == (self.url is None):
            raise ValueError(
                "a Voxtral target is either a SageMaker endpoint (endpoint_name=...) "
                "or the ECS target's WebSocket (url=..., token=...), exactly one of "
                "them"
            )
        if self.url is not None and not self.url.startswith(("ws://", "wss://")):
            raise ValueError(
                f"url {self.url!r} is not a WebSocket URL; use "
                "wss://HOST/invocations-bidirectional-stream (the ECS stack's output)"
            )

    @property
    def name(self) -> str:
        """The endpoint name or URL, for messages."""
        return self.endpoint_name or str(self.url)

    @contextlib.asynccontextmanager
    async def opener(self) -> AsyncIterator[TransportOpener]:
        """Yield a :data:`TransportOpener` of new streams to the target; its clients are closed on
        exit.

        Raises:
            RealtimeError: no usable AWS credentials (code ``credentials``).
            voice_client.errors.UsageError: no Region, an unknown profile, or a CA bundle that is
                not a file.
        """
        if self.url is not None:
            from voice_client.realtime.websocket import WebSocketTransport

            url, token = self.url, self.token

            async def open_websocket() -> WebSocketTransport:
                return await WebSocketTransport.connect(url, token=token)

            yield open_websocket
            return
        import asyncio

        from voice_client.sagemaker_client import ignore_completed_stream_writes
        from voice_client.sagemaker_stream import open_endpoint

        assert self.endpoint_name is not None
        # A refused stream would otherwise leave awscrt's AWS_ERROR_HTTP_STREAM_HAS_COMPLETED
        # traceback at exit.
        ignore_completed_stream_writes(asyncio.get_running_loop())
        async with open_endpoint(
            self.endpoint_name,
            region=self.region,
            profile=self.profile,
            endpoint_url=self.endpoint_url,
        ) as open_stream:
            yield open_stream


@dataclass(frozen=True)
class SonicTarget:
    """A Sonic endpoint on SageMaker.

    Attributes:
        endpoint_name: the SageMaker EndpointName (stack output ``SonicEndpointName``).
        region: AWS Region; None = ``AWS_REGION``/``AWS_DEFAULT_REGION`` or the profile's.
        profile: AWS profile; None = the default chain.
        endpoint_url: the runtime's URL (a VPC interface endpoint, a local runtime); None =
            ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` or the Region's.
    """

    endpoint_name: str
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None

    def __post_init__(self) -> None:
        if not self.endpoint_name.strip():
            raise ValueError(
                "the Sonic endpoint name is empty; pass the stack output SonicEndpointName"
            )
