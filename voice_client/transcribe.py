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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from voice_client.audio import CHUNK_SECONDS, AudioError, iter_pcm16_chunks, open_audio
from voice_client.errors import UsageError
from voice_client.realtime import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
    MAX_EVENT_BYTES,
    MAX_EVENT_DEPTH,
    MAX_SEND_SPEED,
    MAX_TRANSCRIPT_CHARS,
    MIN_MAX_STREAM_S,
    MIN_SESSION_LIMIT_S,
    BearerToken,
    RealtimeError,
    Transcript,
    TranscriptionResult,
    TransportOpener,
    WebSocketTransport,
    paced_chunks,
    transcribe_stream,
)

EXIT_FAILED = 1
"""Exit code when the endpoint or the stream failed (usage errors exit 2, Ctrl-C 130)."""

MIN_SPEED = 0.1
"""Slowest pacing accepted, as a multiple of real time: one 128 ms chunk every 1.28 s. Slower pacing
imitates no real-time caller, and near-zero values would never finish (``--speed 1e-9`` schedules a
chunk every four years)."""

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


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``transcribe`` and ``mic``: where to send the audio and how."""
    target = parser.add_mutually_exclusive_group(required=True)
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


def validate_target_arguments(args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` for values argparse cannot check (the session limit and the
    WebSocket URL)."""
    if not math.isfinite(args.session_limit) or args.session_limit < MIN_SESSION_LIMIT_S:
        raise UsageError(
            f"--session-limit must be a finite number of seconds, at least {MIN_SESSION_LIMIT_S:g} "
            f"(a session must hold several 128 ms chunks), got {args.session_limit}"
        )
    if args.url is not None:
        validate_url(args.url)
    token_option = (
        "--token-secret"
        if getattr(args, "token_secret", None) is not None
        else "--token-env"
        if getattr(args, "token_env", None) is not None
        else None
    )
    if token_option is not None and args.url is None:
        raise UsageError(
            f"{token_option} goes with --url (a bridge that checks a bearer token: the ECS "
            "target's load balancer); with --endpoint, SageMaker authenticates your AWS "
            "credentials and needs no token"
        )
    endpoint_url = getattr(args, "endpoint_url", None)
    if endpoint_url is not None:
        if args.url is not None:
            raise UsageError(
                "--endpoint-url is the SageMaker runtime's address and goes with --endpoint; "
                "--url talks to a container's bridge directly: give one of them"
            )
        validate_endpoint_url(endpoint_url)


def validate_endpoint_url(url: str) -> None:
    """Check ``url`` (``--endpoint-url`` of ``transcribe``, ``mic`` and ``speak``) is an
    ``https://`` (or ``http://``) URL with a host, no path, and a valid port if one is given.

    Raises:
        UsageError: naming what is wrong and the expected form.
    """
    from urllib.parse import urlsplit

    expected = "https://HOST[:PORT]"
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 (parsing the port validates it)
    except ValueError:
        raise UsageError(f"--endpoint-url {url!r} has an invalid port; use {expected}") from None
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.path not in ("", "/"):
        raise UsageError(f"--endpoint-url must be {expected} with no path, got {url!r}")


def validate_url(url: str) -> None:
    """Check ``url`` is a ``ws://`` or ``wss://`` URL with a valid host and port (websockets' own
    parser).

    Raises:
        UsageError: naming what is wrong and the expected form.
    """
    from websockets.exceptions import InvalidURI
    from websockets.uri import parse_uri

    expected = "ws://HOST:PORT/invocations-bidirectional-stream"
    if not url.startswith(("ws://", "wss://")):
        raise UsageError(f"--url must start with ws:// or wss://, got {url!r}; use {expected}")
    try:
        parse_uri(url)
    except (InvalidURI, ValueError) as error:
        raise UsageError(
            f"--url {url!r} is not a valid WebSocket URL ({error}); use {expected} with a port "
            "from 1 to 65535"
        ) from None


