"""Transcribe a recording through the Voxtral endpoint (or a container's bridge): where the audio
goes (:class:`TranscriptionTarget`), the checks of what a caller gives, the streams to the target
(:func:`open_target`) and the transcription of a file (:func:`transcribe_file`).

``voicectl transcribe`` (:mod:`voicectl.commands.transcribe`) is this module with a command line;
``voicectl mic`` and ``voicectl connect-replay`` open their targets through it too. Every check
raises :class:`~voice_client.errors.UsageError` naming what was wrong and what is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voice_client.audio import CHUNK_SECONDS, AudioError, iter_pcm16_chunks, open_audio
from voice_client.errors import UsageError
from voice_client.realtime import (
    DEFAULT_MAX_STREAM_S,
    DEFAULT_MODEL,
    DEFAULT_SESSION_LIMIT_S,
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

MIN_SPEED = 0.1
"""Slowest pacing accepted, as a multiple of real time: one 128 ms chunk every 1.28 s. Slower pacing
imitates no real-time caller, and near-zero values would never finish (``--speed 1e-9`` schedules a
chunk every four years)."""


@dataclass(frozen=True)
class TranscriptionTarget:
    """Where the audio goes: a SageMaker endpoint (``endpoint``) or a container's bridge (``url``).

    Attributes:
        endpoint: the SageMaker EndpointName of the Voxtral endpoint.
        url: a bridge's WebSocket URL (``ws://HOST:PORT/invocations-bidirectional-stream``, or the
            ECS target's load balancer, stack output ``StreamUrl``).
        token_secret: with ``url``: the Secrets Manager secret (ARN or name) holding the bearer
            token the bridge checks (the ECS stack's output ``TokenSecretArn``).
        token_env: with ``url``: the environment variable holding that token instead.
        region: AWS Region of the endpoint (None: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the
            profile's), or of the token secret when its ARN names none.
        profile: AWS named profile (None: the standard credential chain).
        endpoint_url: SageMaker runtime's URL for bidirectional streams (a VPC interface endpoint,
            a local runtime); None: ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2``,
            ``AWS_ENDPOINT_URL``, else the Region's.
        target_variant: the endpoint's ProductionVariant to send to (None: SageMaker's choice).
    """

    endpoint: str | None = None
    url: str | None = None
    token_secret: str | None = None
    token_env: str | None = field(default=None)
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    target_variant: str | None = None

    @property
    def description(self) -> str:
        """What the audio streams to, for people: the URL or the endpoint's name."""
        return self.url or f"SageMaker endpoint {self.endpoint}"


def validate_session_limit(session_limit_s: float) -> None:
    """Raise :class:`UsageError` unless ``session_limit_s`` is a finite number of seconds of at
    least :data:`~voice_client.realtime.MIN_SESSION_LIMIT_S`."""
    if not math.isfinite(session_limit_s) or session_limit_s < MIN_SESSION_LIMIT_S:
        raise UsageError(
            f"--session-limit must be a finite number of seconds, at least {MIN_SESSION_LIMIT_S:g} "
            f"(a session must hold several 128 ms chunks), got {session_limit_s}"
        )


def validate_target(target: TranscriptionTarget) -> None:
    """Raise :class:`UsageError` for a target that cannot be used: a bad WebSocket URL, a token
    without ``url``, or ``endpoint_url`` with ``url`` or malformed."""
    if (target.endpoint is None) == (target.url is None):
        raise UsageError("give one target: a SageMaker endpoint (--endpoint) or a bridge (--url)")
    if target.url is not None:
        validate_url(target.url)
    token_option = (
        "--token-secret"
        if target.token_secret is not None
        else "--token-env"
        if target.token_env is not None
        else None
    )
    if token_option is not None and target.url is None:
        raise UsageError(
            f"{token_option} goes with --url (a bridge that checks a bearer token: the ECS "
            "target's load balancer); with --endpoint, SageMaker authenticates your AWS "
            "credentials and needs no token"
        )
    if target.endpoint_url is not None:
        if target.url is not None:
            raise UsageError(
                "--endpoint-url is the SageMaker runtime's address and goes with --endpoint; "
                "--url talks to a container's bridge directly: give one of them"
            )
        validate_endpoint_url(target.endpoint_url)


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
async def open_target(target: TranscriptionTarget) -> AsyncIterator[TransportOpener]:
    """Yield a :data:`TransportOpener` for ``target`` (closing the SDK client afterwards).

    For an endpoint the AWS credentials are resolved once before any stream opens, so a missing
    or expired identity is reported at once: smithy-core 0.9 waits forever on a duplex stream whose
    signing identity cannot be resolved (``smithy_core/aio/client.py`` ``duplex_stream`` awaits a
    request future that is never completed).

    Raises:
        UsageError: no Region can be determined, or the profile does not exist.
        RealtimeError: no usable AWS credentials (code ``credentials``).
    """
    if target.url is not None:
        url = target.url
        # Secrets Manager is asked through boto3 (blocking): off the event loop. Without it, nothing
        # to wait for.
        token = (
            await asyncio.to_thread(read_token, target)
            if target.token_secret
            else read_token(target)
        )

        async def open_websocket() -> WebSocketTransport:
            return await WebSocketTransport.connect(url, token=token)

        yield open_websocket
        return

    from voice_client.sagemaker_stream import open_endpoint

    assert target.endpoint is not None, "a target names an endpoint or a URL"
    async with open_endpoint(
        target.endpoint,
        region=target.region,
        profile=target.profile,
        endpoint_url=target.endpoint_url,
        target_variant=target.target_variant,
    ) as opener:
        yield opener


