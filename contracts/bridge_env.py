"""The bridge container's environment: every variable its entrypoint and bridge read, with its
type, default and check, in one place (services/bridge/README.md describes each for operators).

The stacks build a :class:`BridgeEnvironment` and write it into the SageMaker Model or the ECS task
definition (:meth:`BridgeEnvironment.to_env`); the container reads it back
(:meth:`BridgeEnvironment.from_env`), refusing a bad value with a message that names the variable
and what is allowed. ``make local`` and the benches start the bridge with theirs the same way.
Adding a bridge setting (docs/architecture.md, "Adding a bridge setting"): a field here, last (the
field order is the ECS task definition's), with its variable, and its default and check in the group
of fields :meth:`~BridgeEnvironment.from_env` reads it with (``_audio_limits``,
``_access_and_protection``, ``_bridge_settings``, ``_vllm_flags`` or ``_names_and_places``); the
setting (``setting(..., bridge=...)`` in config/voxtral.py) or construct that sets it; and the
bridge code that reads it.

Not here: the entrypoint's own test hook (``VLLM_COMMAND``) and the descriptor of the pipe that
hands the bridge its secrets; both stay inside the container.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from . import realtime

#: Prefix of the variables the entrypoint turns into vLLM flags: ``SM_VLLM_MAX_MODEL_LEN=32768``
#: becomes ``--max-model-len 32768`` (the convention of AWS's vLLM SageMaker containers).
VLLM_ENV_PREFIX: Final = "SM_VLLM_"

#: Port of ``/ping`` and the stream (BRIDGE_PORT).
DEFAULT_BRIDGE_PORT: Final = realtime.CONTAINER_PORT
#: Port vLLM listens on, on 127.0.0.1 only (the entrypoint always binds it there).
DEFAULT_VLLM_PORT: Final = 8081
#: vLLM's default ``--max-num-seqs`` on GPUs other than the largest (vllm ``engine/arg_utils.py``),
#: used for MAX_STREAMS when neither MAX_STREAMS nor SM_VLLM_MAX_NUM_SEQS is set.
DEFAULT_MAX_NUM_SEQS: Final = 256
#: Seconds a client may stay silent before its session is ended (IDLE_TIMEOUT_S).
DEFAULT_IDLE_TIMEOUT_S: Final = realtime.IDLE_TIMEOUT_S
#: Seconds vLLM may stay silent on a stream, with a WebSocket ping unanswered for the second half of
#: them, before the bridge takes it for stalled (a stopped or hung process) and ends the stream.
DEFAULT_UPSTREAM_STALL_S: Final = 5.0
#: Seconds open streams may keep running after SIGTERM. SageMaker sends SIGKILL 30 s after SIGTERM
#: (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html), so 25 s
#: leaves time to close the rest and stop vLLM.
DEFAULT_DRAIN_S: Final = 25.0
#: Voxtral Realtime turns 80 ms of audio into one token: 12.5 tokens per second of audio
#: (mistralai/Voxtral-Mini-4B-Realtime-2602 model card; the session limit).
DEFAULT_TOKENS_PER_AUDIO_SECOND: Final = 12.5
#: Fraction of max_model_len a session's audio may use before the bridge ends it
#: (``session_limit``); the rest is headroom for the prompt and the generated text, which share the
#: context.
DEFAULT_SESSION_LIMIT_FRACTION: Final = 0.9
#: Milliseconds of audio in one Voxtral Realtime token (12.5 per second).
AUDIO_TOKEN_MS: Final = 80
#: The transcription delays TRANSCRIPTION_DELAY_MS may name, ms: the model card's "any multiple of
#: 80ms between 80 and 1200, as well as 2400 as a standalone value"
#: (huggingface.co/mistralai/Voxtral-Mini-4B-Realtime-2602); the app's settings check against it.
TRANSCRIPTION_DELAYS_MS: Final = (*range(AUDIO_TOKEN_MS, 1200 + 1, AUDIO_TOKEN_MS), 2400)
#: The delay when TRANSCRIPTION_DELAY_MS is unset: the one in the real checkpoint's tekken.json.
DEFAULT_TRANSCRIPTION_DELAY_MS: Final = 480
#: Tokens of one generation that are neither audio nor delay: vLLM 0.31.0's prompt for Voxtral
#: Realtime's streaming format holds BOS, 32 left-pad tokens (tekken.json
#: ``streaming_n_left_pad_tokens``) and one token per 80 ms of delay (``usage.prompt_tokens`` 35,
#: 39 and 63 at 160, 480 and 2400 ms), and the model decodes 10 tokens past the audio after the
#: final commit (``completion_tokens`` = audio tokens + 10 at every delay; mistral_common's
#: OFFLINE_STREAMING_BUFFER_TOKENS). Measured against the real server (tests/vllm). A generation
#: that reaches max_model_len while audio still streams in, the final commit's padding included,
#: kills vLLM's engine ("Sampled token IDs exceed the max model length", EngineDeadError: every
#: session ends with 1012), so the session limit counts them.
STREAM_FORMAT_TOKENS: Final = 1 + 32 + 10


def stream_overhead_tokens(transcription_delay_ms: int) -> int:
    """Tokens of one generation that are not the audio's, at a transcription delay: 49 at 480 ms."""
    return STREAM_FORMAT_TOKENS + transcription_delay_ms // AUDIO_TOKEN_MS


