"""``voicectl transcribe``: transcribe a recording through the Voxtral endpoint (or a local
container's bridge).

    voicectl transcribe FILE --endpoint NAME [--region R] [--profile P] [--endpoint-url URL]
        [--speed 1.0] [--max-stream-s 1500] [--json]
    voicectl transcribe FILE --url ws://HOST:PORT/invocations-bidirectional-stream [--speed 0]
    voicectl transcribe FILE --url wss://ECS-LOAD-BALANCER/invocations-bidirectional-stream \\
        --token-secret ARN

Deltas are printed to stderr as they arrive; the final transcript goes to stdout (so ``> out.txt``
keeps just the text), followed on stderr by time to first delta, real-time factor and audio seconds
sent. ``--json`` prints one JSON object with the transcript and those figures to stdout instead.

The transcription itself: :mod:`voice_client.transcribe`. The target options
(:func:`add_target_arguments`, :func:`target_from_args`) serve ``mic`` and ``connect-replay`` too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from voice_client.realtime import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    MAX_SEND_SPEED,
    MAX_TRANSCRIPT_CHARS,
    RealtimeError,
    Transcript,
)
from voice_client.transcribe import (
    TranscriptionTarget,
    format_figures,
    transcribe_file,
    validate_max_stream_s,
    validate_session_limit,
    validate_speed,
    validate_target,
)

EXIT_FAILED = 1
"""Exit code when the endpoint or the stream failed (usage errors exit 2, Ctrl-C 130)."""

LIMITS_HELP = (
    f"Limits on what the server sends: one event at most {MAX_EVENT_BYTES:,} bytes "
    f"(MAX_EVENT_BYTES) nested at most {MAX_EVENT_DEPTH} levels deep (MAX_EVENT_DEPTH), at most "
    f"{MAX_TRANSCRIPT_CHARS:,} characters of transcript kept per run (MAX_TRANSCRIPT_CHARS); "
    "beyond them, and on an error event, the run ends with exit code 1 and one line on stderr."
)
"""The client's bounds, for ``--help`` of the commands that transcribe (``transcribe``, ``mic``)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``transcribe`` subcommand."""
    parser = subparsers.add_parser(
        "transcribe",
        help="transcribe a recording (WAV, FLAC, OGG) through the Voxtral endpoint",
        description=(
            "Transcribe a recording through the Voxtral endpoint (or straight through a local "
            "container's bridge with --url). Deltas appear on stderr as they arrive; the "
            "transcript is printed on stdout, then time to first delta, real-time factor and "
            "audio seconds sent. " + LIMITS_HELP
        ),
    )
    parser.add_argument(
        "file",
        metavar="FILE",
        help="audio file: WAV, FLAC or OGG, any sample rate and channel count",
    )
    add_target_arguments(parser)
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="pace the audio at this multiple of real time; 0 sends it as fast as the endpoint "
        f"takes it (at most {MAX_SEND_SPEED:g} x real time after a burst, below the container's "
        "rate limit) (default: 1.0)",
    )
    parser.add_argument(
        "--max-stream-s",
        type=float,
        default=DEFAULT_MAX_STREAM_S,
        metavar="SECONDS",
        help="move to a new stream at a quiet point before a stream has been open this long "
        f"(default: {DEFAULT_MAX_STREAM_S:.0f}, below the 30 min a vendor documents as "
        "SageMaker's cap on one bidirectional stream)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object with the transcript and figures"
    )
    parser.set_defaults(func=run)


