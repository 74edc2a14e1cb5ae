"""Bridge settings, read once from environment variables (documented in container/README.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .auth import token_problem

#: Port SageMaker sends `/ping` and the bidirectional stream to (SageMaker container contract:
#: https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html).
DEFAULT_BRIDGE_PORT = 8080
#: Port vLLM listens on, on 127.0.0.1 only (the entrypoint always binds it there).
DEFAULT_VLLM_PORT = 8081
#: vLLM's default `--max-num-seqs` on GPUs other than the largest (vllm `engine/arg_utils.py`), used
#: for MAX_STREAMS when neither MAX_STREAMS nor SM_VLLM_MAX_NUM_SEQS is set.
DEFAULT_MAX_NUM_SEQS = 256
#: Seconds a client may stay silent before its session is ended (SageMaker's own idle limit is
#: longer).
DEFAULT_IDLE_TIMEOUT_S = 60.0
#: Seconds vLLM may stay silent on a stream, with a WebSocket ping unanswered for the second half of
#: them, before the bridge takes it for stalled (a stopped or hung process) and ends the stream.
DEFAULT_UPSTREAM_STALL_S = 5.0
#: Seconds open streams may keep running after SIGTERM. SageMaker sends SIGKILL 30 s after SIGTERM
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html), so 25 s
#: leaves time to close the rest and stop vLLM.
DEFAULT_DRAIN_S = 25.0
#: Voxtral Realtime turns 80 ms of audio into one token: 12.5 tokens per second of audio
#: (mistralai/Voxtral-Mini-4B-Realtime-2602 model card; the issue's session limit).
DEFAULT_TOKENS_PER_AUDIO_SECOND = 12.5
#: Fraction of max_model_len a session's audio may use before the bridge ends it (`session_limit`);
#: the rest is headroom for the prompt and the generated text, which share the context.
DEFAULT_SESSION_LIMIT_FRACTION = 0.9
#: Milliseconds of audio in one Voxtral Realtime token (12.5 per second).
AUDIO_TOKEN_MS = 80
#: The transcription delays TRANSCRIPTION_DELAY_MS may name, ms: the model card's "any multiple of
#: 80ms between 80 and 1200, as well as 2400 as a standalone value"
#: (huggingface.co/mistralai/Voxtral-Mini-4B-Realtime-2602). The app's settings hold the same list
#: (config/models.py); this package imports nothing of the app's.
TRANSCRIPTION_DELAYS_MS = (*range(AUDIO_TOKEN_MS, 1200 + 1, AUDIO_TOKEN_MS), 2400)
#: The delay when TRANSCRIPTION_DELAY_MS is unset: the one in the real checkpoint's tekken.json.
DEFAULT_TRANSCRIPTION_DELAY_MS = 480
#: Tokens of one generation that are neither audio nor delay: vLLM 0.31.0's prompt for Voxtral
#: Realtime's streaming format holds BOS, 32 left-pad tokens (tekken.json
#: `streaming_n_left_pad_tokens`) and one token per 80 ms of delay (`usage.prompt_tokens` 35, 39 and
#: 63 at 160, 480 and 2400 ms), and the model decodes 10 tokens past the audio after the final
#: commit (`completion_tokens` = audio tokens + 10 at every delay; mistral_common's
#: OFFLINE_STREAMING_BUFFER_TOKENS). Measured against the real server (tests/vllm). A generation
#: that reaches max_model_len while audio still streams in, the final commit's padding of delay +
#: 11 tokens included (seen at 2400 ms counted as 480), kills vLLM's engine ("Sampled token IDs
#: exceed the max model length", EngineDeadError: every session ends with 1012), so the session
#: limit counts them.
STREAM_FORMAT_TOKENS = 1 + 32 + 10


def stream_overhead_tokens(transcription_delay_ms: int) -> int:
    """Tokens of one generation that are not the audio's, at a transcription delay: 49 at 480 ms."""
    return STREAM_FORMAT_TOKENS + transcription_delay_ms // AUDIO_TOKEN_MS