#: The overhead at the checkpoint's own delay.
STREAM_OVERHEAD_TOKENS: Final = stream_overhead_tokens(DEFAULT_TRANSCRIPTION_DELAY_MS)
#: Tokens per block KV_BLOCKS_PER_STREAM counts in: vLLM's default CacheConfig.block_size on a GPU,
#: which the capacity model (constructs_lib/facts/capacity.py) computes with. vLLM's CPU build
#: reports 128 (tests/vllm).
DEFAULT_KV_BLOCK_SIZE: Final = 16
#: Largest WebSocket frame accepted on either leg, bytes (MAX_FRAME_BYTES; at least this).
DEFAULT_MAX_FRAME_BYTES: Final = realtime.MAX_FRAME_BYTES
#: Audio a stream may send, as a multiple of real time averaged over time (AUDIO_RATE_LIMIT).
DEFAULT_AUDIO_RATE_LIMIT: Final = realtime.AUDIO_RATE_LIMIT_X
#: Audio seconds a stream may send at once above the rate limit (AUDIO_BURST_S), at least the audio
#: one append of MAX_FRAME_BYTES holds.
DEFAULT_AUDIO_BURST_S: Final = realtime.AUDIO_BURST_S
#: CloudWatch namespace of the bridge's metrics unless METRICS_NAMESPACE says otherwise.
DEFAULT_METRICS_NAMESPACE: Final = "RealtimeVoice/Bridge"
#: Seconds between two EMF metric lines.
DEFAULT_METRICS_INTERVAL_S: Final = 60.0
#: Minutes one ECS task scale-in protection request lasts (ExpiresInMinutes). The bridge renews it
#: while streams are live, so this bounds only how long a task whose bridge hung stays protected.
DEFAULT_TASK_PROTECTION_MINUTES: Final = 10
#: Seconds without a live stream before the bridge turns protection off, so that a caller moving to
#: a new stream (voicectl's rollover, a reconnect) does not make it flap.
DEFAULT_TASK_PROTECTION_GRACE_S: Final = 10.0
#: The agent's limits on ExpiresInMinutes (Amazon ECS developer guide, "Amazon ECS task scale-in
#: protection endpoint").
TASK_PROTECTION_MINUTES_RANGE: Final = (1, 2880)
#: Where the weights' host copy goes when MODEL_S3_URI is set and MODEL_CACHE_DIR is not.
DEFAULT_MODEL_CACHE_DIR: Final = "/opt/weights-cache"
#: The bridge's log level unless LOG_LEVEL says otherwise.
DEFAULT_LOG_LEVEL: Final = "INFO"
#: The names LOG_LEVEL may hold, in any case: Python's logging levels (``logging`` module, "Logging
#: Levels").
LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Largest TCP port number (BRIDGE_PORT, VLLM_PORT); a larger one would wrap around or fail deep in
#: the socket layer.
MAX_PORT: Final = 65535
#: Largest value of any numeric variable: 2**53 - 1, the largest whole number a float holds exactly;
#: no duration, count or rate beyond it is meant, and timers fed one misbehave (a 1e308 s drain).
#: The app's settings share the bound (config/context.py).
MAX_NUMBER: Final = 2**53 - 1
#: Shortest token accepted in BRIDGE_TOKEN, characters: a short token is guessable (the ECS
#: service's secret has 48).
MIN_TOKEN_CHARS: Final = 16

