"""``voicectl speak``: make the Sonic endpoint speak a text and write the audio to a WAV file.

    voicectl speak TEXT --endpoint NAME --voice ID [--language en] [--sample-rate 44100]
        [--endpoint-url URL] --out FILE.wav

TEXT ``-`` reads the text from stdin. The request and response formats are described in
:mod:`voice_client.sonic`; the call is boto3 ``sagemaker-runtime``
``invoke_endpoint_with_response_stream``, whose response ``Body`` yields ``PayloadPart`` events and
raises ``ModelStreamError`` / ``InternalStreamFailure`` as ``EventStreamError`` (botocore
``eventstream.py``), while a ``ModelError`` of the call itself is a ``ClientError`` carrying
``OriginalStatusCode``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voice_client.audio import PCM16_BYTES_PER_SAMPLE, pcm16_to_wav_bytes
from voice_client.errors import UsageError, no_credentials_message
from voice_client.sonic import (
    DEFAULT_SAMPLE_RATE_HZ,
    MAX_AUDIO_BYTES,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    MODEL_ERROR_HINTS,
    SONIC_SAMPLE_RATES_HZ,
    SonicAudio,
    SonicEventParser,
    SonicRequest,
    SonicStreamError,
    TruncatedStreamError,
    check_complete,
)

EXIT_FAILED = 1

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


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``speak`` subcommand."""
    parser = subparsers.add_parser(
        "speak",
        help="make the Sonic endpoint speak a text into a WAV file",
        description=(
            "Make the Sonic endpoint speak TEXT and write the audio to a 16-bit "
            "WAV file; reports the duration and the time to first audio. Limits on "
            f"what the endpoint sends: one event at most {MAX_EVENT_BYTES:,} bytes "
            f"(MAX_EVENT_BYTES) nested at most {MAX_EVENT_DEPTH} levels deep, at most "
            f"{MAX_AUDIO_BYTES:,} bytes of audio (MAX_AUDIO_BYTES); beyond them, and on "
            "an error event, the command ends with exit code 1 and one line on stderr "
            "(the audio received so far is written)."
        ),
    )
    parser.add_argument("text", metavar="TEXT", help="the text to speak; - reads it from stdin")
    parser.add_argument(
        "--endpoint",
        required=True,
        metavar="NAME",
        help="SageMaker endpoint name (the Sonic endpoint)",
    )
    parser.add_argument("--voice", required=True, metavar="ID", help="Cartesia voice ID")
    parser.add_argument("--language", default="en", help="language code of the text (default: en)")
    parser.add_argument(
        "--sample-rate",
        type=int,
        default=DEFAULT_SAMPLE_RATE_HZ,
        metavar="HZ",
        help=f"output sample rate, one of {', '.join(map(str, SONIC_SAMPLE_RATES_HZ))} "
        f"(default: {DEFAULT_SAMPLE_RATE_HZ})",
    )
    parser.add_argument(
        "--out", required=True, metavar="FILE.wav", help="WAV file to write (overwritten)"
    )
    parser.add_argument(
        "--region",
        help="AWS Region of the endpoint (default: AWS_REGION, AWS_DEFAULT_REGION, then the "
        "profile's)",
    )
    parser.add_argument(
        "--profile", help="AWS named profile (default: the standard credential chain)"
    )
    parser.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="SageMaker runtime URL, e.g. a VPC interface endpoint "
        "(https://vpce-...runtime.sagemaker.REGION.vpce.amazonaws.com) or a local runtime "
        "(https://localhost:8443); default: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, AWS_ENDPOINT_URL, "
        "else the Region's runtime. AWS_CA_BUNDLE names extra certificate authorities to trust",
    )
    parser.set_defaults(func=run)


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


def check_writable(out: Path) -> None:
    """Check that ``out`` can be written as a file, before paying for synthesis.

    Raises:
        UsageError: ``out`` is a directory, its directory is missing, or either cannot be written.
    """
    if out.is_dir():
        raise UsageError(
            f"--out {out} is a directory; give a file path such as {out / 'speech.wav'}"
        )
    parent = out.parent
    if not parent.is_dir():
        raise UsageError(f"--out {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UsageError(
            f"--out {out}: cannot write there (permission denied); choose another path"
        )


def write_output(out: Path, pcm16: bytes, sample_rate_hz: int) -> bytes:
    """Write ``pcm16`` to ``out`` as a WAV through a temporary file renamed into place; return what
    was written.

    A final odd byte (half a sample: the stream was cut inside a sample) is dropped with a warning
    on stderr. The rename is atomic on one filesystem, so ``out`` is never left half-written.
    """
    if len(pcm16) % PCM16_BYTES_PER_SAMPLE:
        print(
            "voicectl speak: warning: the audio ended with an odd number of bytes (half a "
            "sample); dropped the last byte",
            file=sys.stderr,
        )
        pcm16 = pcm16[:-1]
    descriptor, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(pcm16_to_wav_bytes(pcm16, sample_rate_hz))
        os.replace(temporary, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return pcm16


def run(args: argparse.Namespace, client: Any = None) -> int:
    """Entry point of ``voicectl speak``; returns the exit code. ``client`` is injectable for
    tests."""
    with contextlib.ExitStack() as stack:
        return _run(args, client, stack)


def _run(args: argparse.Namespace, client: Any, stack: contextlib.ExitStack) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        request = SonicRequest(
            transcript=text,
            voice_id=args.voice,
            language=args.language,
            sample_rate_hz=args.sample_rate,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    out = Path(args.out)
    check_writable(out)
    endpoint_url = getattr(args, "endpoint_url", None)
    if endpoint_url is not None:
        from voice_client.transcribe import validate_endpoint_url

        validate_endpoint_url(endpoint_url)
    if client is None:
        client = sagemaker_runtime_client(args.profile, args.region, endpoint_url)
        stack.callback(
            client.close
        )  # release the pooled HTTPS connection now, not at garbage collection
    try:
        result = synthesize(client, args.endpoint, request)
    except SpeakError as error:
        print(f"voicectl speak: {error}", file=sys.stderr)
        return EXIT_FAILED
    except SonicStreamError as error:
        kept = ""
        if error.audio:
            pcm16 = write_output(out, error.audio, request.sample_rate_hz)
            seconds = len(pcm16) / PCM16_BYTES_PER_SAMPLE / request.sample_rate_hz
            kept = f"; wrote the {seconds:.2f} s received before the failure to {out}"
        label = "truncated stream" if isinstance(error, TruncatedStreamError) else "bad response"
        print(f"voicectl speak: {label}: {error}{kept}", file=sys.stderr)
        return EXIT_FAILED
    for warning in result.audio.warnings:
        print(f"voicectl speak: warning: {warning}", file=sys.stderr)
    write_output(out, bytes(result.audio.pcm16), result.sample_rate_hz)
    ttfa = (
        "n/a" if result.time_to_first_audio_s is None else f"{result.time_to_first_audio_s:.3f} s"
    )
    print(
        f"wrote {out}: {result.duration_s:.2f} s of audio at {result.sample_rate_hz} Hz "
        f"(context_id {request.context_id}); time to first audio: {ttfa}",
        file=sys.stderr,
    )
    return 0
