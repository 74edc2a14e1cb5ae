"""Make the Sonic endpoint speak a text: :func:`synthesize` (the public way to call Sonic from your
own code; ``voicectl speak``, :mod:`voicectl.commands.speak`, writes its audio to a WAV file).

The request and response formats are described in :mod:`voice_client.sonic`; the call is boto3
``sagemaker-runtime`` ``invoke_endpoint_with_response_stream``, whose response ``Body`` yields
``PayloadPart`` events and raises ``ModelStreamError`` / ``InternalStreamFailure`` as
``EventStreamError`` (botocore ``eventstream.py``), while a ``ModelError`` of the call itself is a
``ClientError`` carrying ``OriginalStatusCode``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from voice_client.audio import PCM16_BYTES_PER_SAMPLE
from voice_client.errors import no_credentials_message
from voice_client.sonic import (
    MODEL_ERROR_HINTS,
    SonicAudio,
    SonicEventParser,
    SonicRequest,
    SonicStreamError,
    TruncatedStreamError,
    check_complete,
)

READ_TIMEOUT_S = 120
"""Seconds botocore waits for the next bytes of the response stream (long texts generate for a
while)."""


class SpeakError(Exception):
    """The Sonic call failed; the message says what happened and what to try."""


@dataclass
class SpeakResult:
    """Outcome of one Sonic call (:func:`synthesize`).

    Attributes:
        audio: the assembled events; ``audio.pcm16`` is 16-bit signed little-endian mono PCM (bytes;
            2 bytes per sample), ``audio.warnings`` what was odd about the stream.
        sample_rate_hz: sample rate of ``audio.pcm16`` in Hz (the request's).
        time_to_first_audio_s: seconds from the call to the first audio chunk (None when no audio
            came).
    """

    audio: SonicAudio
    sample_rate_hz: int
    time_to_first_audio_s: float | None

    @property
    def duration_s(self) -> float:
        """Seconds of audio received."""
        return len(self.audio.pcm16) / PCM16_BYTES_PER_SAMPLE / self.sample_rate_hz


def payload_parts(body: Iterable[dict[str, Any]], endpoint_name: str) -> Iterator[bytes]:
    """Yield the bytes of each ``PayloadPart`` of a boto3 response ``Body``, mapping stream errors
    to :class:`SpeakError`."""
    import botocore.exceptions
    import urllib3.exceptions

    try:
        for event in body:
            if "PayloadPart" in event:
                yield event["PayloadPart"].get("Bytes", b"")
            elif "ModelStreamError" in event or "InternalStreamFailure" in event:
                # botocore normally raises these; handle the dict form too, in case a caller parses
                # lazily.
                raise SpeakError(
                    describe_stream_error(
                        next(iter(event)), event[next(iter(event))], endpoint_name
                    )
                )
    except botocore.exceptions.EventStreamError as error:
        details = error.response.get("Error", {})
        raise SpeakError(
            describe_stream_error(details.get("Code", "stream error"), details, endpoint_name)
        ) from error
    except (botocore.exceptions.BotoCoreError, urllib3.exceptions.HTTPError) as error:
        # A read timeout (botocore ReadTimeoutError) or a connection cut mid-body (urllib3
        # ProtocolError).
        raise TruncatedStreamError(
            f"the connection broke while reading the response from {endpoint_name!r} "
            f"({type(error).__name__}: {error}); retry, and check the network or raise the read "
            "timeout for long texts"
        ) from error


def describe_stream_error(code: str, details: dict[str, Any], endpoint_name: str) -> str:
    """Message for a ModelStreamError / InternalStreamFailure in the response stream."""
    message = (details.get("Message") or details.get("message") or "").rstrip(".")
    if code == "InternalStreamFailure":
        return (
            f"InternalStreamFailure from endpoint {endpoint_name!r}: {message}. SageMaker lost "
            "the stream; retry, and check the endpoint's health if it persists"
        )
    # botocore keeps only Code and Message of an event stream exception; ErrorCode is there in the
    # dict form only.
    error_code = f" ({details['ErrorCode']})" if details.get("ErrorCode") else ""
    return (
        f"{code} from endpoint {endpoint_name!r}{error_code}: {message}. The container ended the "
        "stream; see the endpoint's CloudWatch logs"
    )


def describe_client_error(error: Any, endpoint_name: str) -> str:
    """Message for a botocore ``ClientError`` of the call (ModelError 422/429 get specific
    advice)."""
    response = error.response
    code = response.get("Error", {}).get("Code", "")
    message = (
        response.get("Error", {}).get("Message", str(error)).rstrip(".")
    )  # our sentences add their own
    if code == "ModelError":
        status = response.get("OriginalStatusCode")
        original = response.get("OriginalMessage") or message
        hint = MODEL_ERROR_HINTS.get(status, "see the endpoint's CloudWatch logs")
        return f"ModelError from endpoint {endpoint_name!r} (status {status}): {original}. {hint}"
    if code == "ValidationError":
        return (
            f"SageMaker rejected the call: {message}. Check the endpoint name and Region "
            "(`aws sagemaker list-endpoints`)"
        )
    if code in ("AccessDeniedException", "AccessDenied"):
        return (
            f"access denied: {message}. The caller needs "
            "sagemaker:InvokeEndpointWithResponseStream on the endpoint ARN"
        )
    return f"calling endpoint {endpoint_name!r} failed ({code}): {message}"


def synthesize(
    client: Any,
    endpoint_name: str,
    request: SonicRequest,
    clock: Callable[[], float] = time.monotonic,
    on_audio: Callable[[bytes], None] | None = None,
) -> SpeakResult:
    """Call the Sonic endpoint with ``request`` through boto3 ``client`` and assemble the audio.

    The public way to call Sonic from your own code (the README's example); ``voicectl speak`` uses
    it too.

    Args:
        client: a boto3 ``sagemaker-runtime`` client (``boto3.client("sagemaker-runtime")``; it
            honours ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` and ``AWS_CA_BUNDLE``).
            :func:`sagemaker_runtime_client` makes one with a read timeout suited to long texts.
        endpoint_name: the SageMaker EndpointName (the stack output ``SonicEndpointName``).
        request: the text, voice id, language and sample rate
            (:class:`voice_client.sonic.SonicRequest`).
        clock: monotonic clock in seconds (tests inject their own).
        on_audio: called with each chunk's PCM16 as it arrives (to play the speech while it
            streams).

    Returns:
        A :class:`SpeakResult` once the stream has ended with Sonic's ``done`` event.

    Raises:
        SpeakError: the call or the stream failed (ModelError 422/429, stream errors, credentials).
        SonicStreamError / TruncatedStreamError: the events were malformed, an ``error`` event, or
            the stream was cut; ``.audio`` holds the audio decoded before the failure.
    """
    import botocore.exceptions

    start = clock()
    try:
        response = client.invoke_endpoint_with_response_stream(
            **request.invoke_kwargs(endpoint_name)
        )
    except botocore.exceptions.ClientError as error:
        raise SpeakError(describe_client_error(error, endpoint_name)) from error
    except botocore.exceptions.NoCredentialsError as error:
        raise SpeakError(no_credentials_message(error)) from error
    except botocore.exceptions.BotoCoreError as error:
        raise SpeakError(f"calling endpoint {endpoint_name!r} failed: {error}") from error
    parser, audio = SonicEventParser(), SonicAudio()
    first_audio_at: float | None = None
    try:
        for part in payload_parts(response["Body"], endpoint_name):
            for event in parser.feed(part):
                before = len(audio.pcm16)
                if audio.add(event):
                    if first_audio_at is None:
                        first_audio_at = clock()
                    if on_audio is not None:
                        on_audio(bytes(audio.pcm16[before:]))
    except SonicStreamError as error:
        raise type(error)(str(error), bytes(audio.pcm16)) from error
    check_complete(parser, audio)
    return SpeakResult(
        audio=audio,
        sample_rate_hz=request.sample_rate_hz,
        time_to_first_audio_s=None if first_audio_at is None else first_audio_at - start,
    )


def sagemaker_runtime_client(
    profile: str | None, region: str | None, endpoint_url: str | None = None
) -> Any:
    """A boto3 ``sagemaker-runtime`` client with a read timeout suited to streamed speech.

    ``endpoint_url`` overrides botocore's endpoint resolution (which already honours
    ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` and the profile's ``services`` section).
    """
    from botocore.config import Config

    from voice_client.aws import aws_session

    session = aws_session(profile, region)
    return session.client(
        "sagemaker-runtime", endpoint_url=endpoint_url, config=Config(read_timeout=READ_TIMEOUT_S)
    )