def validate_max_stream_s(max_stream_s: float) -> None:
    """Raise :class:`UsageError` unless ``max_stream_s`` is a finite number of seconds of at least
    :data:`~voice_client.realtime.MIN_MAX_STREAM_S`."""
    if not math.isfinite(max_stream_s) or max_stream_s < MIN_MAX_STREAM_S:
        raise UsageError(
            f"--max-stream-s must be a finite number of seconds, at least {MIN_MAX_STREAM_S:g} "
            f"(a stream must live long enough to open the next one), got {max_stream_s}"
        )


def validate_speed(speed: float) -> None:
    """Raise :class:`UsageError` unless ``speed`` is 0 (unpaced) or a finite number >=
    :data:`MIN_SPEED`."""
    if speed == 0:
        return
    if not math.isfinite(speed) or speed < MIN_SPEED:
        raise UsageError(
            "--speed must be 0 (unpaced) or a finite multiple of real time of at least "
            f"{MIN_SPEED:g}, got {speed}; slower pacing sends a 128 ms chunk less than once "
            f"every {CHUNK_SECONDS / MIN_SPEED:.2f} s, which tests nothing a real-time caller "
            "does and only makes the run longer"
        )


@contextlib.asynccontextmanager
async def open_target(args: argparse.Namespace):
    """Yield a :data:`TransportOpener` for ``--url`` or ``--endpoint`` (closing the SDK client
    afterwards).

    For ``--endpoint`` the AWS credentials are resolved once before any stream opens, so a missing
    or expired identity is reported at once: smithy-core 0.9 waits forever on a duplex stream whose
    signing identity cannot be resolved (``smithy_core/aio/client.py`` ``duplex_stream`` awaits a
    request future that is never completed).

    Raises:
        UsageError: no Region can be determined, or the profile does not exist.
        RealtimeError: no usable AWS credentials (code ``credentials``).
    """
    if args.url is not None:
        url = args.url
        # Secrets Manager is asked through boto3 (blocking): off the event loop. Without it, nothing
        # to wait for.
        token = (
            await asyncio.to_thread(read_token, args)
            if getattr(args, "token_secret", None)
            else read_token(args)
        )

        async def open_websocket() -> WebSocketTransport:
            return await WebSocketTransport.connect(url, token=token)

        yield open_websocket
        return

    from voice_client.sagemaker_stream import open_endpoint

    async with open_endpoint(
        args.endpoint,
        region=args.region,
        profile=args.profile,
        endpoint_url=getattr(args, "endpoint_url", None),
        target_variant=args.target_variant,
    ) as opener:
        yield opener


def read_token(args: argparse.Namespace) -> BearerToken | None:
    """The bearer token of ``--token-secret ARN`` (Secrets Manager's ``SecretString``) or
    ``--token-env NAME``; None without either. Read once, before any stream opens; the value is
    never printed.

    The secret is read in its ARN's Region unless ``--region`` says otherwise (a name without an
    ARN: ``--region``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's, as
    :func:`voice_client.aws.aws_session` orders them).

    Raises:
        UsageError: the environment variable is unset, or the token is empty or holds whitespace or
            characters an HTTP header cannot carry.
        RealtimeError: the secret cannot be read (code ``token_secret``: not found, access denied,
            no credentials).
    """
    secret_id, env_name = getattr(args, "token_secret", None), getattr(args, "token_env", None)
    if secret_id is not None:
        source = f"Secrets Manager secret {secret_id}"
        value = read_secret_string(secret_id, args.profile, args.region)
    elif env_name is not None:
        source = f"environment variable {env_name}"
        value = os.environ.get(env_name)
        if value is None:
            raise UsageError(
                f"--token-env {env_name}: the environment variable {env_name} is not set"
            )
    else:
        return None
    if not value or any(not 0x21 <= ord(char) <= 0x7E for char in value):
        raise UsageError(
            f"the bearer token from {source} is empty or holds whitespace or characters outside "
            "visible ASCII, which an HTTP header cannot carry unchanged (the value is not shown)"
        )
    return BearerToken(value, source)


