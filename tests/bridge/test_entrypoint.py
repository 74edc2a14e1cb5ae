"""The container entrypoint: SM_VLLM_* to vLLM flags, and its exit paths with a stand-in vLLM
process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridge.entrypoint import vllm_command, vllm_flags
from contracts.bridge_env import BridgeEnvError

ROOT = Path(__file__).resolve().parents[2]
#: Where a source tree's entrypoint runs: the folder that holds the package ``bridge``.
SERVICES = ROOT / "services"
#: What a source tree's entrypoint needs on its path besides its own folder: the checkout's root
#: (contracts/).
SOURCE_PATH = str(ROOT)

# A stand-in for vLLM: notes SIGTERM (from before it records anything), records its arguments, lives
# STANDIN_LIFETIME_S then exits STANDIN_EXIT. Its settings are VLLM_ variables: vLLM's process gets
# only the variables it needs (entrypoint.vllm_environment).
STANDIN = """
import json, os, signal, sys, time
record = os.environ["VLLM_STANDIN_RECORD"]
def on_term(*_):
    open(record + ".term", "w").write("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(record + ".pythonpath", "w").write(os.environ.get("PYTHONPATH", ""))
open(record + ".env", "w").write(json.dumps(dict(os.environ)))
open(record, "w").write(json.dumps(sys.argv[1:]))
time.sleep(float(os.environ.get("VLLM_STANDIN_LIFETIME_S", "60")))
sys.exit(int(os.environ.get("VLLM_STANDIN_EXIT", "0")))
"""


def test_flags_from_sm_vllm_variables():
    env = {
        "SM_VLLM_MODEL": "/opt/ml/model",
        "SM_VLLM_MAX_MODEL_LEN": "32768",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_TRUST_REMOTE_CODE": "False",
        "SM_VLLM_LIMIT_MM_PER_PROMPT": '{"audio": 1, "image": 0}',
        "SM_VLLM_TOKENIZER_MODE": "mistral",
        "SM_VLLM_HOST": "0.0.0.0",
        "SM_VLLM_PORT": "9000",
        "OTHER": "x",
        "SM_VLLM_": "ignored",
    }
    assert vllm_flags(env) == [
        "--enforce-eager",
        "--limit-mm-per-prompt",
        '{"audio": 1, "image": 0}',
        "--max-model-len",
        "32768",
        "--model",
        "/opt/ml/model",
        "--tokenizer-mode",
        "mistral",
        "--host",
        "127.0.0.1",
        "--port",
        "8081",
    ]


def test_an_empty_value_is_a_bare_flag():
    # As vLLM's examples/online_serving/sagemaker-entrypoint.sh does: `SM_VLLM_ENFORCE_EAGER=` means
    # the flag.
    assert vllm_flags({"SM_VLLM_ENFORCE_EAGER": "", "SM_VLLM_TRUST_REMOTE_CODE": "  "})[:2] == [
        "--enforce-eager",
        "--trust-remote-code",
    ]


def test_true_is_a_bare_flag_in_any_case():
    assert vllm_flags({"SM_VLLM_ENABLE_PREFIX_CACHING": "TRUE"})[:1] == ["--enable-prefix-caching"]


def test_vllm_command_default_and_override():
    assert vllm_command({})[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert vllm_command({"VLLM_COMMAND": '["vllm", "serve"]'})[:3] == ["vllm", "serve", "--host"]
    with pytest.raises(BridgeEnvError, match="VLLM_COMMAND"):
        vllm_command({"VLLM_COMMAND": "vllm serve"})


def start_entrypoint(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    record = tmp_path / "standin.json"
    full_env = {
        **os.environ,
        "VLLM_COMMAND": json.dumps([sys.executable, "-c", STANDIN]),
        "VLLM_STANDIN_RECORD": str(record),
        "BRIDGE_HOST": "127.0.0.1",
        "BRIDGE_PORT": "0",
        "DRAIN_S": "1",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": SOURCE_PATH,
        **env,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge.entrypoint", "serve"], cwd=SERVICES, env=full_env
    )
    deadline = time.monotonic() + 10
    while not record.exists() or not record.read_text():  # created, then written: wait for both
        assert time.monotonic() < deadline, "the stand-in vLLM did not start"
        time.sleep(0.05)
    return process, record


@pytest.mark.parametrize(("vllm_exit", "expected"), [(3, 3), (0, 1)])
def test_vllm_exit_stops_the_container_non_zero(tmp_path, vllm_exit, expected):
    process, record = start_entrypoint(
        tmp_path,
        VLLM_STANDIN_LIFETIME_S="1",
        VLLM_STANDIN_EXIT=str(vllm_exit),
        SM_VLLM_ENFORCE_EAGER="",
    )
    assert json.loads(record.read_text())[-4:] == ["--host", "127.0.0.1", "--port", "8081"]
    assert "--enforce-eager" in json.loads(record.read_text())
    assert "" not in json.loads(record.read_text())
    assert "--max-model-len" in json.loads(record.read_text())
    try:
        code = process.wait(
            timeout=60
        )  # the stand-in lives 1 s; a liveness bound, not a latency target
    finally:
        process.kill()
    assert code == expected


def wait_for_ping(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """Return once the bridge on ``port`` answers ``GET /ping`` (200, or 503 while the stand-in vLLM
    is mute).

    Raises:
        AssertionError: ``process`` ended, or no answer within ``timeout_s`` (a liveness bound).
    """
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            assert process.poll() is None, f"the entrypoint exited with {process.returncode}"
            assert time.monotonic() < deadline, "the bridge did not listen"
            time.sleep(0.05)


def test_sigterm_drains_stops_vllm_and_exits_0(tmp_path):
    from voice_devtools.local.fake_vllm import free_port

    port = free_port()
    given = os.pathsep.join([SOURCE_PATH, "/from/the/image"])
    process, _record = start_entrypoint(tmp_path, PYTHONPATH=given, BRIDGE_PORT=str(port))
    # vLLM gets the environment it was given; only the bridge's own process gets the bridge
    # package's path.
    assert (tmp_path / "standin.json.pythonpath").read_text() == given
    wait_for_ping(
        port, process
    )  # both run: the signal comes to a bridge that serves, as SageMaker's would
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=10)
    finally:
        process.kill()
    assert code == 0
    assert (tmp_path / "standin.json.term").read_text() == "SIGTERM"


def test_vllm_gets_only_the_variables_it_needs():
    from bridge.entrypoint import vllm_environment

    env = {
        "BRIDGE_TOKEN": "s3cr3t-Token-0123456789",
        "SM_VLLM_MODEL": "/opt/ml/model",
        "PATH": "/usr/bin",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "session",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/x",
        "AWS_REGION": "us-east-1",
        "ECS_AGENT_URI": "http://169.254.170.2/api/x",
        "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4",
        "VLLM_HOST": "127.0.0.1",
        "VLLM_PORT": "8081",
        "VLLM_COMMAND": '["vllm"]',
        "MAX_STREAMS": "8",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HOME": "/hf",
        "HF_TOKEN": "hf_x",
        "CUDA_VISIBLE_DEVICES": "0",
        "NCCL_DEBUG": "INFO",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "PYTORCH_CUDA_ALLOC_CONF": "x",
        "LC_ALL": "C.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
        "SM_VLLM_API_KEY": "k",
    }
    assert vllm_environment(env) == {
        "PATH": "/usr/bin",
        "VLLM_LOGGING_LEVEL": "DEBUG",
        "HF_HOME": "/hf",
        "HF_TOKEN": "hf_x",
        "CUDA_VISIBLE_DEVICES": "0",
        "NCCL_DEBUG": "INFO",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "PYTORCH_CUDA_ALLOC_CONF": "x",
        "LC_ALL": "C.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
    }


def test_secret_valued_flags_are_masked_in_the_log_line():
    from bridge.entrypoint import masked_command

    command = [
        "vllm",
        "--api-key",
        "sk-123",
        "--hf-token=hf_abc",
        "--max-model-len",
        "4096",
        "--served-model-name",
        "m",
    ]
    assert (
        masked_command(command)
        == "vllm --api-key *** --hf-token=*** --max-model-len 4096 --served-model-name m"
    )


def proc_environ(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_secrets_leave_every_environment_and_the_log_before_vllm_starts(tmp_path):
    import urllib.request

    from voice_devtools.local.fake_vllm import free_port

    token, secret_key, api_key = (
        "s3cr3t-Token-0123456789abcdef",
        "wJalrXUtnFEMI/K7MDENG",
        "sk-vllm-api-key-42",
    )
    port = free_port()
    log = tmp_path / "entrypoint.log"
    with log.open("wb") as log_file:
        record = tmp_path / "standin.json"
        full_env = {
            **os.environ,
            "VLLM_COMMAND": json.dumps([sys.executable, "-c", STANDIN]),
            "VLLM_STANDIN_RECORD": str(record),
            "BRIDGE_HOST": "127.0.0.1",
            "BRIDGE_PORT": str(port),
            "DRAIN_S": "1",
            "BRIDGE_TOKEN": token,
            "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": secret_key,
            "AWS_SESSION_TOKEN": "session-token-xyz",
            "SM_VLLM_API_KEY": api_key,
            "PYTHONPATH": SOURCE_PATH,
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "bridge.entrypoint", "serve"],
            cwd=SERVICES,
            env=full_env,
            stderr=log_file,
        )
        try:
            deadline = time.monotonic() + 10
            while not record.exists() or not record.read_text() or len(children(process.pid)) < 2:
                assert time.monotonic() < deadline, "the entrypoint did not start both processes"
                time.sleep(0.05)
            for _ in range(
                100
            ):  # the bridge listens once it has read its token (/ping: 503, the stand-in is mute)
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1)
                except urllib.error.HTTPError:
                    break
                except OSError:
                    time.sleep(0.1)
            environments = {"entrypoint": proc_environ(process.pid)}
            for child in children(process.pid):
                environments[Path(f"/proc/{child}/cmdline").read_text().replace("\0", " ")[:60]] = (
                    proc_environ(child)
                )
            secrets = (token, secret_key, "session-token-xyz", "AKIAEXAMPLE")
            leaks = {
                name: [secret for secret in secrets if secret in environ]
                for name, environ in environments.items()
            }
            assert leaks == {name: [] for name in environments}
            vllm_env = json.loads((tmp_path / "standin.json.env").read_text())
            assert not any(
                name.startswith("AWS_") or name in ("BRIDGE_TOKEN", "VLLM_PORT")
                for name in vllm_env
            )
            # The bridge has its token (read from the entrypoint's pipe): a wrong one is refused,
            # the right one not.
            from websockets.exceptions import InvalidStatus
            from websockets.sync.client import connect

            url = f"ws://127.0.0.1:{port}/invocations-bidirectional-stream"
            with pytest.raises(InvalidStatus) as refused:
                connect(
                    url,
                    additional_headers={"Authorization": "Bearer wrong-token-0123456789"},
                    open_timeout=5,
                )
            assert refused.value.response.status_code == 401
            with connect(
                url, additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=5
            ) as accepted:
                assert accepted.response.status_code == 101
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            finally:
                process.kill()
    logged = log.read_text()
    assert "starting vLLM:" in logged and "--api-key ***" in logged
    assert api_key not in logged and token not in logged


# --- TRANSCRIPTION_DELAY_MS: the tokenizer vLLM is served -----------------------------------------


def checkpoint(directory: Path, audio: dict | None = None) -> Path:
    """A checkpoint directory whose tekken.json has the `audio` section `audio` (default: the tiny
    checkpoint's, devtools/voice_devtools/local/tiny_voxtral.py, as the real repository's), and
    weights that must stay untouched."""
    from voice_devtools.local import tiny_voxtral

    tekken = tiny_voxtral.tekken()
    if audio is not None:
        tekken["audio"] = audio
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tekken.json").write_text(json.dumps(tekken))
    (directory / "consolidated.safetensors").write_bytes(b"weights")
    return directory


def checkpoint_audio(**changes) -> dict:
    """The tiny checkpoint's `audio` section with `changes`; a value of None removes the key."""
    from voice_devtools.local import tiny_voxtral

    audio = {**tiny_voxtral.tekken()["audio"], **changes}
    return {key: value for key, value in audio.items() if value is not None}


def delay_of(directory: Path) -> int:
    return json.loads((directory / "tekken.json").read_text())["audio"]["transcription_delay_ms"]


def test_the_delayed_tokenizer_is_the_checkpoints_with_only_the_delay_replaced(tmp_path):
    from bridge.entrypoint import delayed_tokenizer

    model = checkpoint(tmp_path / "model")
    env = {"SM_VLLM_MODEL": str(model), "SM_VLLM_TOKENIZER_MODE": "mistral"}
    written = delayed_tokenizer(env, 160, tmp_path / "tokenizer")
    assert written == tmp_path / "tokenizer"
    assert sorted(path.name for path in written.iterdir()) == ["tekken.json"]
    original, patched = (json.loads((d / "tekken.json").read_text()) for d in (model, written))
    assert (delay_of(model), delay_of(written)) == (480, 160)
    assert {**patched, "audio": {**patched["audio"], "transcription_delay_ms": 480}} == original
    # The checkpoint is left as it was.
    assert (model / "consolidated.safetensors").read_bytes() == b"weights"
    assert json.loads((model / "tekken.json").read_text()) == original


def test_a_tokenizer_named_apart_from_the_model_is_the_one_patched(tmp_path):
    from bridge.entrypoint import delayed_tokenizer

    source = checkpoint(tmp_path / "tokenizer-source", checkpoint_audio(transcription_delay_ms=960))
    env = {
        "SM_VLLM_MODEL": str(tmp_path / "no-such-model"),
        "SM_VLLM_TOKENIZER": str(source),
        "SM_VLLM_TOKENIZER_MODE": "mistral",
    }
    assert delay_of(delayed_tokenizer(env, 2400, tmp_path / "served")) == 2400


NO_DELAY = (
    "TRANSCRIPTION_DELAY_MS=160: {model}/tekken.json has no audio.transcription_delay_ms, "
    "so this checkpoint is not a streaming Voxtral Realtime one and has no delay to set; "
    "unset TRANSCRIPTION_DELAY_MS (voxtral.transcription_delay_ms)"
)


@pytest.mark.parametrize(
    ("make", "env_extra", "message"),
    [
        (lambda d: checkpoint(d, checkpoint_audio(transcription_delay_ms=None)), {}, NO_DELAY),
        (lambda d: checkpoint(d, {}), {}, NO_DELAY),  # no audio section: a text model's tokenizer
        (
            lambda d: d,
            {},
            "TRANSCRIPTION_DELAY_MS=160: cannot read {model}/tekken.json (No such file or "
            "directory); SM_VLLM_MODEL must name a local directory holding the checkpoint's "
            "tekken.json",
        ),
        (
            checkpoint,
            {"SM_VLLM_TOKENIZER_MODE": "auto"},
            "TRANSCRIPTION_DELAY_MS=160 needs SM_VLLM_TOKENIZER_MODE=mistral (got 'auto'): the "
            "delay lives in the Mistral tokenizer's tekken.json, which vLLM reads only in that "
            "mode",
        ),
    ],
)
def test_a_checkpoint_without_the_delay_is_refused_with_the_reason(
    tmp_path, make, env_extra, message
):
    from bridge.entrypoint import TokenizerError, delayed_tokenizer

    model = make(tmp_path / "model")
    env = {"SM_VLLM_MODEL": str(model), "SM_VLLM_TOKENIZER_MODE": "mistral", **env_extra}
    with pytest.raises(TokenizerError) as refused:
        delayed_tokenizer(env, 160, tmp_path / "tokenizer")
    assert str(refused.value) == message.format(model=model)
    assert not (tmp_path / "tokenizer").exists()


def test_the_entrypoint_starts_vllm_on_the_delayed_tokenizer_and_removes_it_at_exit(tmp_path):
    model = checkpoint(tmp_path / "model")
    process, record = start_entrypoint(
        tmp_path,
        SM_VLLM_MODEL=str(model),
        SM_VLLM_TOKENIZER_MODE="mistral",
        TRANSCRIPTION_DELAY_MS="160",
        VLLM_STANDIN_LIFETIME_S="1",
    )
    try:
        argv = json.loads(record.read_text())
        tokenizer = Path(argv[argv.index("--tokenizer") + 1])
        assert argv[argv.index("--model") + 1] == str(model)  # the weights stay where they are
        assert delay_of(tokenizer) == 160
        assert process.wait(timeout=60) == 1  # the stand-in exits by itself: the container stops
    finally:
        process.kill()
    assert not tokenizer.exists()  # the temporary directory goes with the container's processes


def run_entrypoint(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The entrypoint with the stand-in vLLM, to its exit (a refusal exits before vLLM starts)."""
    full_env = {
        **os.environ,
        "VLLM_COMMAND": json.dumps([sys.executable, "-c", STANDIN]),
        "VLLM_STANDIN_RECORD": str(tmp_path / "standin.json"),
        "BRIDGE_PORT": "0",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "bridge.entrypoint", "serve"],
        cwd=SERVICES,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_entrypoint_refuses_to_start_a_checkpoint_without_the_delay(tmp_path):
    model = checkpoint(tmp_path / "model", checkpoint_audio(transcription_delay_ms=None))
    done = run_entrypoint(
        tmp_path,
        SM_VLLM_MODEL=str(model),
        SM_VLLM_TOKENIZER_MODE="mistral",
        TRANSCRIPTION_DELAY_MS="160",
    )
    assert done.returncode == 2
    assert "bad setting: " + NO_DELAY.format(model=model) in done.stderr
    assert not (tmp_path / "standin.json").exists()  # vLLM was never started


@pytest.mark.parametrize("value", ["100", "0", "1280", "soon"])
def test_the_entrypoint_refuses_a_delay_the_model_card_does_not_allow(tmp_path, value):
    done = run_entrypoint(tmp_path, TRANSCRIPTION_DELAY_MS=value)
    assert done.returncode == 2
    assert (
        f"bad setting: TRANSCRIPTION_DELAY_MS='{value}' must be a multiple of 80 from 80 to "
        "1200, or 2400 (ms: the delays the Voxtral Realtime model card allows), or unset for "
        "the checkpoint's own"
    ) in done.stderr
    assert not (tmp_path / "standin.json").exists()


def test_a_refusal_after_the_tokenizer_was_written_leaves_no_temporary_directory(tmp_path):
    model = checkpoint(tmp_path / "model")
    (tmp_path / "tmp").mkdir()
    done = run_entrypoint(
        tmp_path,
        SM_VLLM_MODEL=str(model),
        SM_VLLM_TOKENIZER_MODE="mistral",
        TRANSCRIPTION_DELAY_MS="160",
        VLLM_COMMAND="vllm serve",
        TMPDIR=str(tmp_path / "tmp"),
    )
    assert done.returncode == 2 and "bad setting: VLLM_COMMAND='vllm serve'" in done.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