#: Tokens per block KV_BLOCKS_PER_STREAM counts in: vLLM's default CacheConfig.block_size on a GPU,
#: which constructs_lib/capacity.py (VLLM_BLOCK_SIZE) computes with. vLLM's CPU build reports 128
#: (tests/vllm).
DEFAULT_KV_BLOCK_SIZE = 16
#: Largest WebSocket frame accepted on either leg, bytes (4 MiB, over two minutes of base64 PCM16 in
#: one append; the issue asks for at least 4 MiB). Larger frames close the connection with 1009.
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
#: Audio a stream may send, as a multiple of real time averaged over time (AUDIO_RATE_LIMIT).
#: Unpaced clients are welcome below it (voicectl sends at most 16 x real time); above it a stream
#: is ended with `rate_limited`, so that one client cannot make vLLM queue audio faster than any
#: model transcribes it (a hostile client on loopback relayed ~26,000 appends per second before this
#: limit).
DEFAULT_AUDIO_RATE_LIMIT = 32.0
#: Audio seconds a stream may send at once above the rate limit (AUDIO_BURST_S): a short file sent
#: unpaced, the replay of a cut generation, and one append of the largest frame (4 MiB of base64
#: holds 3 MiB of PCM16: 98 s) fit in it.
DEFAULT_AUDIO_BURST_S = 120.0
#: CloudWatch namespace of the bridge's metrics unless METRICS_NAMESPACE says otherwise.
DEFAULT_METRICS_NAMESPACE = "RealtimeVoice/Bridge"
#: Seconds between two EMF metric lines.
DEFAULT_METRICS_INTERVAL_S = 60.0
#: Minutes one ECS task scale-in protection request lasts (ExpiresInMinutes; the agent accepts 1 to
#: 2880). The bridge renews it while streams are live, so this bounds only how long a task whose
#: bridge hung stays protected.
DEFAULT_TASK_PROTECTION_MINUTES = 10
#: Seconds without a live stream before the bridge turns protection off, so that a caller moving to
#: a new stream (voicectl's rollover, a reconnect) does not make it flap (see `task_protection`).
DEFAULT_TASK_PROTECTION_GRACE_S = 10.0
#: The agent's limits on ExpiresInMinutes (Amazon ECS developer guide, "Amazon ECS task scale-in
#: protection endpoint").
TASK_PROTECTION_MINUTES_RANGE = (1, 2880)


class SettingsError(ValueError):
    """An environment variable holds a value the bridge cannot use; the message names it and what is
    allowed."""


def _number(
    env: Mapping[str, str], name: str, default: float, *, minimum: float, integer: bool = False
) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise SettingsError(f"{name}={raw!r} is not {kind}") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