def read_secret_string(secret_id: str, profile: str | None, region: str | None) -> str:
    """``SecretString`` of Secrets Manager secret ``secret_id`` (an ARN or a name).

    Raises:
        RealtimeError: code ``token_secret``, naming the secret and what AWS said (the value is
            never shown).
    """
    from voice_client.aws import aws_session, describe_aws_failure

    arn_region = (
        secret_id.split(":")[3]
        if secret_id.startswith("arn:") and secret_id.count(":") >= 6
        else None
    )
    try:
        client = aws_session(profile, region or arn_region or None).client("secretsmanager")
        value = client.get_secret_value(SecretId=secret_id).get("SecretString")
    except Exception as error:
        described = describe_aws_failure(error)
        if described is None:
            raise
        raise RealtimeError(
            f"cannot read the bearer token from Secrets Manager secret {secret_id}: {described[1]}",
            code="token_secret",
        ) from error
    if value is None:
        raise RealtimeError(
            f"Secrets Manager secret {secret_id} holds binary data, not the bearer token as text",
            code="token_secret",
        )
    return value


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


def format_figures(result: TranscriptionResult) -> str:
    """One human-readable line with time to first delta, real-time factor and audio seconds sent."""
    ttfd = (
        "n/a" if result.time_to_first_delta_s is None else f"{result.time_to_first_delta_s:.3f} s"
    )
    rtf = "n/a" if result.real_time_factor is None else f"{result.real_time_factor:.3f}"
    extra = f", {result.sessions} sessions" if result.sessions > 1 else ""
    extra += f", {result.rollovers} moved to a new stream" if result.rollovers else ""
    extra += f", {result.reopens} reopened after a drop" if result.reopens else ""
    extra += f", {result.replayed_audio_s:.3f} s of audio resent" if result.replayed_audio_s else ""
    return (
        f"time to first delta: {ttfd}; real-time factor: {rtf}; "
        f"audio sent: {result.audio_seconds_sent:.3f} s{extra}"
    )


async def transcribe_file(
    args: argparse.Namespace,
    transcript: Transcript | None = None,
    opener_factory: Callable[[argparse.Namespace], Any] = open_target,
    echo: DeltaEcho | None = None,
) -> TranscriptionResult:
    """Stream ``args.file`` through the target and return the result (printing deltas to stderr
    through ``echo``, a new :class:`DeltaEcho` when None).

    The file is checked before any connection and decoded as it is sent, so memory does not grow
    with its length. ``transcript`` (optional) holds the text received so far, also after a failure.

    Raises:
        UsageError: the file cannot be used.
        RealtimeError: the transcription failed (see
            :func:`voice_client.realtime.transcribe_stream`).
    """
    try:
        audio = open_audio(args.file)
    except AudioError as error:
        raise UsageError(str(error)) from error
    if audio.declared_frames is not None:
        print(
            f"warning: {audio.path}: the WAV header declares "
            f"{audio.declared_frames / audio.sample_rate_hz:.2f} s of audio but the file holds "
            f"{audio.duration_s:.2f} s (cut short?); transcribing what is there",
            file=sys.stderr,
        )
    echo = DeltaEcho() if echo is None else echo
    async with opener_factory(args) as opener:
        opener_: TransportOpener = opener
        return await transcribe_stream(
            paced_chunks(iter_pcm16_chunks(args.file), args.speed),
            opener_,
            model=args.model,
            on_delta=echo.delta,
            on_replay=echo.replay,
            transcript=transcript,
            session_limit_s=args.session_limit,
            max_stream_s=args.max_stream_s,
        )


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


def run(args: argparse.Namespace) -> int:
    """Entry point of ``voicectl transcribe``; returns the exit code.

    On a failure or Ctrl-C the text received so far is still printed on stdout (marked incomplete on
    stderr, or ``"complete": false`` with ``--json``); the exit code is then 1 (or 130 for Ctrl-C,
    via :func:`voicectl.cli.main`).
    """
    validate_target_arguments(args)
    validate_speed(args.speed)
    validate_max_stream_s(args.max_stream_s)
    transcript = Transcript()
    echo = DeltaEcho()
    try:
        result = asyncio.run(transcribe_file(args, transcript, echo=echo))
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
