"""``voicectl speak``: make the Sonic endpoint speak a text and write the audio to a WAV file.

    voicectl speak TEXT --endpoint NAME --voice ID [--language en] [--sample-rate 44100]
        [--endpoint-url URL] --out FILE.wav

TEXT ``-`` reads the text from stdin. The call itself: :func:`voice_client.speak.synthesize`; this
module checks ``--out`` before paying for synthesis and writes the WAV atomically.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from voice_client.audio import PCM16_BYTES_PER_SAMPLE, pcm16_to_wav_bytes
from voice_client.errors import UsageError
from voice_client.sonic import (
    DEFAULT_SAMPLE_RATE_HZ,
    MAX_AUDIO_BYTES,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    SONIC_SAMPLE_RATES_HZ,
    SonicRequest,
    SonicStreamError,
    TruncatedStreamError,
)
from voice_client.speak import SpeakError, sagemaker_runtime_client, synthesize
from voice_client.transcribe import validate_endpoint_url

EXIT_FAILED = 1
"""Exit code when the call or the stream failed (usage errors exit 2)."""


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
    endpoint_url = args.endpoint_url
    if endpoint_url is not None:
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
