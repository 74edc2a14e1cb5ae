"""The container's entrypoint: start vLLM on 127.0.0.1:8081 and the bridge on :8080, and supervise
both.

SageMaker runs the image as `docker run <image> serve` and stops it with SIGTERM, then SIGKILL 30 s
later (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html); the
`serve` argument is ignored here.

- vLLM flags come from `SM_VLLM_<NAME>` variables, the convention of AWS's vLLM SageMaker
  containers: `SM_VLLM_MAX_MODEL_LEN=32768` becomes `--max-model-len 32768`; a value is passed as
  one argument, untouched (JSON stays intact); `true` (any case) or an empty value becomes the bare
  flag (as in vLLM's `examples/online_serving/sagemaker-entrypoint.sh`), `false` leaves it out.
  `SM_VLLM_HOST` and `SM_VLLM_PORT` are ignored: vLLM always binds 127.0.0.1:8081, reachable only
  through the bridge.
- vLLM exits: the bridge is stopped and the entrypoint exits non-zero within 5 s, so SageMaker
  replaces the instance rather than serving 503 forever.
- Off SageMaker (`MODEL_S3_URI` set, e.g. on ECS): the weights are first copied from S3 to
  `MODEL_CACHE_DIR` once per host and checked against the staging manifest (bridge/weights.py);
  vLLM's `--model` is that copy.
- `TRANSCRIPTION_DELAY_MS` set: vLLM takes no flag for Voxtral Realtime's transcription delay;
  it reads it from the tokenizer's `tekken.json` (`audio.transcription_delay_ms`). The entrypoint
  writes a copy of the checkpoint's `tekken.json` with that value replaced into a temporary
  directory and starts vLLM with `--tokenizer <that directory>`; the weights are untouched
  (`delayed_tokenizer`). A checkpoint without the field is refused (exit 2).
- SIGTERM (or SIGINT): the bridge drains (stops accepting streams, lets open ones run for up to
  DRAIN_S seconds), then vLLM is stopped, and the entrypoint exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import contracts
from contracts.bridge_env import (
    DEFAULT_VLLM_PORT,
    VLLM_ENV_PREFIX,
    BridgeEnvError,
    BridgeEnvironment,
    need,
)

from . import env_secrets

log = logging.getLogger("bridge.entrypoint")

#: vLLM's address: loopback only, so nothing but the bridge reaches it.
VLLM_HOST = "127.0.0.1"
VLLM_PORT = DEFAULT_VLLM_PORT
#: `SM_VLLM_*` names the entrypoint sets itself (after the prefix).
_FORCED = {"HOST", "PORT"}
#: How vLLM is started (vLLM's OpenAI-compatible server, which serves /v1/realtime); override with
#: the VLLM_COMMAND variable, a JSON list (tests use a stand-in process). `python3` is the first on
#: PATH: the image's own Python with vLLM, not the bridge's venv (which is not activated, only run
#: by path).
DEFAULT_VLLM_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
#: After vLLM dies, how long the bridge gets to close its streams before SIGKILL, seconds (total
#: exit stays under 5 s, so that the platform replaces the container promptly).
BRIDGE_STOP_AFTER_VLLM_DEATH_S = 2.0
#: After SIGTERM, how long past DRAIN_S the bridge may take to exit before SIGKILL, seconds.
BRIDGE_EXIT_GRACE_S = 3.0
#: How long vLLM gets to exit after SIGTERM before SIGKILL, seconds.
VLLM_STOP_TIMEOUT_S = 5.0


def vllm_flags(env: Mapping[str, str]) -> list[str]:
    """vLLM command-line flags from the `SM_VLLM_<NAME>` variables of `env`, sorted by variable
    name, followed by `--host 127.0.0.1 --port 8081`.

    Example: `{"SM_VLLM_MAX_MODEL_LEN": "32768", "SM_VLLM_ENFORCE_EAGER": "true",
    "SM_VLLM_TRUST_REMOTE_CODE": "false"}` gives `["--enforce-eager", "--max-model-len", "32768",
    "--host", "127.0.0.1", "--port", "8081"]`.
    """
    flags: list[str] = []
    for name in sorted(env):
        if not name.startswith(VLLM_ENV_PREFIX) or len(name) == len(VLLM_ENV_PREFIX):
            continue
        key = name[len(VLLM_ENV_PREFIX) :]
        if key in _FORCED:
            log.warning("%s is ignored: vLLM always listens on %s:%d", name, VLLM_HOST, VLLM_PORT)
            continue
        flag = "--" + key.lower().replace("_", "-")
        value = env[name]
        if value.strip().lower() in (
            "true",
            "",
        ):  # empty: a bare flag, as in vLLM's sagemaker-entrypoint.sh
            flags.append(flag)
        elif value.strip().lower() != "false":
            flags += [flag, value]
    return [*flags, "--host", VLLM_HOST, "--port", str(VLLM_PORT)]


#: `SM_VLLM_<NAME>` flags whose value is a secret (matched on NAME's end): vLLM's `--api-key` (the
#: bearer key its API requires) and `--hf-token` (a Hugging Face access token), and any flag named
#: like one. Their values are shown as `***` wherever the command line is logged.
SECRET_FLAG_SUFFIXES = ("API_KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIALS")
#: What a secret flag's value is logged as.
MASK = "***"


def is_secret_flag(name: str) -> bool:
    """Whether `SM_VLLM_<NAME>` (or its `--name` flag) carries a secret value
    (`SECRET_FLAG_SUFFIXES`)."""
    key = name.removeprefix(VLLM_ENV_PREFIX).removeprefix("--").upper().replace("-", "_")
    return key.endswith(SECRET_FLAG_SUFFIXES)


def masked_command(command: Sequence[str]) -> str:
    """`command` joined for the log, the value after each secret flag (`is_secret_flag`) replaced by
    `MASK` (`--api-key=VALUE` too)."""
    shown: list[str] = []
    hide_next = False
    for part in command:
        if hide_next:
            shown.append(MASK)
            hide_next = False
        elif part.startswith("--") and "=" in part and is_secret_flag(part.split("=", 1)[0]):
            shown.append(part.split("=", 1)[0] + "=" + MASK)
        else:
            shown.append(part)
            hide_next = part.startswith("--") and is_secret_flag(part)
    return " ".join(shown)


def vllm_command(env: Mapping[str, str]) -> list[str]:
    """The full vLLM command line: VLLM_COMMAND (JSON list) or the default, then `vllm_flags(env)`.

    Raises:
        BridgeEnvError: VLLM_COMMAND is not a non-empty JSON list of strings.
    """
    base: list[str] = list(DEFAULT_VLLM_COMMAND)
    if raw := env.get("VLLM_COMMAND", "").strip():
        try:
            base = json.loads(raw)
        except ValueError:
            base = []
        if (
            not base
            or not isinstance(base, list)
            or not all(isinstance(part, str) for part in base)
        ):
            raise BridgeEnvError(
                f'VLLM_COMMAND={raw!r} must be a JSON list of strings, e.g. ["vllm", "serve"]'
            )
    return base + vllm_flags(env)


#: The Mistral tokenizer's file, in the checkpoint's directory (beside params.json, as the model
#: repository ships it).
TEKKEN_FILE = "tekken.json"
#: The variables of the tokenizer vLLM loads (`--tokenizer`, `--tokenizer-mode`).
TOKENIZER_VARIABLE = VLLM_ENV_PREFIX + "TOKENIZER"
TOKENIZER_MODE_VARIABLE = VLLM_ENV_PREFIX + "TOKENIZER_MODE"


class TokenizerError(ValueError):
    """The transcription delay cannot be applied to this checkpoint; the message says why."""


def delayed_tokenizer(env: Mapping[str, str], delay_ms: int, directory: Path) -> Path:
    """Write the checkpoint's `tekken.json` into `directory` with `audio.transcription_delay_ms`
    set to `delay_ms`, and return `directory`: vLLM's `--tokenizer`.

    Where vLLM 0.31.0 reads the delay: `vllm/model_executor/models/voxtral_realtime.py`,
    `VoxtralRealtimeGeneration.__init__` (`audio_config.get_num_delay_tokens()`: the time
    conditioning of every step) and `buffer_realtime_audio` (`encode_streaming_tokens()` and
    `get_padding_audio()`: the prompt's delay tokens and the right padding). All three read
    mistral_common's `AudioConfig` (`tokens/tokenizers/audio.py`), which `Tekkenizer.from_file`
    (`tokens/tokenizers/tekken.py`) builds from tekken.json's `audio` section, of the tokenizer
    `--tokenizer` names (`cached_tokenizer_from_config(model_config)`): the weights stay where they
    are. A directory holding only `tekken.json` is enough: transformers'
    `MistralCommonBackend.from_pretrained` picks the tokenizer file from the directory's listing
    (seen with vLLM 0.31.0's CPU build: tests/vllm/test_vllm_transcription_delay.py).

    The tekken.json read is `SM_VLLM_TOKENIZER`'s when set, else the checkpoint's (`SM_VLLM_MODEL`).

    Raises:
        TokenizerError: vLLM would not load a Mistral tokenizer (`SM_VLLM_TOKENIZER_MODE` is not
            `mistral`), there is no readable `tekken.json`, or its `audio` section has no
            `transcription_delay_ms` (not a streaming Voxtral Realtime checkpoint).
    """
    mode = env.get(TOKENIZER_MODE_VARIABLE, "").strip()
    if mode != "mistral":
        raise TokenizerError(
            f"TRANSCRIPTION_DELAY_MS={delay_ms} needs {TOKENIZER_MODE_VARIABLE}=mistral (got "
            f"{mode!r}): the delay lives in the Mistral tokenizer's tekken.json, which vLLM reads "
            "only in that mode"
        )
    tokenizer_set = env.get(TOKENIZER_VARIABLE, "").strip()
    source_name = TOKENIZER_VARIABLE if tokenizer_set else VLLM_ENV_PREFIX + "MODEL"
    tekken = Path(env.get(source_name, "").strip() or ".") / TEKKEN_FILE
    try:
        config = json.loads(tekken.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenizerError(
            f"TRANSCRIPTION_DELAY_MS={delay_ms}: cannot read {tekken} ({exc.strerror or exc}); "
            f"{source_name} must name a local directory holding the checkpoint's tekken.json"
        ) from None
    except ValueError as exc:
        raise TokenizerError(
            f"TRANSCRIPTION_DELAY_MS={delay_ms}: {tekken} is not JSON ({exc})"
        ) from None
    audio = config.get("audio") if isinstance(config, dict) else None
    if not isinstance(audio, dict) or "transcription_delay_ms" not in audio:
        raise TokenizerError(
            f"TRANSCRIPTION_DELAY_MS={delay_ms}: {tekken} has no audio.transcription_delay_ms, so "
            "this checkpoint is not a streaming Voxtral Realtime one and has no delay to set; "
            "unset TRANSCRIPTION_DELAY_MS (voxtral.transcription_delay_ms)"
        )
    log.info(
        "transcription delay: %s ms in %s, %d ms in the tokenizer vLLM serves (%s)",
        audio["transcription_delay_ms"],
        tekken,
        delay_ms,
        directory,
    )
    audio["transcription_delay_ms"] = delay_ms
    directory.mkdir(parents=True, exist_ok=True)
    (directory / TEKKEN_FILE).write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return directory


def bridge_command() -> list[str]:
    """The bridge's command line: this Python (in the image, the bridge's own venv) running `-m
    bridge`."""
    return [sys.executable, "-m", "bridge"]


async def _stop(process: asyncio.subprocess.Process, timeout_s: float, name: str) -> int:
    """SIGTERM `process`, SIGKILL it if it is still running after `timeout_s`; return its exit
    code."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            async with asyncio.timeout(timeout_s):
                await process.wait()
        except TimeoutError:
            log.warning("%s did not exit within %.0f s of SIGTERM: killing it", name, timeout_s)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode


async def supervise(
    vllm_cmd: Sequence[str],
    bridge_cmd: Sequence[str],
    env: Mapping[str, str],
    drain_s: float,
    bridge_env: Mapping[str, str] | None = None,
    bridge_pass_fds: Sequence[int] = (),
) -> int:
    """Start vLLM (with `env`) and the bridge (with `bridge_env`, default `env`, and the descriptors
    `bridge_pass_fds`, which are then closed here), wait for the first of: vLLM exits, the bridge
    exits, SIGTERM/SIGINT.

    Returns:
        The exit code for the container: 0 after a signal; vLLM's (or the bridge's) non-zero code,
        or 1, when either exits on its own.
    """
    # The handlers come first: a SIGTERM once vLLM runs must stop both processes (without them the
    # default action kills this process and leaves vLLM running, or, as a container's PID 1, ignores
    # the signal).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info("starting vLLM: %s", masked_command(vllm_cmd))
    vllm = await asyncio.create_subprocess_exec(*vllm_cmd, env=dict(env))
    bridge = await asyncio.create_subprocess_exec(
        *bridge_cmd, env=dict(env if bridge_env is None else bridge_env), pass_fds=bridge_pass_fds
    )
    for fd in bridge_pass_fds:
        os.close(fd)  # the bridge holds its own copy (the secrets pipe): ours is no longer needed
    vllm_exit = asyncio.create_task(vllm.wait())
    bridge_exit = asyncio.create_task(bridge.wait())
    signalled = asyncio.create_task(stop.wait())
    await asyncio.wait({vllm_exit, bridge_exit, signalled}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    if stop.is_set() and vllm.returncode is None and bridge.returncode is None:
        log.info("SIGTERM: draining the bridge for up to %.0f s, then stopping vLLM", drain_s)
        await _stop(bridge, drain_s + BRIDGE_EXIT_GRACE_S, "the bridge")
        await _stop(vllm, VLLM_STOP_TIMEOUT_S, "vLLM")
        return 0
    if vllm.returncode is not None:
        log.error("vLLM exited with code %d: stopping the bridge", vllm.returncode)
        await _stop(bridge, BRIDGE_STOP_AFTER_VLLM_DEATH_S, "the bridge")
        return vllm.returncode or 1
    log.error("the bridge exited with code %s: stopping vLLM", bridge.returncode)
    await _stop(vllm, VLLM_STOP_TIMEOUT_S, "vLLM")
    return bridge.returncode or 1


def main() -> int:
    """Container entrypoint; returns the exit code."""
    # returns once the environment holds no secret (env_secrets)
    env_secrets.reexec_without_secrets()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    env = dict(os.environ)
    # before the secrets are in memory: no window in which another process reads them
    env_secrets.make_undumpable()
    try:
        secrets = env_secrets.take_secrets(env)
    except env_secrets.SecretsError as exc:
        log.error("bad setting: %s", exc)
        return 2
    try:
        settings = BridgeEnvironment.from_env({**env, **secrets})
    except BridgeEnvError as exc:
        log.error("bad setting: %s", exc)
        return 2
    if settings.model_s3_uri is not None:
        from .weights import WeightsError, ensure_local_copy

        try:
            local_copy = ensure_local_copy(
                settings.model_s3_uri, Path(need(settings.model_cache_dir)), s3=_s3_client(secrets)
            )
            env[BridgeEnvironment.variable("vllm_model")] = str(local_copy)
        except WeightsError as exc:
            log.error("weights: %s", exc)
            return 3
    tokenizer_dir: Path | None = None
    if settings.transcription_delay_ms is not None:
        tokenizer_dir = Path(tempfile.mkdtemp(prefix="tokenizer-"))
        try:
            delay_ms = settings.transcription_delay_ms
            env[TOKENIZER_VARIABLE] = str(delayed_tokenizer(env, delay_ms, tokenizer_dir))
        except TokenizerError as exc:
            shutil.rmtree(tokenizer_dir, ignore_errors=True)
            log.error("bad setting: %s", exc)
            return 2
    try:
        command = vllm_command(env)
    except BridgeEnvError as exc:
        if tokenizer_dir is not None:
            shutil.rmtree(tokenizer_dir, ignore_errors=True)
        log.error("bad setting: %s", exc)
        return 2
    env["VLLM_HOST"] = VLLM_HOST
    env["VLLM_PORT"] = str(VLLM_PORT)
    # The bridge's process must import this package and the contracts wherever they live (in the
    # image both sit in /opt/bridge/app, which a .pth file in the bridge's venv names; from a source
    # tree, PYTHONPATH). vLLM keeps the environment it was given.
    parents = dict.fromkeys(
        str(Path(file).resolve().parent.parent) for file in (__file__, contracts.__file__)
    )
    python_path = os.pathsep.join(filter(None, [*parents, env.get("PYTHONPATH")]))
    bridge_env = {**env, "PYTHONPATH": python_path}
    bridge_fds: tuple[int, ...] = ()
    if token := {name: value for name, value in secrets.items() if name in BRIDGE_SECRETS}:
        bridge_fds = (
            env_secrets.secrets_pipe(token),
        )  # the bridge reads it once (bridge/__main__.py)
        bridge_env[env_secrets.SECRETS_FD_VARIABLE] = str(bridge_fds[0])
    try:
        return asyncio.run(
            supervise(
                command,
                bridge_command(),
                vllm_environment(env),
                need(settings.drain_s),
                bridge_env,
                bridge_fds,
            )
        )
    finally:
        if tokenizer_dir is not None:
            shutil.rmtree(tokenizer_dir, ignore_errors=True)


#: The secrets the bridge's process receives (through a pipe, never its environment): the callers'
#: bearer token only; it makes no AWS call (CloudWatch metrics are EMF lines on stdout; ECS task
#: protection talks to the ECS agent, which takes no credentials).
BRIDGE_SECRETS = frozenset({"BRIDGE_TOKEN"})


def _s3_client(secrets: Mapping[str, str]):  # a boto3 client
    """The S3 client for the weights' copy: the static credentials taken out of the environment when
    there were some, else None (boto3's default chain: on ECS and SageMaker, the role's container
    credentials)."""
    if "AWS_ACCESS_KEY_ID" not in secrets or "AWS_SECRET_ACCESS_KEY" not in secrets:
        return None
    import boto3

    return boto3.client(
        "s3",
        aws_access_key_id=secrets["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secrets["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=secrets.get("AWS_SESSION_TOKEN"),
    )


#: Exact names vLLM's process receives from the container's environment, and why: the process basics
#: (executables, home, user, locale, time zone, terminal, temporary files), the libraries the DLC's
#: CUDA, NCCL and PyTorch builds load (`LD_LIBRARY_PATH`, `CUDA_HOME`), the Python settings the
#: image sets (`PYTHONPATH`, `PYTHONUNBUFFERED`...), thread counts, and what a download of weights
#: or tokenizer files needs when vLLM fetches them itself (proxies and CA bundles: vLLM's hub
#: downloads, `huggingface_hub`, use `requests`/`httpx`).
VLLM_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "HOSTNAME",
        "PWD",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
    }
)
#: Prefixes of the variable families vLLM's process reads, and why: vLLM's own settings (`VLLM_`,
#: vllm/envs.py, e.g. VLLM_LOGGING_LEVEL, VLLM_USE_V1, VLLM_API_KEY), Hugging Face's (`HF_`:
#: HF_HOME, HF_HUB_OFFLINE, HF_TOKEN for gated downloads; `HUGGING_FACE_HUB_TOKEN` is the older
#: name; `TRANSFORMERS_`), the GPU stack's (`CUDA_`: CUDA_VISIBLE_DEVICES; `NVIDIA_`; `NCCL_` for
#: tensor parallelism; `CUBLAS_`, `CUDNN_`), PyTorch's and its compilers' (`TORCH`, `PYTORCH_`,
#: `TRITON_`, `FLASHINFER_`), and the locale (`LC_`).
VLLM_ENV_PREFIXES = (
    "VLLM_",
    "HF_",
    "HUGGING_FACE_",
    "TRANSFORMERS_",
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "CUBLAS_",
    "CUDNN_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "FLASHINFER_",
    "LC_",
)
#: Names the allowlist would let through but vLLM must not get: `VLLM_HOST`/`VLLM_PORT` are the
#: bridge's settings for where vLLM listens, while vLLM itself reads `VLLM_PORT` as the first port
#: of its internal communication (vLLM docs, "Environment Variables": "not the port and ip for the
#: API server"), so passing ours would start its internal ports at the API port; `VLLM_COMMAND` is
#: this entrypoint's own setting.
VLLM_ENV_EXCLUDED = frozenset({"VLLM_HOST", "VLLM_PORT", "VLLM_COMMAND"})


def vllm_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` vLLM's process gets: `VLLM_ENV_NAMES` and `VLLM_ENV_PREFIXES`, minus
    `VLLM_ENV_EXCLUDED` and the secrets (`env_secrets.SECRET_VARIABLES`).

    Everything else stays out: the callers' bearer token, AWS credentials and the container
    credentials endpoint's address (`AWS_CONTAINER_CREDENTIALS_*`, `AWS_*`: vLLM reads its weights
    from local disk and makes no AWS call), the ECS agent's and metadata addresses (`ECS_*`: task
    protection is the bridge's), SageMaker's and the bridge's own settings, and the `SM_VLLM_*`
    flags, which reach vLLM as its command line.
    """
    return {
        name: value
        for name, value in env.items()
        if (name in VLLM_ENV_NAMES or name.startswith(VLLM_ENV_PREFIXES))
        and name not in VLLM_ENV_EXCLUDED
        and name not in env_secrets.SECRET_VARIABLES
    }


if __name__ == "__main__":
    sys.exit(main())
