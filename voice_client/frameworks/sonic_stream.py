"""Sonic for voice agents: one ``InvokeEndpointWithResponseStream`` call per sentence, its audio
yielded as it arrives, the call closed as soon as the caller stops reading (an interruption).

The call is made with aiohttp and botocore's SigV4 signer rather than boto3's client: boto3's
response stream is read by a blocking thread, which cannot be stopped mid-read when the agent is
interrupted, while closing an aiohttp response closes its connection at once, so SageMaker (and the
container behind it) sees the request end.

The request is :class:`voice_client.sonic.SonicRequest` (Cartesia's body); the response is read
with the project's Sonic parser (:class:`~voice_client.sonic.SonicEventParser`:
newline-delimited JSON and Server-Sent Events framing, split or packed across payload parts).
SageMaker's side (SageMaker API Reference, InvokeEndpointWithResponseStream): ``POST
/endpoints/{EndpointName}/invocations-response-stream``, ``Content-Type`` and
``X-Amzn-SageMaker-Accept`` headers, signed for the service ``sagemaker``; the answer is an AWS
event stream of ``PayloadPart`` events (the part's ``Bytes`` is the event payload) and modeled
exceptions ``ModelStreamError`` and ``InternalStreamFailure``; a refused call is a JSON error named
by ``X-Amzn-ErrorType`` (``ModelError`` carries the container's ``OriginalStatusCode``: 422
malformed input, 429 no free generation slot, per Cartesia's listing).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

from voice_client.frameworks.targets import SonicTarget
from voice_client.sonic import (
    MODEL_ERROR_HINTS,
    SonicAudio,
    SonicEventParser,
    SonicRequest,
    SonicStreamError,
    check_complete,
)

SIGNING_NAME = "sagemaker"
"""The SigV4 service name of the SageMaker runtime (botocore's ``sagemaker-runtime`` model,
``signingName``)."""

CONNECT_TIMEOUT_S = 10.0
"""Seconds allowed for the TCP and TLS connection to the runtime."""

READ_TIMEOUT_S = 60.0
"""Seconds the response may stay silent (SageMaker gives a container 60 s to answer: "A customer's
model containers must respond to requests within 60 seconds", InvokeEndpoint)."""

MAX_ERROR_BODY_BYTES = 16 * 1024
"""Bytes of a refused call's body read for its message."""

DEFAULT_VOICE_LANGUAGE = "en"

CREDENTIAL_REFUSALS = (
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
)
"""SageMaker's error names for credentials it refused."""

PERMANENT_CODES = frozenset(
    {
        "ValidationError",
        "AccessDeniedException",
        "AccessDenied",
        "credentials",
        *CREDENTIAL_REFUSALS,
    }
) - {"ExpiredTokenException"}
"""Refusals every later request would get too (an unknown endpoint, credentials or a permission
refused): the caller stops sending. Not an expired token (the credential chain renews it), nor
Sonic's 422 (that sentence) or 429 (a busy moment)."""


class SonicError(Exception):
    """A Sonic request failed; the message names the cause and what to try.

    Attributes:
        status: the container's HTTP status of a ``ModelError`` (422, 429, ...), else None.
        code: SageMaker's error name (``ModelError``, ``ValidationError``, ``ModelStreamError``,
            ...), ``stream`` for a malformed or truncated response, ``credentials`` when none could
            be loaded.
    """

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    @property
    def permanent(self) -> bool:
        """Whether every later request would be refused alike (:data:`PERMANENT_CODES`)."""
        return self.code in PERMANENT_CODES


class SonicSynthesizer:
    """Speaks sentences through a Sonic endpoint (:meth:`stream`), one request each.

    Args:
        target: the endpoint, Region, profile and optional runtime URL.
        voice_id: a Cartesia voice ID.
        language: a language code Sonic accepts (:data:`voice_client.sonic.SONIC_LANGUAGES`).
        clock: monotonic clock in seconds.

    Attributes:
        last_time_to_first_audio_s: seconds from sending the last request to its first audio (None
            before any).
        closed_early: requests whose response was closed before its ``done`` event (interruptions).
    """

    def __init__(
        self,
        target: SonicTarget,
        *,
        voice_id: str,
        language: str = DEFAULT_VOICE_LANGUAGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        SonicRequest("check", voice_id, language)  # the voice and language are checked once, here
        self.target = target
        self.voice_id = voice_id
        self.language = language
        self.clock = clock
        self.last_time_to_first_audio_s: float | None = None
        self.closed_early = 0
        self._credentials: Any = None
        self._region = ""
        self._url = ""
        self._ssl: ssl.SSLContext | None = None
        self._http: Any = None

    async def start(self) -> None:
        """Load the credential chain, resolve the runtime's URL and open the HTTP session
        (idempotent).

        Raises:
            SonicError: no usable AWS credentials (code ``credentials``).
            voice_client.errors.UsageError: no Region, an unknown profile.
        """
        if self._http is not None:
            return
        import aiohttp

        from voice_client.aws import aws_session
        from voice_client.errors import no_credentials_message
        from voice_client.sagemaker_client import ca_bundle_of

        session = aws_session(self.target.profile, self.target.region)
        credentials = await asyncio.to_thread(session.get_credentials)
        if credentials is None:
            raise SonicError(
                no_credentials_message("botocore's credential chain found none"), code="credentials"
            )
        runtime = session.client("sagemaker-runtime", endpoint_url=self.target.endpoint_url)
        self._credentials, self._region = credentials, session.region_name
        self._url = (
            f"{runtime.meta.endpoint_url.rstrip('/')}/endpoints/"
            f"{quote(self.target.endpoint_name, safe='')}/invocations-response-stream"
        )
        ca_bundle = ca_bundle_of(session)
        self._ssl = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S
            )
        )

    async def aclose(self) -> None:
        """Close the HTTP session (idempotent)."""
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def stream(self, text: str, sample_rate_hz: int) -> AsyncGenerator[bytes, None]:
        """Speak ``text``: yield its PCM16 mono audio at ``sample_rate_hz`` as Sonic sends it.

        Closing the generator (``aclose``, or cancelling the task reading it) closes the request's
        connection.

        Raises:
            SonicError: the call was refused (``ModelError`` 422/429 with their cause, an unknown
                endpoint, refused credentials), the stream failed, or the response was malformed or
                ended before ``done``.
            ValueError: ``sample_rate_hz`` is not a rate Sonic offers, or the text is empty.
        """
        request = SonicRequest(text, self.voice_id, self.language, sample_rate_hz)
        await self.start()
        body = json.dumps(request.body()).encode()
        headers = await self._signed_headers(body)
        started = self.clock()
        finished = False
        response = await self._post(body, headers)
        try:
            if response.status != 200:
                raise await self._refusal(response)
            parser, audio = SonicEventParser(), SonicAudio()
            first = True
            async for part in _payload_parts(response, self.target.endpoint_name):
                try:
                    events = parser.feed(part)
                    for event in events:
                        before = len(audio.pcm16)
                        if audio.add(event) and len(audio.pcm16) > before:
                            if first:
                                first = False
                                self.last_time_to_first_audio_s = self.clock() - started
                            yield bytes(audio.pcm16[before:])
                except SonicStreamError as error:
                    raise self._malformed(error) from None
            try:
                check_complete(parser, audio)
            except SonicStreamError as error:
                raise self._malformed(error) from None
            finished = True
        finally:
            if not finished and response.status == 200:
                self.closed_early += 1
            response.close()  # closes the connection unless the body was read to its end

    def _malformed(self, error: SonicStreamError) -> SonicError:
        return SonicError(f"Sonic endpoint {self.target.endpoint_name!r}: {error}", code="stream")

    async def _post(self, body: bytes, headers: dict[str, str]) -> Any:
        import aiohttp

        try:
            return await self._http.post(
                self._url, data=body, headers=headers, ssl=self._ssl or True
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise SonicError(
                f"cannot reach the SageMaker runtime at {self._url} "
                f"({type(error).__name__}: {error}); check the network path (VPC "
                "endpoint, proxy) and endpoint_url",
                code="connect_failed",
            ) from None

    async def _signed_headers(self, body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
        aws_request = AWSRequest(
            method="POST",
            url=self._url,
            data=body,
            headers={
                "Content-Type": "application/json",
                "X-Amzn-SageMaker-Accept": "text/event-stream",
            },
        )
        SigV4Auth(frozen, SIGNING_NAME, self._region).add_auth(aws_request)
        return dict(aws_request.headers.items())

    async def _refusal(self, response: Any) -> SonicError:
        name = self.target.endpoint_name
        raw = await response.content.read(MAX_ERROR_BODY_BYTES)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        code = (
            response.headers.get("x-amzn-errortype", "").split(":")[0]
            or body.get("__type")
            or "HTTP error"
        )
        text = body.get("message") or body.get("Message") or raw[:200].decode("utf-8", "replace")
        message = str(text).rstrip(".")
        if code == "ModelError":
            status = body.get("OriginalStatusCode")
            original = body.get("OriginalMessage") or message
            default_hint = "see the endpoint's CloudWatch logs"
            hint = (
                MODEL_ERROR_HINTS.get(status, default_hint)
                if isinstance(status, int)
                else default_hint
            )
            return SonicError(
                f"Sonic endpoint {name!r} refused the request: ModelError (status "
                f"{status}): {original}. {hint}",
                status=status if isinstance(status, int) else None,
                code=code,
            )
        if code == "ValidationError":
            hint = "check the endpoint name and Region (`aws sagemaker list-endpoints`)"
        elif code in CREDENTIAL_REFUSALS:
            hint = (
                "the AWS credentials were refused: check the identity "
                "(`aws sts get-caller-identity`)"
            )
        elif code in ("AccessDeniedException", "AccessDenied"):
            hint = "the caller needs sagemaker:InvokeEndpointWithResponseStream on the endpoint ARN"
        else:
            hint = f"HTTP {response.status}"
        return SonicError(
            f"Sonic endpoint {name!r} refused the request: {code}: {message}; {hint}", code=code
        )


async def _payload_parts(response: Any, endpoint_name: str) -> AsyncIterator[bytes]:
    """The ``Bytes`` of each ``PayloadPart`` event of the response's AWS event stream.

    Raises:
        SonicError: a ``ModelStreamError`` or ``InternalStreamFailure``, an error message, or a
            broken connection.
    """
    import aiohttp
    from botocore.eventstream import EventStreamBuffer, ParserError

    buffer = EventStreamBuffer()
    try:
        async for data in response.content.iter_any():
            buffer.add_data(data)
            for message in buffer:
                headers = message.headers
                kind = headers.get(":message-type")
                if kind == "event" and headers.get(":event-type") == "PayloadPart":
                    yield message.payload
                elif kind == "exception":
                    name = headers.get(":exception-type", "stream exception")
                    try:
                        details = json.loads(message.payload or b"{}")
                    except ValueError:
                        details = {}
                    error_code = f" ({details['ErrorCode']})" if details.get("ErrorCode") else ""
                    raise SonicError(
                        f"{name} from Sonic endpoint {endpoint_name!r}{error_code}: "
                        f"{details.get('Message', '')}; the stream ended, see the "
                        "endpoint's CloudWatch logs",
                        code=name,
                    )
                elif kind == "error":
                    code = str(headers.get(":error-code"))
                    raise SonicError(
                        f"the stream from Sonic endpoint {endpoint_name!r} failed: "
                        f"{code}: {headers.get(':error-message')}",
                        code=code,
                    )
    except ParserError as error:
        raise SonicError(
            f"the response of Sonic endpoint {endpoint_name!r} is not an AWS event "
            f"stream ({error})",
            code="stream",
        ) from None
    except (aiohttp.ClientError, TimeoutError) as error:
        raise SonicError(
            f"the connection broke while reading Sonic endpoint {endpoint_name!r} "
            f"({type(error).__name__}: {error})",
            code="stream",
        ) from None
