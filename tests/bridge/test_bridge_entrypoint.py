"""The container entrypoint: SM_VLLM_* to vLLM flags, and its exit paths with a stand-in vLLM process."""

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
from bridge.settings import SettingsError

CONTAINER = Path(__file__).resolve().parents[2] / "container"

# A stand-in for vLLM: records its arguments, notes SIGTERM, lives STANDIN_LIFETIME_S then exits STANDIN_EXIT.
STANDIN = """
import json, os, signal, sys, time
record = os.environ["STANDIN_RECORD"]
open(record + ".pythonpath", "w").write(os.environ.get("PYTHONPATH", ""))
open(record, "w").write(json.dumps(sys.argv[1:]))
def on_term(*_):
    open(record + ".term", "w").write("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
time.sleep(float(os.environ.get("STANDIN_LIFETIME_S", "60")))
sys.exit(int(os.environ.get("STANDIN_EXIT", "0")))
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
        "--limit-mm-per-prompt", '{"audio": 1, "image": 0}',
        "--max-model-len", "32768",
        "--model", "/opt/ml/model",
        "--tokenizer-mode", "mistral",
        "--host", "127.0.0.1",
        "--port", "8081",
    ]


def test_an_empty_value_is_a_bare_flag():
    # As vLLM's examples/online_serving/sagemaker-entrypoint.sh does: `SM_VLLM_ENFORCE_EAGER=` means the flag.
    assert vllm_flags({"SM_VLLM_ENFORCE_EAGER": "", "SM_VLLM_TRUST_REMOTE_CODE": "  "})[:2] == [
        "--enforce-eager", "--trust-remote-code",
    ]


def test_true_is_a_bare_flag_in_any_case():
    assert vllm_flags({"SM_VLLM_ENABLE_PREFIX_CACHING": "TRUE"})[:1] == ["--enable-prefix-caching"]


def test_vllm_command_default_and_override():
    assert vllm_command({})[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert vllm_command({"VLLM_COMMAND": '["vllm", "serve"]'})[:3] == ["vllm", "serve", "--host"]
    with pytest.raises(SettingsError, match="VLLM_COMMAND"):
        vllm_command({"VLLM_COMMAND": "vllm serve"})


def start_entrypoint(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    record = tmp_path / "standin.json"
    full_env = {
        **os.environ,
        "VLLM_COMMAND": json.dumps([sys.executable, "-c", STANDIN]),
        "STANDIN_RECORD": str(record),
        "BRIDGE_HOST": "127.0.0.1",
        "BRIDGE_PORT": "0",
        "DRAIN_S": "1",
        "SM_VLLM_MAX_MODEL_LEN": "4096",
        "LOG_LEVEL": "WARNING",
        **env,
    }
    process = subprocess.Popen([sys.executable, "-m", "bridge.entrypoint", "serve"], cwd=CONTAINER, env=full_env)
    deadline = time.monotonic() + 10
    while not record.exists() or not record.read_text():  # created, then written: wait for both
        assert time.monotonic() < deadline, "the stand-in vLLM did not start"
        time.sleep(0.05)
    return process, record


@pytest.mark.parametrize(("vllm_exit", "expected"), [(3, 3), (0, 1)])
def test_vllm_exit_stops_the_container_non_zero(tmp_path, vllm_exit, expected):
    process, record = start_entrypoint(tmp_path, STANDIN_LIFETIME_S="1", STANDIN_EXIT=str(vllm_exit), SM_VLLM_ENFORCE_EAGER="")
    assert json.loads(record.read_text())[-4:] == ["--host", "127.0.0.1", "--port", "8081"]
    assert "--enforce-eager" in json.loads(record.read_text())
    assert "" not in json.loads(record.read_text())
    assert "--max-model-len" in json.loads(record.read_text())
    try:
        code = process.wait(timeout=60)  # the stand-in lives 1 s; a liveness bound, not a latency target
    finally:
        process.kill()
    assert code == expected


def test_sigterm_drains_stops_vllm_and_exits_0(tmp_path):
    process, record = start_entrypoint(tmp_path, PYTHONPATH="/from/the/image")
    # vLLM gets the environment it was given; only the bridge's own process gets the bridge package's path.
    assert (tmp_path / "standin.json.pythonpath").read_text() == "/from/the/image"
    time.sleep(1.0)  # let the bridge start
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=10)
    finally:
        process.kill()
    assert code == 0
    assert (tmp_path / "standin.json.term").read_text() == "SIGTERM"


def test_vllm_never_gets_the_callers_bearer_token():
    from bridge.entrypoint import vllm_environment

    env = {"BRIDGE_TOKEN": "s3cr3t-Token-0123456789", "SM_VLLM_MODEL": "/opt/ml/model", "PATH": "/usr/bin"}
    assert vllm_environment(env) == {"SM_VLLM_MODEL": "/opt/ml/model", "PATH": "/usr/bin"}
    assert env["BRIDGE_TOKEN"] == "s3cr3t-Token-0123456789"  # the bridge's own environment keeps it
