"""``voicectl transcribe``: transcribe a recording through the Voxtral endpoint (or a local container's bridge).

    voicectl transcribe FILE --endpoint NAME [--region R] [--profile P] [--speed 1.0] [--json]
    voicectl transcribe FILE --url ws://HOST:PORT/invocations-bidirectional-stream [--speed 0]

Deltas are printed to stderr as they arrive; the final transcript goes to stdout (so ``> out.txt`` keeps just the
text), followed on stderr by time to first delta, real-time factor and audio seconds sent. ``--json`` prints one
JSON object with the transcript and those figures to stdout instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from typing import Any

from voicectl.audio import AudioError, load_pcm16
from voicectl.cli import UsageError
from voicectl.realtime import (
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    RealtimeError,
    TranscriptionResult,
    TransportOpener,
    WebSocketTransport,
    paced_chunks,
    transcribe_stream,
)

EXIT_FAILED = 1
"""Exit code when the endpoint or the stream failed (usage errors exit 2, Ctrl-C 130)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``transcribe`` subcommand."""
    parser = subparsers.add_parser(
        "transcribe",
        help="transcribe a recording (WAV, FLAC, OGG) through the Voxtral endpoint",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("file", metavar="FILE", help="audio file: WAV, FLAC or OGG, any sample rate and channel count")
    add_target_arguments(parser)
    parser.add_argument("--speed", type=float, default=1.0,
                        help="pace the audio at this multiple of real time; 0 sends it unpaced (default: 1.0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object with the transcript and figures")
    parser.set_defaults(func=run)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``transcribe`` and ``mic``: where to send the audio and how."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", metavar="NAME", help="SageMaker endpoint name (the Voxtral endpoint)")
    target.add_argument("--url", metavar="WS_URL",
                        help="talk straight to a container's bridge: ws://HOST:PORT/invocations-bidirectional-stream")
    parser.add_argument("--region", help="AWS Region of the endpoint (default: from the profile or AWS_REGION)")
    parser.add_argument("--profile", help="AWS named profile (default: the standard credential chain)")
    parser.add_argument("--target-variant", metavar="VARIANT", help="send to this ProductionVariant of the endpoint")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"model name for session.update (default: {DEFAULT_MODEL}); "
                             "the bridge replaces it with the name vLLM serves")
    parser.add_argument("--session-limit", type=float, default=DEFAULT_SESSION_LIMIT_S, metavar="SECONDS",
                        help="start a new session after this many seconds of audio "
                             f"(default: {DEFAULT_SESSION_LIMIT_S:.0f}; keep below the endpoint's context length)")


def validate_target_arguments(args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` for values argparse cannot check."""
    if args.session_limit <= 0:
        raise UsageError(f"--session-limit must be a positive number of seconds, got {args.session_limit}")
    if args.url is not None and not args.url.startswith(("ws://", "wss://")):
        raise UsageError(f"--url must start with ws:// or wss://, got {args.url!r}")


@contextlib.asynccontextmanager
async def open_target(args: argparse.Namespace):
    """Yield a :data:`TransportOpener` for ``--url`` or ``--endpoint`` (closing the SDK client afterwards).

    Raises:
        UsageError: no Region can be determined, or the profile does not exist.
    """
    if args.url is not None:
        url = args.url

        async def open_websocket() -> WebSocketTransport:
            return await WebSocketTransport.connect(url)

        yield open_websocket
        return

    from voicectl.sagemaker_stream import BotocoreCredentialsResolver, SageMakerStreamTransport, create_client

    session = aws_session(args.profile, args.region)
    client = await create_client(session.region_name, BotocoreCredentialsResolver(session))
    endpoint, variant = args.endpoint, args.target_variant

    async def open_sagemaker() -> SageMakerStreamTransport:
        return await SageMakerStreamTransport.open(client, endpoint, target_variant=variant)

    try:
        yield open_sagemaker
    finally:
        with contextlib.suppress(Exception):
            await client.close()


def aws_session(profile: str | None, region: str | None) -> Any:
    """A ``boto3.Session`` for ``profile``/``region``, checked to have a Region.

    Raises:
        UsageError: the profile does not exist, or no Region is configured anywhere.
    """
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except botocore.exceptions.ProfileNotFound as error:
        raise UsageError(f"{error}; list profiles with `aws configure list-profiles`") from error
    if not session.region_name:
        raise UsageError("no AWS Region: pass --region, set AWS_REGION, or set a region in your profile")
    return session


def print_delta(delta: str) -> None:
    """Write a delta to stderr as it arrives (no newline: deltas continue each other)."""
    sys.stderr.write(delta)
    sys.stderr.flush()


def format_figures(result: TranscriptionResult) -> str:
    """One human-readable line with time to first delta, real-time factor and audio seconds sent."""
    ttfd = "n/a" if result.time_to_first_delta_s is None else f"{result.time_to_first_delta_s:.3f} s"
    rtf = "n/a" if result.real_time_factor is None else f"{result.real_time_factor:.3f}"
    extra = f", {result.sessions} sessions" if result.sessions > 1 else ""
    extra += f", {result.reopens} reopened after a drop" if result.reopens else ""
    return (f"time to first delta: {ttfd}; real-time factor: {rtf}; "
            f"audio sent: {result.audio_seconds_sent:.3f} s{extra}")


async def transcribe_file(args: argparse.Namespace, opener_factory: Callable[[argparse.Namespace], Any] = open_target
                          ) -> TranscriptionResult:
    """Load ``args.file``, stream it through the target and return the result (printing deltas to stderr)."""
    try:
        audio = load_pcm16(args.file)
    except AudioError as error:
        raise UsageError(str(error)) from error
    async with opener_factory(args) as opener:
        opener_: TransportOpener = opener
        return await transcribe_stream(
            paced_chunks(audio.data, args.speed), opener_, model=args.model, on_delta=print_delta,
            session_limit_s=args.session_limit,
        )


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl transcribe``; returns the exit code."""
    validate_target_arguments(args)
    if args.speed < 0:
        raise UsageError(f"--speed must be 0 (unpaced) or a positive multiple of real time, got {args.speed}")
    try:
        result = asyncio.run(transcribe_file(args))
    except RealtimeError as error:
        print(f"\nvoicectl transcribe: {error}", file=sys.stderr)
        return EXIT_FAILED
    sys.stderr.write("\n")
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        print(result.transcript)
        print(format_figures(result), file=sys.stderr)
    return 0