def read_token(target: TranscriptionTarget) -> BearerToken | None:
    """The bearer token of ``target.token_secret`` (Secrets Manager's ``SecretString``) or
    ``target.token_env``; None without either. Read once, before any stream opens; the value is
    never printed.

    The secret is read in its ARN's Region unless ``target.region`` says otherwise (a name without
    an ARN: ``target.region``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's, as
    :func:`voice_client.aws.aws_session` orders them).

    Raises:
        UsageError: the environment variable is unset, or the token is empty or holds whitespace or
            characters an HTTP header cannot carry.
        RealtimeError: the secret cannot be read (code ``token_secret``: not found, access denied,
            no credentials).
    """
    secret_id, env_name = target.token_secret, target.token_env
    if secret_id is not None:
        source = f"Secrets Manager secret {secret_id}"
        value = read_secret_string(secret_id, target.profile, target.region)
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


def check_recording(path: str | Path) -> str | None:
    """Check that ``path`` is a recording :func:`transcribe_file` can send (WAV, FLAC or OGG with
    some audio), reading its header only; return a warning about it, or None.

    The warning: a WAV whose header declares more audio than the file holds (cut short).

    Raises:
        UsageError: the file is missing, a directory, unreadable, not audio, or empty.
    """
    try:
        audio = open_audio(Path(path))
    except AudioError as error:
        raise UsageError(str(error)) from error
    if audio.declared_frames is None:
        return None
    return (
        f"{audio.path}: the WAV header declares "
        f"{audio.declared_frames / audio.sample_rate_hz:.2f} s of audio but the file holds "
        f"{audio.duration_s:.2f} s (cut short?); transcribing what is there"
    )


async def transcribe_file(
    path: str | Path,
    target: TranscriptionTarget,
    *,
    speed: float = 1.0,
    model: str = DEFAULT_MODEL,
    session_limit_s: float = DEFAULT_SESSION_LIMIT_S,
    max_stream_s: float = DEFAULT_MAX_STREAM_S,
    transcript: Transcript | None = None,
    on_delta: Callable[[str], None] = lambda delta: None,
    on_replay: Callable[[str], None] = lambda reason: None,
    on_warning: Callable[[str], None] = lambda warning: None,
    opener_factory: Callable[[TranscriptionTarget], Any] = open_target,
) -> TranscriptionResult:
    """Stream the recording at ``path`` through ``target`` and return the result.

    The file is checked (:func:`check_recording`, whose warning goes to ``on_warning``) before any
    connection, and decoded as it is sent (mixed down to mono, resampled to 16 kHz PCM16), so memory
    does not grow with its length. The audio is paced at ``speed`` x real time (0: as fast as the
    endpoint takes it). ``transcript`` (optional) holds the text received so far, also after a
    failure; ``on_delta`` and ``on_replay`` are passed to
    :func:`voice_client.realtime.transcribe_stream`.

    Raises:
        UsageError: the file cannot be used.
        RealtimeError: the transcription failed (see
            :func:`voice_client.realtime.transcribe_stream`).
    """
    warning = check_recording(path)
    if warning is not None:
        on_warning(warning)
    async with opener_factory(target) as opener:
        opener_: TransportOpener = opener
        return await transcribe_stream(
            paced_chunks(iter_pcm16_chunks(path), speed),
            opener_,
            model=model,
            on_delta=on_delta,
            on_replay=on_replay,
            transcript=transcript,
            session_limit_s=session_limit_s,
            max_stream_s=max_stream_s,
        )
