"""The container's entrypoint: start vLLM on 127.0.0.1:8081 and the bridge on :8080, and supervise both.

SageMaker runs the image as `docker run <image> serve` and stops it with SIGTERM, then SIGKILL 30 s later
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html); the `serve`
argument is ignored here.

- vLLM flags come from `SM_VLLM_<NAME>` variables, the convention of AWS's vLLM SageMaker containers:
  `SM_VLLM_MAX_MODEL_LEN=32768` becomes `--max-model-len 32768`; a value is passed as one argument,
  untouched (JSON stays intact); `true` (any case) or an empty value becomes the bare flag (as in
  vLLM's `examples/online_serving/sagemaker-entrypoint.sh`), `false` leaves it out.
  `SM_VLLM_HOST` and `SM_VLLM_PORT` are ignored: vLLM always binds 127.0.0.1:8081, reachable only
  through the bridge.
- vLLM exits: the bridge is stopped and the entrypoint exits non-zero within 5 s, so SageMaker replaces
  the instance rather than serving 503 forever.
- Off SageMaker (`MODEL_S3_URI` set, e.g. on ECS): the weights are first copied from S3 to `MODEL_CACHE_DIR`
  once per host and checked against the staging manifest (bridge/weights.py); vLLM's `--model` is that copy.
- SIGTERM (or SIGINT): the bridge drains (stops accepting streams, lets open ones run for up to
  DRAIN_S seconds), then vLLM is stopped, and the entrypoint exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .settings import DEFAULT_DRAIN_S, DEFAULT_VLLM_PORT, Settings, SettingsError

log = logging.getLogger("bridge.entrypoint")

#: Prefix of the environment variables turned into vLLM flags.
VLLM_ENV_PREFIX = "SM_VLLM_"
#: vLLM's address: loopback only, so nothing but the bridge reaches it.
VLLM_HOST = "127.0.0.1"
VLLM_PORT = DEFAULT_VLLM_PORT
#: `SM_VLLM_*` names the entrypoint sets itself (after the prefix).
_FORCED = {"HOST", "PORT"}
#: How vLLM is started (vLLM's OpenAI-compatible server, which serves /v1/realtime); override with the
#: VLLM_COMMAND variable, a JSON list (tests use a stand-in process). `python3` is the first on PATH: the
#: image's own Python with vLLM, not the bridge's venv (which is not activated, only run by path).
DEFAULT_VLLM_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
#: After vLLM dies, how long the bridge gets to close its streams before SIGKILL, seconds (total exit
#: stays under the 5 s the issue allows).
BRIDGE_STOP_AFTER_VLLM_DEATH_S = 2.0
#: After SIGTERM, how long past DRAIN_S the bridge may take to exit before SIGKILL, seconds.
BRIDGE_EXIT_GRACE_S = 3.0
#: Where the weights' host copy goes when MODEL_S3_URI is set and MODEL_CACHE_DIR is not.
DEFAULT_MODEL_CACHE_DIR = "/opt/weights-cache"
#: How long vLLM gets to exit after SIGTERM before SIGKILL, seconds.
VLLM_STOP_TIMEOUT_S = 5.0


def vllm_flags(env: Mapping[str, str]) -> list[str]:
    """vLLM command-line flags from the `SM_VLLM_<NAME>` variables of `env`, sorted by variable name,
    followed by `--host 127.0.0.1 --port 8081`.

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
        if value.strip().lower() in ("true", ""):  # empty: a bare flag, as in vLLM's sagemaker-entrypoint.sh
            flags.append(flag)
        elif value.strip().lower() != "false":
            flags += [flag, value]
    return flags + ["--host", VLLM_HOST, "--port", str(VLLM_PORT)]


def vllm_command(env: Mapping[str, str]) -> list[str]:
    """The full vLLM command line: VLLM_COMMAND (JSON list) or the default, then `vllm_flags(env)`.

    Raises:
        SettingsError: VLLM_COMMAND is not a non-empty JSON list of strings.
    """
    base: list[str] = list(DEFAULT_VLLM_COMMAND)
    if raw := env.get("VLLM_COMMAND", "").strip():
        try:
            base = json.loads(raw)
        except ValueError:
            base = []
        if not base or not isinstance(base, list) or not all(isinstance(part, str) for part in base):
            raise SettingsError(f'VLLM_COMMAND={raw!r} must be a JSON list of strings, e.g. ["vllm", "serve"]')
    return base + vllm_flags(env)


def bridge_command() -> list[str]:
    """The bridge's command line: this Python (in the image, the bridge's own venv) running `-m bridge`."""
    return [sys.executable, "-m", "bridge"]


async def _stop(process: asyncio.subprocess.Process, timeout_s: float, name: str) -> int:
    """SIGTERM `process`, SIGKILL it if it is still running after `timeout_s`; return its exit code."""
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
) -> int:
    """Start vLLM (with `env`) and the bridge (with `bridge_env`, default `env`), wait for the first of:
    vLLM exits, the bridge exits, SIGTERM/SIGINT.

    Returns:
        The exit code for the container: 0 after a signal; vLLM's (or the bridge's) non-zero code, or 1,
        when either exits on its own.
    """
    log.info("starting vLLM: %s", " ".join(vllm_cmd))
    vllm = await asyncio.create_subprocess_exec(*vllm_cmd, env=dict(env))
    bridge = await asyncio.create_subprocess_exec(*bridge_cmd, env=dict(env if bridge_env is None else bridge_env))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
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
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    env = dict(os.environ)
    try:
        settings = Settings.from_env(env)
    except SettingsError as exc:
        log.error("bad setting: %s", exc)
        return 2
    if model_s3_uri := env.get("MODEL_S3_URI", "").strip():
        from .weights import WeightsError, ensure_local_copy

        try:
            cache_dir = Path(env.get("MODEL_CACHE_DIR", DEFAULT_MODEL_CACHE_DIR))
            env["SM_VLLM_MODEL"] = str(ensure_local_copy(model_s3_uri, cache_dir))
        except WeightsError as exc:
            log.error("weights: %s", exc)
            return 3
    try:
        command = vllm_command(env)
    except SettingsError as exc:
        log.error("bad setting: %s", exc)
        return 2
    env["VLLM_HOST"] = VLLM_HOST
    env["VLLM_PORT"] = str(VLLM_PORT)
    # The bridge's process must import this package wherever it lives (in the image a .pth file in the
    # bridge's venv does it; from a source tree, PYTHONPATH). vLLM keeps the environment it was given.
    package_parent = str(Path(__file__).resolve().parent.parent)
    bridge_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))}
    drain_s = settings.drain_s if settings.drain_s is not None else DEFAULT_DRAIN_S
    return asyncio.run(supervise(command, bridge_command(), vllm_environment(env), drain_s, bridge_env))


#: Variables only the bridge needs, kept out of vLLM's environment: the callers' bearer token (see `auth`).
BRIDGE_ONLY_VARIABLES = frozenset({"BRIDGE_TOKEN"})


def vllm_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without `BRIDGE_ONLY_VARIABLES`: vLLM has no use for the callers' token, so it never holds it."""
    return {name: value for name, value in env.items() if name not in BRIDGE_ONLY_VARIABLES}


if __name__ == "__main__":
    sys.exit(main())
