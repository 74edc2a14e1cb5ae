"""``make local`` (``python -m voicectl.local``): four processes on loopback, the commands it prints
work as printed (from the repository root, after sourcing the environment file it names), and Ctrl-C
stops every process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import soundfile

from voicectl.local.__main__ import port_free
from voicectl.local.fake_vllm import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_make_local_starts_the_path_prints_working_commands_and_stops_on_ctrl_c(tmp_path):
    ports = {name: free_port() for name in ("runtime", "bridge", "vllm", "sonic")}
    state = tmp_path / "state"
    process = subprocess.Popen(
        [sys.executable, "-m", "voicectl.local", "--state-dir", str(state),
         *(argument for name, port in ports.items() for argument in (f"--{name}-port", str(port)))],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, f"make local ended early: {process.stderr.read()}"
            banner.append(line)
            if line.startswith("Ctrl-C stops everything"):
                break
        text = "".join(banner)
        assert f"https://localhost:{ports['runtime']}" in text
        # The files holding the local secret key are the user's alone.
        assert {path.name: path.stat().st_mode & 0o777 for path in state.iterdir() if path.suffix in (".sh", ".log")} \
            == {"env.sh": 0o600, "fake-vllm.log": 0o600, "bridge.log": 0o600, "sonic-stand-in.log": 0o600,
                "front-door.log": 0o600}
        assert "sudo update-ca-certificates" in text  # how an awscrt client trusts the CA (system-wide)
        source = re.search(r"^  (source \S+)$", text, re.MULTILINE).group(1)
        commands = re.findall(r"^  (\.venv/bin/voicectl (?:transcribe|speak) .*)$", text, re.MULTILINE)
        assert len(commands) == 2 and re.search(r"^  \.venv/bin/voicectl mic ", text, re.MULTILINE)
        for command in commands:
            # Run as printed, from the repository root; the WAV goes to a scratch directory, not the
            # checkout.
            command = command.replace("--out hello.wav", f"--out {tmp_path / 'hello.wav'}")
            done = subprocess.run(["bash", "-c", f"{source} && {command}"], cwd=ROOT, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, (command, done.stderr)
            assert "Traceback" not in done.stderr
        samples, rate = soundfile.read(tmp_path / "hello.wav", dtype="int16")
        assert rate == 44100 and len(samples) == round(len("Hello from SageMaker.") * 0.06 * 44100)
    finally:
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "stopped" in err
    # Every part is gone: each port can be bound again.
    for port in ports.values():
        assert port_free(port), port



def test_make_local_with_the_real_vllm_says_how_to_build_its_environment_when_missing(monkeypatch, tmp_path, capsys):
    from voicectl.local import __main__ as local_main, real_vllm

    monkeypatch.setattr(real_vllm, "VLLM_VENV", tmp_path / "no-venv-vllm")
    assert local_main.main(["--vllm", "real", "--state-dir", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert f"no vLLM environment at {tmp_path / 'no-venv-vllm'}: run `make test-vllm` once" in err
    assert not (tmp_path / "state").exists()  # nothing started, nothing written


def test_the_real_vllm_command_serves_the_mistral_format_checkpoint_on_loopback(tmp_path):
    from voicectl.local import real_vllm

    command = real_vllm.command(tmp_path / "model", 18081)
    assert command[:3] == [str(real_vllm.python()), "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "18081" and flags["--model"] == str(tmp_path / "model")
    assert (flags["--tokenizer-mode"], flags["--config-format"], flags["--load-format"]) == ("mistral",) * 3
    assert flags["--max-model-len"] == str(real_vllm.MAX_MODEL_LEN)
    env = real_vllm.environment({"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"})
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "PYTHONPATH" not in env


def test_a_bad_name_is_refused_on_the_terminal_before_anything_starts(tmp_path, capsys):
    from voicectl.local.__main__ import main

    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "--name", "runtime.sagemaker.us-east-1.amazonaws.com",
                 "--name", "bad name"]) == 2
    assert "--name 'bad name': not a host name" in capsys.readouterr().err
    assert not state.exists()  # no process was started, no log written