def add_target_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Arguments shared by ``transcribe``, ``mic`` and ``connect-replay``: where to send the audio
    and how (one target ``required`` unless a command checks something else first)."""
    target = parser.add_mutually_exclusive_group(required=required)
    target.add_argument(
        "--endpoint", metavar="NAME", help="SageMaker endpoint name (the Voxtral endpoint)"
    )
    target.add_argument(
        "--url",
        metavar="WS_URL",
        help="talk straight to a container's bridge: "
        "ws://HOST:PORT/invocations-bidirectional-stream, or the ECS target's load balancer "
        "(stack output StreamUrl)",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument(
        "--token-secret",
        metavar="ARN",
        help="with --url: send Authorization: Bearer <token>, the token read from this Secrets "
        "Manager secret (the ECS stack's output TokenSecretArn; its Region, else --region, "
        "AWS_REGION...)",
    )
    token.add_argument(
        "--token-env",
        metavar="NAME",
        help="with --url: send the bearer token held in environment variable NAME (local use, "
        "tests)",
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
        help="SageMaker runtime URL for bidirectional streams, e.g. a VPC interface endpoint "
        "(https://vpce-...runtime.sagemaker.REGION.vpce.amazonaws.com:8443) or a local runtime "
        "(https://localhost:8443); default: AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, "
        "AWS_ENDPOINT_URL, else https://runtime.sagemaker.REGION.amazonaws.com:8443. "
        "AWS_CA_BUNDLE names extra certificate authorities to trust",
    )
    parser.add_argument(
        "--target-variant", metavar="VARIANT", help="send to this ProductionVariant of the endpoint"
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"model name for session.update (default: {DEFAULT_MODEL}); "
        "the bridge replaces it with the name vLLM serves",
    )
    parser.add_argument(
        "--session-limit",
        type=float,
        default=DEFAULT_SESSION_LIMIT_S,
        metavar="SECONDS",
        help="end a generation (one transcription.done) after at most this many seconds of audio "
        f"(default: {DEFAULT_SESSION_LIMIT_S:.0f}; keep below the endpoint's context length; the "
        "container's session_limit lowers it)",
    )


def target_from_args(args: argparse.Namespace) -> TranscriptionTarget:
    """The target the options of :func:`add_target_arguments` name."""
    return TranscriptionTarget(
        endpoint=args.endpoint,
        url=args.url,
        token_secret=args.token_secret,
        token_env=args.token_env,
        region=args.region,
        profile=args.profile,
        endpoint_url=args.endpoint_url,
        target_variant=args.target_variant,
    )


def validate_target_arguments(args: argparse.Namespace) -> TranscriptionTarget:
    """Check what argparse cannot (the session limit, the URLs, a token without ``--url``) and
    return the target.

    Raises:
        UsageError: naming the option and what it allows.
    """
    validate_session_limit(args.session_limit)
    target = target_from_args(args)
    validate_target(target)
    return target


class DeltaEcho:
    """The deltas written to stderr as they arrive, with no newline (deltas continue each other).

    Attributes:
        line_open: whether deltas left stderr's current line unfinished; :meth:`end_line` finishes
            it, and writes nothing when none is open, so that a message after no delta is the first
            line on stderr, not after a blank one.
    """

    def __init__(self) -> None:
        self.line_open = False

    def delta(self, delta: str) -> None:
        """Write ``delta`` (nothing for an empty one)."""
        if delta:
            sys.stderr.write(delta)
            sys.stderr.flush()
            self.line_open = not delta.endswith("\n")

    def end_line(self) -> None:
        """Finish the line the deltas left open, if any."""
        if self.line_open:
            sys.stderr.write("\n")
            self.line_open = False

    def replay(self, reason: str) -> None:
        """Tell the user a session is being replayed (its deltas will be printed again), on a line
        of its own."""
        self.end_line()
        sys.stderr.write(f"voicectl transcribe: {reason}\n")
        sys.stderr.flush()


def print_partial(
    args: argparse.Namespace, transcript: Transcript, message: str, code: str | None
) -> None:
    """After a failure: the text received so far on stdout (``--json``: one object with it, the
    error and code)."""
    if args.json:
        print(
            json.dumps(
                {"transcript": transcript.text, "complete": False, "error": message, "code": code}
            )
        )
    elif transcript.text:
        print(transcript.text)


def print_warning(warning: str) -> None:
    """A warning about the recording, on stderr."""
    print(f"warning: {warning}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl transcribe``; returns the exit code.

    On a failure or Ctrl-C the text received so far is still printed on stdout (marked incomplete on
    stderr, or ``"complete": false`` with ``--json``); the exit code is then 1 (or 130 for Ctrl-C,
    via :func:`voicectl.cli.main`).
    """
    target = validate_target_arguments(args)
    validate_speed(args.speed)
    validate_max_stream_s(args.max_stream_s)
    transcript = Transcript()
    echo = DeltaEcho()
    try:
        result = asyncio.run(
            transcribe_file(
                args.file,
                target,
                speed=args.speed,
                model=args.model,
                session_limit_s=args.session_limit,
                max_stream_s=args.max_stream_s,
                transcript=transcript,
                on_delta=echo.delta,
                on_replay=echo.replay,
                on_warning=print_warning,
            )
        )
    except RealtimeError as error:
        echo.end_line()
        print_partial(args, transcript, str(error), error.code)
        partial = " The transcript printed is incomplete." if transcript.text else ""
        print(f"voicectl transcribe: {str(error).rstrip('.')}.{partial}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        echo.end_line()
        print_partial(args, transcript, "interrupted", "interrupted")
        raise
    echo.end_line()
    if args.json:
        print(json.dumps({**result.as_dict(), "complete": True}))
    else:
        print(result.transcript)
        print(format_figures(result), file=sys.stderr)
    return 0