#: What keeps the libraries in the image from reaching the internet (``offline``): the Hugging Face
#: libraries stay offline (huggingface_hub and transformers environment variables) and vLLM's usage
#: statistics are off (vLLM "Usage Stats Collection": VLLM_NO_USAGE_STATS, DO_NOT_TRACK).
OFFLINE_ENVIRONMENT: Final[Mapping[str, str]] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
}
#: The field that stands for the variables of :data:`OFFLINE_ENVIRONMENT`.
_OFFLINE = "offline"


class BridgeEnvError(ValueError):
    """A variable holds a value the bridge cannot use; the message names it and what is allowed.

    Attributes:
        variable: the variable refused (None: no single one).
        rule: what is allowed, as the message says it after the variable and its value
            (``"must be at least 1"``), for a caller that names the value its own way (the app's
            settings name their key).
    """

    def __init__(self, message: str, *, variable: str | None = None, rule: str | None = None):
        super().__init__(message)
        self.variable = variable
        self.rule = rule if rule is not None else message

    @classmethod
    def of(cls, variable: str, shown: str | None, rule: str) -> BridgeEnvError:
        """``VARIABLE=<shown> <rule>``; a secret (``shown`` None) is named without its value."""
        value = " (its value is not shown)" if shown is None else f"={shown}"
        return cls(f"{variable}{value} {rule}", variable=variable, rule=rule)


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be the bridge's bearer token (a sentence naming what is allowed), or
    None if it can.

    Allowed: at least :data:`MIN_TOKEN_CHARS` visible ASCII characters (0x21-0x7E) and nothing else,
    since a header value loses leading and trailing whitespace in transit and carries no other
    characters reliably.
    """
    if not token.strip():
        return (
            "is empty or only whitespace; set it to the token callers send, or unset it (no "
            "token check)"
        )
    if any(not 0x21 <= ord(char) <= 0x7E for char in token):
        return (
            "holds whitespace or characters outside visible ASCII (0x21-0x7E), which an HTTP "
            "header cannot carry unchanged; use letters, digits and punctuation only"
        )
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"is shorter than {MIN_TOKEN_CHARS} characters, too easy to guess; use a longer "
            "random token"
        )
    return None


def need[T](value: T | None) -> T:
    """``value``, which :meth:`BridgeEnvironment.from_env` never leaves None; a clear error for an
    environment built by hand and handed to the bridge without it."""
    if value is None:
        raise ValueError(
            "a bridge setting is unset: the container reads its settings with "
            "BridgeEnvironment.from_env, which fills every default"
        )
    return value


def _variable(name: str, **options: Any) -> Any:
    """A field read from the variable ``name`` (None: unset)."""
    return field(default=None, metadata={"variable": name}, **options)


@dataclass(frozen=True, slots=True)
class BridgeEnvironment:
    """The bridge container's environment, one field per variable (the offline switch stands for
    six). Times are seconds, sizes bytes.

    Built by hand (the stacks, ``make local``), a field left None is unset: :meth:`to_env` leaves
    its variable out and the container uses its default. :meth:`from_env` returns what the
    container runs with: every setting that has a default filled in, so the bridge reads values,
    never None, except where None means something (below); :meth:`defaults` is that for a bridge
    run in-process.

    vLLM's command line (``SM_VLLM_<NAME>``, passed to vLLM as its flags by the entrypoint):
        vllm_model: SM_VLLM_MODEL, the weights' directory (SageMaker copies them to
            /opt/ml/model).
        vllm_served_model_name: SM_VLLM_SERVED_MODEL_NAME, the name ``session.update`` must carry.
        vllm_max_model_len / vllm_max_num_seqs: SM_VLLM_MAX_MODEL_LEN (context, tokens) /
            SM_VLLM_MAX_NUM_SEQS (the stream cap); the bridge's MAX_MODEL_LEN and MAX_STREAMS
            default to them.
        vllm_gpu_memory_utilization, vllm_compilation_config (JSON), vllm_mm_processor_cache_gb
        (GiB), vllm_tokenizer_mode, vllm_config_format, vllm_load_format, vllm_kv_cache_dtype: the
            flags of the same names.

    Set by the deployment:
        metrics_namespace / endpoint_name / variant_name: METRICS_NAMESPACE (default
            RealtimeVoice/Bridge), ENDPOINT_NAME, VARIANT_NAME (default ``local``): the dimensions
            of every metric.
        model_s3_uri / model_cache_dir: MODEL_S3_URI, the staged weights the entrypoint copies to
            the host first (off SageMaker; None: vLLM reads SM_VLLM_MODEL as it is), into
            MODEL_CACHE_DIR (default /opt/weights-cache).
        drain_s: DRAIN_S, grace period after SIGTERM (default 25).
        idle_timeout_s: IDLE_TIMEOUT_S, client silence that ends a session (default 60).
        offline: the six variables of :data:`OFFLINE_ENVIRONMENT`, all "1" (True), or not set.
        kv_blocks_per_stream: KV_BLOCKS_PER_STREAM, KV-cache blocks one live stream holds at most
            (from the capacity model); None: vLLM's KV-cache report is not read.

    The bridge's other settings:
        host / port: BRIDGE_HOST (default 0.0.0.0) / BRIDGE_PORT (default 8080), where ``/ping``
            and the stream are.
        vllm_host / vllm_port: VLLM_HOST (127.0.0.1) / VLLM_PORT (8081), where vLLM listens.
        max_streams: MAX_STREAMS, concurrent streams (default SM_VLLM_MAX_NUM_SEQS, else 256);
            lowered at run time to what vLLM's KV cache holds when that is smaller
            (kv_blocks_per_stream).
        served_model: SERVED_MODEL_NAME, the model name put into ``session.update`` (default the
            first of SM_VLLM_SERVED_MODEL_NAME, else SM_VLLM_MODEL; None: learnt from vLLM's
            ``/v1/models``).
        max_model_len: MAX_MODEL_LEN, vLLM's context in tokens (default SM_VLLM_MAX_MODEL_LEN;
            None: no session limit).
        kv_block_size: KV_BLOCK_SIZE, tokens per block of kv_blocks_per_stream (default 16); when
            vLLM reports another block size the bridge converts.
        upstream_stall_s: UPSTREAM_STALL_S, vLLM silence, with a ping unanswered, that ends a
            stream as ``upstream_closed`` (default 5).
        tokens_per_audio_second: TOKENS_PER_AUDIO_SECOND, default 12.5 (Voxtral: one token per
            80 ms).
        session_limit_fraction: SESSION_LIMIT_FRACTION, default 0.9.
        max_frame_bytes: MAX_FRAME_BYTES, default 4 MiB, on both legs.
        audio_rate_limit: AUDIO_RATE_LIMIT, default 32 (x real time) per stream.
        audio_burst_s: AUDIO_BURST_S, default 120 (seconds of audio), at least the audio one
            MAX_FRAME_BYTES append can hold.
        metrics_interval_s: METRICS_INTERVAL_S, default 60.
        bridge_token: BRIDGE_TOKEN, the bearer token the stream's upgrade must carry (None: no
            check, as on SageMaker, where SigV4 authenticates callers); never in the repr. On ECS
            a secret, not environment.
        ecs_agent_uri: ECS_AGENT_URI, which the ECS agent sets in every task's containers (None:
            not on ECS, no task scale-in protection).
        task_protection_minutes: TASK_PROTECTION_MINUTES, default 10 (1 to 2880):
            ExpiresInMinutes of each request.
        task_protection_grace_s: TASK_PROTECTION_GRACE_S, default 10: seconds without a live
            stream before protection is turned off.
        log_level: LOG_LEVEL, default INFO: one of :data:`LOG_LEVELS`, in any case (read in
            capitals).
        transcription_delay_ms: TRANSCRIPTION_DELAY_MS, the delay the entrypoint writes into the
            tokenizer vLLM serves (None: the checkpoint's own, 480 ms for the session limit).
    """

    # The order of the fields is the order :meth:`to_env` writes the variables in: the order the
    # templates have always had (a reordered environment list in an ECS task definition is a new
    # revision, and a deployment).
    vllm_model: str | None = _variable("SM_VLLM_MODEL")
    vllm_served_model_name: str | None = _variable("SM_VLLM_SERVED_MODEL_NAME")
    vllm_max_model_len: int | None = _variable("SM_VLLM_MAX_MODEL_LEN")
    vllm_max_num_seqs: int | None = _variable("SM_VLLM_MAX_NUM_SEQS")
    vllm_gpu_memory_utilization: float | None = _variable("SM_VLLM_GPU_MEMORY_UTILIZATION")
    vllm_compilation_config: str | None = _variable("SM_VLLM_COMPILATION_CONFIG")
    vllm_mm_processor_cache_gb: float | None = _variable("SM_VLLM_MM_PROCESSOR_CACHE_GB")
    vllm_tokenizer_mode: str | None = _variable("SM_VLLM_TOKENIZER_MODE")
    vllm_config_format: str | None = _variable("SM_VLLM_CONFIG_FORMAT")
    vllm_load_format: str | None = _variable("SM_VLLM_LOAD_FORMAT")
    metrics_namespace: str | None = _variable("METRICS_NAMESPACE")
    model_s3_uri: str | None = _variable("MODEL_S3_URI")
    model_cache_dir: str | None = _variable("MODEL_CACHE_DIR")
    endpoint_name: str | None = _variable("ENDPOINT_NAME")
    variant_name: str | None = _variable("VARIANT_NAME")
    drain_s: float | None = _variable("DRAIN_S")
    idle_timeout_s: float | None = _variable("IDLE_TIMEOUT_S")
    offline: bool | None = field(default=None)
    vllm_kv_cache_dtype: str | None = _variable("SM_VLLM_KV_CACHE_DTYPE")
    transcription_delay_ms: int | None = _variable("TRANSCRIPTION_DELAY_MS")
    kv_blocks_per_stream: int | None = _variable("KV_BLOCKS_PER_STREAM")
    host: str | None = _variable("BRIDGE_HOST")
    port: int | None = _variable("BRIDGE_PORT")
    vllm_host: str | None = _variable("VLLM_HOST")
    vllm_port: int | None = _variable("VLLM_PORT")
    max_streams: int | None = _variable("MAX_STREAMS")
    served_model: str | None = _variable("SERVED_MODEL_NAME")
    max_model_len: int | None = _variable("MAX_MODEL_LEN")
    kv_block_size: int | None = _variable("KV_BLOCK_SIZE")
    upstream_stall_s: float | None = _variable("UPSTREAM_STALL_S")
    tokens_per_audio_second: float | None = _variable("TOKENS_PER_AUDIO_SECOND")
    session_limit_fraction: float | None = _variable("SESSION_LIMIT_FRACTION")
    max_frame_bytes: int | None = _variable("MAX_FRAME_BYTES")
    audio_rate_limit: float | None = _variable("AUDIO_RATE_LIMIT")
    audio_burst_s: float | None = _variable("AUDIO_BURST_S")
    metrics_interval_s: float | None = _variable("METRICS_INTERVAL_S")
    bridge_token: str | None = _variable("BRIDGE_TOKEN", repr=False)
    ecs_agent_uri: str | None = _variable("ECS_AGENT_URI")
    task_protection_minutes: int | None = _variable("TASK_PROTECTION_MINUTES")
    task_protection_grace_s: float | None = _variable("TASK_PROTECTION_GRACE_S")
    log_level: str | None = _variable("LOG_LEVEL")

    @staticmethod
    def variable(name: str) -> str:
        """The variable of the field ``name`` (``"drain_s"`` -> ``"DRAIN_S"``).

        Raises:
            KeyError: no field of that name has a variable of its own.
        """
        return _VARIABLES[name]

    def to_env(self) -> dict[str, str]:
        """The variables of the fields that are set, as strings, in field order: the container's
        environment.

        Numbers are written as Python writes them, a float without a fraction as an integer
        (``25.0`` -> ``"25"``).

        Raises:
            BridgeEnvError: the container would refuse the result (:meth:`from_env`), named as it
                would name it.
        """
        env: dict[str, str] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            if item.name == _OFFLINE:
                env.update(OFFLINE_ENVIRONMENT if value else {})
            else:
                env[item.metadata["variable"]] = _text(value)
        self.from_env(env)  # what the container would refuse is refused here, before a deployment
        return env

    @classmethod
    def defaults(cls, **fields: Any) -> BridgeEnvironment:
        """What the container reads from an empty environment, with ``fields`` in place of the
        defaults, unchecked: for a bridge run in-process (tests, benches) with values its
        environment would refuse (a burst of 1 s)."""
        return dataclasses.replace(cls.from_env({}), **fields)

    @property
    def stream_overhead_tokens(self) -> int:
        """Tokens of one generation that are not the audio's, at this transcription delay (unset:
        the checkpoint's 480 ms)."""
        delay = self.transcription_delay_ms
        return stream_overhead_tokens(DEFAULT_TRANSCRIPTION_DELAY_MS if delay is None else delay)

    @property
    def session_audio_limit_bytes(self) -> int | None:
        """PCM16 bytes of audio one session may append before ``session_limit``, or None for no
        limit (of an environment as the container reads it: :meth:`from_env`).

        (max_model_len - stream_overhead_tokens) x fraction tokens / tokens per second = seconds of
        audio; x 16000 samples/s x 2 bytes.
        """
        if self.max_model_len is None:
            return None
        tokens = max(0, self.max_model_len - self.stream_overhead_tokens) * need(
            self.session_limit_fraction
        )
        seconds = tokens / need(self.tokens_per_audio_second)
        return int(seconds * realtime.SAMPLE_RATE_HZ) * realtime.BYTES_PER_SAMPLE

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BridgeEnvironment:
        """Read the environment ``env`` (the container passes ``os.environ``), with every default
        filled in.

        The variables are checked a group at a time, always in the same order, so that of several
        bad ones the same one is named first.

        Raises:
            BridgeEnvError: a variable is not a number where one is needed, or is out of range (the
                message names it and the rule).
        """
        max_num_seqs = int(
            _number(env, "SM_VLLM_MAX_NUM_SEQS", DEFAULT_MAX_NUM_SEQS, minimum=1, integer=True)
        )
        audio = _audio_limits(env)
        access = _access_and_protection(env)
        own = _bridge_settings(env, max_num_seqs)
        return cls(
            **audio, **access, **own, **_vllm_flags(env, max_num_seqs), **_names_and_places(env)
        )


#: ``{field: variable}`` of every field but the offline switch.
_VARIABLES: Final[Mapping[str, str]] = {
    item.name: item.metadata["variable"]
    for item in dataclasses.fields(BridgeEnvironment)
    if item.metadata
}


def _audio_limits(env: Mapping[str, str]) -> dict[str, Any]:
    """SESSION_LIMIT_FRACTION, MAX_FRAME_BYTES and AUDIO_BURST_S, which must hold the audio of the
    largest append."""
    fraction = _number(env, "SESSION_LIMIT_FRACTION", DEFAULT_SESSION_LIMIT_FRACTION, minimum=0.01)
    if fraction > 1:
        raise BridgeEnvError.of("SESSION_LIMIT_FRACTION", str(fraction), "must be at most 1")
    max_frame_bytes = int(
        _number(
            env,
            "MAX_FRAME_BYTES",
            DEFAULT_MAX_FRAME_BYTES,
            minimum=realtime.MAX_FRAME_BYTES,
            integer=True,
        )
    )
    burst_s = _number(env, "AUDIO_BURST_S", DEFAULT_AUDIO_BURST_S, minimum=1)
    # base64 is 4 characters per 3 bytes of PCM16
    largest_append_s = max_frame_bytes * 3 / 4 / realtime.PCM_BYTES_PER_SECOND
    if burst_s < largest_append_s:
        raise BridgeEnvError.of(
            "AUDIO_BURST_S",
            f"{burst_s:g}",
            f"must be at least {largest_append_s:g}: the audio one append of "
            f"MAX_FRAME_BYTES={max_frame_bytes} can hold, or such appends would always be refused",
        )
    return {
        "session_limit_fraction": fraction,
        "max_frame_bytes": max_frame_bytes,
        "audio_burst_s": burst_s,
    }


def _access_and_protection(env: Mapping[str, str]) -> dict[str, Any]:
    """BRIDGE_TOKEN, ECS_AGENT_URI and TASK_PROTECTION_MINUTES (within the ECS agent's range)."""
    token = env.get("BRIDGE_TOKEN")
    if token is not None and (problem := token_problem(token)):
        raise BridgeEnvError.of("BRIDGE_TOKEN", None, problem)
    agent_uri = env.get("ECS_AGENT_URI", "").strip() or None
    if agent_uri is not None and not agent_uri.startswith("http://"):
        raise BridgeEnvError.of(
            "ECS_AGENT_URI", repr(agent_uri), "must be an http:// URL (the ECS agent sets it)"
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
        raise BridgeEnvError.of(
            "TASK_PROTECTION_MINUTES",
            str(protection_minutes),
            f"must be at most {high} (the ECS agent's limit on ExpiresInMinutes)",
        )
    return {
        "bridge_token": token,
        "ecs_agent_uri": agent_uri,
        "task_protection_minutes": protection_minutes,
    }


def _bridge_settings(env: Mapping[str, str], max_num_seqs: int) -> dict[str, Any]:
    """The bridge's own numbers: ports, stream cap, KV-cache blocks, timers, the session limit's
    inputs (MAX_MODEL_LEN, whose default is SM_VLLM_MAX_MODEL_LEN, must exceed the stream format's
    tokens at TRANSCRIPTION_DELAY_MS) and the rate limit; MAX_STREAMS defaults to
    `max_num_seqs`."""
    # Read in the order they always were (the first bad one is the one named).
    port = int(
        _number(env, "BRIDGE_PORT", DEFAULT_BRIDGE_PORT, minimum=0, maximum=MAX_PORT, integer=True)
    )
    vllm_port = int(
        _number(env, "VLLM_PORT", DEFAULT_VLLM_PORT, minimum=1, maximum=MAX_PORT, integer=True)
    )
    max_streams = int(_number(env, "MAX_STREAMS", max_num_seqs, minimum=1, integer=True))
    kv_blocks_per_stream = (
        int(_number(env, "KV_BLOCKS_PER_STREAM", 1, minimum=1, integer=True))
        if env.get("KV_BLOCKS_PER_STREAM")
        else None
    )
    kv_block_size = int(
        _number(env, "KV_BLOCK_SIZE", DEFAULT_KV_BLOCK_SIZE, minimum=1, integer=True)
    )
    idle_timeout_s = _number(env, "IDLE_TIMEOUT_S", DEFAULT_IDLE_TIMEOUT_S, minimum=0.01)
    drain_s = _number(env, "DRAIN_S", DEFAULT_DRAIN_S, minimum=0)
    upstream_stall_s = _number(env, "UPSTREAM_STALL_S", DEFAULT_UPSTREAM_STALL_S, minimum=0.1)
    delay = _transcription_delay(env)
    return {
        "port": port,
        "vllm_port": vllm_port,
        "max_streams": max_streams,
        "kv_blocks_per_stream": kv_blocks_per_stream,
        "kv_block_size": kv_block_size,
        "idle_timeout_s": idle_timeout_s,
        "drain_s": drain_s,
        "upstream_stall_s": upstream_stall_s,
        "transcription_delay_ms": delay,
        "max_model_len": _context_tokens(env, delay),
        "tokens_per_audio_second": _number(
            env, "TOKENS_PER_AUDIO_SECOND", DEFAULT_TOKENS_PER_AUDIO_SECOND, minimum=0.01
        ),
        "audio_rate_limit": _number(env, "AUDIO_RATE_LIMIT", DEFAULT_AUDIO_RATE_LIMIT, minimum=1),
        "metrics_interval_s": _number(
            env, "METRICS_INTERVAL_S", DEFAULT_METRICS_INTERVAL_S, minimum=0.1
        ),
        "task_protection_grace_s": _number(
            env, "TASK_PROTECTION_GRACE_S", DEFAULT_TASK_PROTECTION_GRACE_S, minimum=0
        ),
    }


def _context_tokens(env: Mapping[str, str], delay: int | None) -> int | None:
    """MAX_MODEL_LEN, else SM_VLLM_MAX_MODEL_LEN (named as the one that holds the value): more
    than the stream format's tokens at the transcription delay, or every session would end at its
    start; None when both are unset."""
    name = "MAX_MODEL_LEN" if env.get("MAX_MODEL_LEN", "").strip() else "SM_VLLM_MAX_MODEL_LEN"
    if not env.get(name, "").strip():
        return None
    tokens = int(_number(env, name, 0, minimum=1, integer=True))
    shown_delay = DEFAULT_TRANSCRIPTION_DELAY_MS if delay is None else delay
    overhead = stream_overhead_tokens(shown_delay)
    if tokens <= overhead:
        raise BridgeEnvError.of(
            name,
            repr(env[name].strip()),
            f"must be at least {overhead + 1}: a session's prompt and final padding take "
            f"{overhead} tokens at a {shown_delay} ms transcription delay, and the audio needs "
            f"the rest ({DEFAULT_TOKENS_PER_AUDIO_SECOND:g} tokens per second)",
        )
    return tokens


def _vllm_flags(env: Mapping[str, str], max_num_seqs: int) -> dict[str, Any]:
    """vLLM's flags (SM_VLLM_*): numbers checked as numbers (vLLM would refuse anything else at its
    start), the rest as they are."""
    return {
        "vllm_model": env.get("SM_VLLM_MODEL"),
        "vllm_served_model_name": env.get("SM_VLLM_SERVED_MODEL_NAME"),
        "vllm_max_model_len": _optional(env, "SM_VLLM_MAX_MODEL_LEN", minimum=1, integer=True),
        "vllm_max_num_seqs": max_num_seqs if env.get("SM_VLLM_MAX_NUM_SEQS", "").strip() else None,
        "vllm_gpu_memory_utilization": _optional(env, "SM_VLLM_GPU_MEMORY_UTILIZATION", minimum=0),
        "vllm_compilation_config": env.get("SM_VLLM_COMPILATION_CONFIG"),
        "vllm_mm_processor_cache_gb": _optional(env, "SM_VLLM_MM_PROCESSOR_CACHE_GB", minimum=0),
        "vllm_tokenizer_mode": env.get("SM_VLLM_TOKENIZER_MODE"),
        "vllm_config_format": env.get("SM_VLLM_CONFIG_FORMAT"),
        "vllm_load_format": env.get("SM_VLLM_LOAD_FORMAT"),
        "vllm_kv_cache_dtype": env.get("SM_VLLM_KV_CACHE_DTYPE"),
    }


def _names_and_places(env: Mapping[str, str]) -> dict[str, Any]:
    """The settings read as text: metric dimensions, where the weights, the bridge and vLLM are,
    the served model name and the offline switch, unchecked, and the log level."""
    return {
        "metrics_namespace": env.get("METRICS_NAMESPACE", DEFAULT_METRICS_NAMESPACE),
        "model_s3_uri": env.get("MODEL_S3_URI", "").strip() or None,
        "model_cache_dir": env.get("MODEL_CACHE_DIR", DEFAULT_MODEL_CACHE_DIR),
        "endpoint_name": env.get("ENDPOINT_NAME", "local"),
        "variant_name": env.get("VARIANT_NAME", "local"),
        "offline": all(env.get(name) == value for name, value in OFFLINE_ENVIRONMENT.items()),
        "host": env.get("BRIDGE_HOST", "0.0.0.0"),
        "vllm_host": env.get("VLLM_HOST", "127.0.0.1"),
        "served_model": (
            env.get("SERVED_MODEL_NAME", "").strip()
            or _first_model_name(env.get("SM_VLLM_SERVED_MODEL_NAME", ""))
            or env.get("SM_VLLM_MODEL", "").strip()
            or None
        ),
        "log_level": _log_level(env),
    }


def _log_level(env: Mapping[str, str]) -> str:
    """LOG_LEVEL in capitals: one of LOG_LEVELS (default INFO when unset or empty)."""
    raw = env.get("LOG_LEVEL", "").strip()
    if not raw:
        return DEFAULT_LOG_LEVEL
    if raw.upper() not in LOG_LEVELS:
        raise BridgeEnvError.of(
            "LOG_LEVEL", repr(raw), f"must be one of {', '.join(LOG_LEVELS)} (in any case)"
        )
    return raw.upper()


def _text(value: Any) -> str:
    """A field's value as its variable holds it: a float without a fraction as an integer, else as
    Python writes it (shortest round trip)."""
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def _number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    minimum: float,
    integer: bool = False,
    maximum: float = MAX_NUMBER,
) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise BridgeEnvError.of(name, repr(raw), f"is not {kind}") from None
    if not math.isfinite(value):  # nan and inf pass every comparison below, or fail none
        raise BridgeEnvError.of(name, repr(raw), "is not a finite number")
    if value < minimum:
        raise BridgeEnvError.of(name, repr(raw), f"must be at least {minimum}")
    if value > maximum:
        raise BridgeEnvError.of(name, repr(raw), f"must be at most {maximum}")
    return value


def _optional(env: Mapping[str, str], name: str, *, minimum: float, integer: bool = False) -> Any:
    """``name``'s number, or None when it is unset or empty."""
    if not env.get(name, "").strip():
        return None
    number = _number(env, name, 0, minimum=minimum, integer=integer)
    return int(number) if integer else number


def _transcription_delay(env: Mapping[str, str]) -> int | None:
    """TRANSCRIPTION_DELAY_MS: one of TRANSCRIPTION_DELAYS_MS, or None when unset or empty."""
    raw = env.get("TRANSCRIPTION_DELAY_MS", "").strip()
    if not raw:
        return None
    try:
        delay: int | None = int(raw)
    except ValueError:
        delay = None
    if delay not in TRANSCRIPTION_DELAYS_MS:
        raise BridgeEnvError.of(
            "TRANSCRIPTION_DELAY_MS",
            repr(raw),
            "must be a multiple of 80 from 80 to 1200, or 2400 (ms: the delays the Voxtral "
            "Realtime model card allows), or unset for the checkpoint's own",
        )
    return delay


def _first_model_name(raw: str) -> str | None:
    """First name of a ``--served-model-name`` value: a JSON list or space-separated names."""
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