def _first_model_name(raw: str) -> str | None:
    """First name of a `--served-model-name` value: a JSON list or space-separated names."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.startswith("["):
        try:
            names = json.loads(raw)
            return str(names[0]) if names else None
        except (ValueError, IndexError):
            pass
    return raw.split()[0]


def _transcription_delay(env: Mapping[str, str]) -> int | None:
    """TRANSCRIPTION_DELAY_MS: one of TRANSCRIPTION_DELAYS_MS, or None when unset or empty."""
    raw = env.get("TRANSCRIPTION_DELAY_MS", "").strip()
    if not raw:
        return None
    try:
        delay = int(raw)
    except ValueError:
        delay = None
    if delay not in TRANSCRIPTION_DELAYS_MS:
        raise SettingsError(
            f"TRANSCRIPTION_DELAY_MS={raw!r} must be a multiple of 80 from 80 to 1200, or 2400 "
            "(ms: the delays the Voxtral Realtime model card allows), or unset for the "
            "checkpoint's own"
        )
    return delay


@dataclass(frozen=True, slots=True)
class Settings:
    """Every bridge setting. Times are seconds, sizes bytes.

    Attributes:
        host: address the bridge listens on (BRIDGE_HOST, default 0.0.0.0).
        port: port of `/ping` and the stream (BRIDGE_PORT, default 8080).
        vllm_host / vllm_port: where vLLM listens (VLLM_HOST 127.0.0.1, VLLM_PORT 8081).
        max_streams: concurrent streams (MAX_STREAMS, default SM_VLLM_MAX_NUM_SEQS, else 256);
            lowered at run time to what vLLM's KV cache holds when that is smaller
            (kv_blocks_per_stream).
        kv_blocks_per_stream: KV-cache blocks one live stream holds at most (KV_BLOCKS_PER_STREAM;
            the CDK stack sets it from constructs_lib/capacity.py); None: vLLM's KV-cache report is
            not read.
        kv_block_size: tokens per block of kv_blocks_per_stream (KV_BLOCK_SIZE, default 16); when
            vLLM reports another block_size the bridge converts (Bridge._kv_cache_read).
        idle_timeout_s: client silence that ends a session (IDLE_TIMEOUT_S, default 60).
        drain_s: grace period after SIGTERM (DRAIN_S, default 25).
        upstream_stall_s: vLLM silence, with a ping unanswered, that ends a stream as
            `upstream_closed` (UPSTREAM_STALL_S, default 5).
        served_model: model name put into `session.update` (SERVED_MODEL_NAME, default the first of
            SM_VLLM_SERVED_MODEL_NAME, else SM_VLLM_MODEL; None: learnt from vLLM's `/v1/models`).
        max_model_len: vLLM's context length in tokens (MAX_MODEL_LEN, default
            SM_VLLM_MAX_MODEL_LEN;
            None: no session limit).
        transcription_delay_ms: TRANSCRIPTION_DELAY_MS, the delay the entrypoint writes into the
            tokenizer vLLM serves (None: the checkpoint's own, taken to be 480 ms for the session
            limit).
        tokens_per_audio_second: TOKENS_PER_AUDIO_SECOND, default 12.5 (Voxtral: one token per 80
            ms).
        session_limit_fraction: SESSION_LIMIT_FRACTION, default 0.9.
        max_frame_bytes: MAX_FRAME_BYTES, default 4 MiB, on both legs.
        audio_rate_limit: AUDIO_RATE_LIMIT, default 32 (x real time) per stream.
        audio_burst_s: AUDIO_BURST_S, default 120 (seconds of audio), at least the audio one
            MAX_FRAME_BYTES append can hold.
        metrics_namespace / endpoint_name / variant_name: METRICS_NAMESPACE, ENDPOINT_NAME,
            VARIANT_NAME (the CDK stack sets them; dimensions of every metric).
        metrics_interval_s: METRICS_INTERVAL_S, default 60.
        bridge_token: BRIDGE_TOKEN, the bearer token the stream's upgrade must carry (None: no
            check, as on SageMaker, where SigV4 authenticates callers); never in the repr (see
            `auth`).
        ecs_agent_uri: ECS_AGENT_URI, which the ECS agent sets in every task's containers (None: not
            on ECS, no task scale-in protection; see `task_protection`).
        task_protection_minutes: TASK_PROTECTION_MINUTES, default 10 (1 to 2880): ExpiresInMinutes
            of each request.
        task_protection_grace_s: TASK_PROTECTION_GRACE_S, default 10: seconds without a live stream
            before protection is turned off.
    """

    host: str = "0.0.0.0"
    port: int = DEFAULT_BRIDGE_PORT
    vllm_host: str = "127.0.0.1"
    vllm_port: int = DEFAULT_VLLM_PORT
    max_streams: int = DEFAULT_MAX_NUM_SEQS
    kv_blocks_per_stream: int | None = None
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    drain_s: float = DEFAULT_DRAIN_S
    upstream_stall_s: float = DEFAULT_UPSTREAM_STALL_S
    served_model: str | None = None
    max_model_len: int | None = None
    transcription_delay_ms: int | None = None
    kv_block_size: int = DEFAULT_KV_BLOCK_SIZE
    tokens_per_audio_second: float = DEFAULT_TOKENS_PER_AUDIO_SECOND
    session_limit_fraction: float = DEFAULT_SESSION_LIMIT_FRACTION
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    audio_rate_limit: float = DEFAULT_AUDIO_RATE_LIMIT
    audio_burst_s: float = DEFAULT_AUDIO_BURST_S
    metrics_namespace: str = DEFAULT_METRICS_NAMESPACE
    endpoint_name: str = "local"
    variant_name: str = "local"
    metrics_interval_s: float = DEFAULT_METRICS_INTERVAL_S
    bridge_token: str | None = field(default=None, repr=False)
    ecs_agent_uri: str | None = None
    task_protection_minutes: int = DEFAULT_TASK_PROTECTION_MINUTES
    task_protection_grace_s: float = DEFAULT_TASK_PROTECTION_GRACE_S

    @property
    def stream_overhead_tokens(self) -> int:
        """Tokens of one generation that are not the audio's, at this transcription delay."""
        delay = self.transcription_delay_ms
        return stream_overhead_tokens(DEFAULT_TRANSCRIPTION_DELAY_MS if delay is None else delay)

    @property
    def session_audio_limit_bytes(self) -> int | None:
        """PCM16 bytes of audio one session may append before `session_limit`, or None for no limit.

        (max_model_len - stream_overhead_tokens) x fraction tokens / tokens per second = seconds of
        audio; x 16000 samples/s x 2 bytes.
        """
        if self.max_model_len is None:
            return None
        usable = max(0, self.max_model_len - self.stream_overhead_tokens)
        tokens = usable * self.session_limit_fraction
        seconds = tokens / self.tokens_per_audio_second
        return int(seconds * 16_000) * 2

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from `env` (default `os.environ`).

        Raises:
            SettingsError: a variable is not a number where one is needed, or is out of range.
        """
        env = os.environ if env is None else env
        max_num_seqs = _number(
            env, "SM_VLLM_MAX_NUM_SEQS", DEFAULT_MAX_NUM_SEQS, minimum=1, integer=True
        )
        max_model_len = env.get("MAX_MODEL_LEN") or env.get("SM_VLLM_MAX_MODEL_LEN")
        served = (
            env.get("SERVED_MODEL_NAME", "").strip()
            or _first_model_name(env.get("SM_VLLM_SERVED_MODEL_NAME", ""))
            or env.get("SM_VLLM_MODEL", "").strip()
            or None
        )
        delay = _transcription_delay(env)
        overhead = stream_overhead_tokens(
            DEFAULT_TRANSCRIPTION_DELAY_MS if delay is None else delay
        )
        fraction = _number(
            env, "SESSION_LIMIT_FRACTION", DEFAULT_SESSION_LIMIT_FRACTION, minimum=0.01
        )
        if fraction > 1:
            raise SettingsError(f"SESSION_LIMIT_FRACTION={fraction} must be at most 1")
        max_frame_bytes = int(
            _number(
                env,
                "MAX_FRAME_BYTES",
                DEFAULT_MAX_FRAME_BYTES,
                minimum=4 * 1024 * 1024,
                integer=True,
            )
        )
        burst_s = _number(env, "AUDIO_BURST_S", DEFAULT_AUDIO_BURST_S, minimum=1)
        largest_append_s = (
            max_frame_bytes * 3 / 4 / 32_000
        )  # base64 is 4 characters per 3 bytes of PCM16
        if burst_s < largest_append_s:
            raise SettingsError(
                f"AUDIO_BURST_S={burst_s:g} must be at least {largest_append_s:.0f}: the audio "
                f"one append of MAX_FRAME_BYTES={max_frame_bytes} can hold, or such appends "
                "would always be refused"
            )
        token = env.get("BRIDGE_TOKEN")
        if token is not None and (problem := token_problem(token)):
            raise SettingsError(f"BRIDGE_TOKEN (its value is not shown) {problem}")
        agent_uri = env.get("ECS_AGENT_URI", "").strip() or None
        if agent_uri is not None and not agent_uri.startswith("http://"):
            raise SettingsError(
                f"ECS_AGENT_URI={agent_uri!r} must be an http:// URL (the ECS agent sets it)"
            )
        low, high = TASK_PROTECTION_MINUTES_RANGE
        protection_minutes = int(
            _number(
                env,
                "TASK_PROTECTION_MINUTES",
                DEFAULT_TASK_PROTECTION_MINUTES,
                minimum=low,
                integer=True,
            )
        )
        if protection_minutes > high:
            raise SettingsError(
                f"TASK_PROTECTION_MINUTES={protection_minutes} must be at most {high} (the ECS "
                "agent's limit on ExpiresInMinutes)"
            )
        return cls(
            host=env.get("BRIDGE_HOST", "0.0.0.0"),
            port=int(_number(env, "BRIDGE_PORT", DEFAULT_BRIDGE_PORT, minimum=0, integer=True)),
            vllm_host=env.get("VLLM_HOST", "127.0.0.1"),
            vllm_port=int(_number(env, "VLLM_PORT", DEFAULT_VLLM_PORT, minimum=1, integer=True)),
            max_streams=int(_number(env, "MAX_STREAMS", max_num_seqs, minimum=1, integer=True)),
            kv_blocks_per_stream=(
                int(_number(env, "KV_BLOCKS_PER_STREAM", 1, minimum=1, integer=True))
                if env.get("KV_BLOCKS_PER_STREAM")
                else None
            ),
            kv_block_size=int(
                _number(env, "KV_BLOCK_SIZE", DEFAULT_KV_BLOCK_SIZE, minimum=1, integer=True)
            ),
            idle_timeout_s=_number(env, "IDLE_TIMEOUT_S", DEFAULT_IDLE_TIMEOUT_S, minimum=0.01),
            drain_s=_number(env, "DRAIN_S", DEFAULT_DRAIN_S, minimum=0),
            upstream_stall_s=_number(
                env, "UPSTREAM_STALL_S", DEFAULT_UPSTREAM_STALL_S, minimum=0.1
            ),
            served_model=served,
            max_model_len=(
                int(
                    _number(
                        {"MAX_MODEL_LEN": max_model_len},
                        "MAX_MODEL_LEN",
                        0,
                        minimum=overhead + 1,
                        integer=True,
                    )
                )
                if max_model_len
                else None
            ),
            transcription_delay_ms=delay,
            tokens_per_audio_second=_number(
                env, "TOKENS_PER_AUDIO_SECOND", DEFAULT_TOKENS_PER_AUDIO_SECOND, minimum=0.01
            ),
            session_limit_fraction=fraction,
            max_frame_bytes=max_frame_bytes,
            audio_rate_limit=_number(env, "AUDIO_RATE_LIMIT", DEFAULT_AUDIO_RATE_LIMIT, minimum=1),
            audio_burst_s=burst_s,
            metrics_namespace=env.get("METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE),
            endpoint_name=env.get("ENDPOINT_NAME", "local"),
            variant_name=env.get("VARIANT_NAME", "local"),
            metrics_interval_s=_number(
                env, "METRICS_INTERVAL_S", DEFAULT_METRICS_INTERVAL_S, minimum=0.1
            ),
            bridge_token=token,
            ecs_agent_uri=agent_uri,
            task_protection_minutes=protection_minutes,
            task_protection_grace_s=_number(
                env, "TASK_PROTECTION_GRACE_S", DEFAULT_TASK_PROTECTION_GRACE_S, minimum=0
            ),
        )
