"""``make local`` (``python -m voice_devtools.local``): four processes on loopback, the commands it
prints work as printed (from the repository root, after sourcing the environment file it names), and
Ctrl-C stops every process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile

from voice_devtools.local.__main__ import port_free
from voice_devtools.local.fake_vllm import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_make_local_starts_the_path_prints_working_commands_and_stops_on_ctrl_c(tmp_path):
    ports = {name: free_port() for name in ("runtime", "bridge", "vllm", "sonic")}
    state = tmp_path / "state"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice_devtools.local",
            "--state-dir",
            str(state),
            *(
                argument
                for name, port in ports.items()
                for argument in (f"--{name}-port", str(port))
            ),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
        assert {
            path.name: path.stat().st_mode & 0o777
            for path in state.iterdir()
            if path.suffix in (".sh", ".log")
        } == {
            "env.sh": 0o600,
            "fake-vllm.log": 0o600,
            "bridge.log": 0o600,
            "sonic-stand-in.log": 0o600,
            "front-door.log": 0o600,
        }
        assert (
            "sudo update-ca-certificates" in text
        )  # how an awscrt client trusts the CA (system-wide)
        source = re.search(r"^  (source \S+)$", text, re.MULTILINE).group(1)
        commands = re.findall(
            r"^  (\.venv/bin/voicectl (?:transcribe|speak) .*)$", text, re.MULTILINE
        )
        assert len(commands) == 2 and re.search(r"^  \.venv/bin/voicectl mic ", text, re.MULTILINE)
        # What the speak command writes goes to the state directory, not the checkout.
        assert f"--out {state / 'hello.wav'}" in commands[1]
        for command in commands:
            # Run as printed, from the repository root.
            done = subprocess.run(
                ["bash", "-c", f"{source} && {command}"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, (command, done.stderr)
            assert "Traceback" not in done.stderr
        samples, rate = soundfile.read(state / "hello.wav", dtype="int16")
        assert rate == 44100 and len(samples) == round(len("Hello from SageMaker.") * 0.06 * 44100)
        mic = re.search(
            r"^  (\.venv/bin/voicectl mic .*?)\s+# needs: make mic-deps$", text, re.MULTILINE
        ).group(1)
        assert_the_mic_page_speaks(source, mic)
        # Each call is one line in the front door's log: operation, endpoint, status, duration.
        log = (state / "front-door.log").read_text()
        bidi = r"InvokeEndpointWithBidirectionalStream voxtral-realtime/AllTraffic 200 \d+\.\d+ s "
        sonic = r"InvokeEndpointWithResponseStream sonic-tts/AllTraffic 200 \d+\.\d+ s "
        assert len(re.findall(bidi, log)) == 1 and len(re.findall(sonic, log)) == 2
        assert "Traceback" not in log
    finally:
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "stopped" in err
    # Every part is gone: each port can be bound again.
    for port in ports.values():
        assert port_free(port), port


def assert_the_mic_page_speaks(source: str, command: str) -> None:
    """Start the printed mic command (on a free port, not Gradio's customary 7860) and have its
    Speak panel speak through the front door, as the page's script does over its WebSocket."""
    import json

    from websockets.sync.client import connect

    from voice_client.mic import SPEAK_PATH

    port = free_port()
    page = subprocess.Popen(
        ["bash", "-c", f"{source} && exec {command} --port {port}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        printed = []
        while not any(line.startswith("voicectl mic: open http://") for line in printed):
            line = page.stderr.readline()
            assert line, f"voicectl mic ended early: {''.join(printed)}"
            printed.append(line)
        origin = f"http://127.0.0.1:{port}"
        url = f"ws://127.0.0.1:{port}{SPEAK_PATH}"
        with connect(url, origin=origin, open_timeout=30) as socket_:
            socket_.send(json.dumps({"type": "speak", "text": "Hello."}))
            started = json.loads(socket_.recv(timeout=30))
            audio = b""
            while isinstance(message := socket_.recv(timeout=30), bytes):
                audio += message
        assert started == {"type": "audio", "sample_rate_hz": 44100}
        done = json.loads(message)
        assert done["type"] == "done", done
        # The stand-in's tone: 60 ms per character.
        assert len(audio) == 2 * round(len("Hello.") * 0.06 * 44100)
    finally:
        os.killpg(page.pid, signal.SIGINT)
        page.communicate(timeout=30)


def test_make_local_with_the_real_vllm_says_how_to_build_its_environment_when_missing(
    monkeypatch, tmp_path, capsys
):
    from voice_devtools.local import __main__ as local_main, real_vllm

    monkeypatch.setattr(real_vllm, "VLLM_VENV", tmp_path / "no-venv-vllm")
    assert local_main.main(["--vllm", "real", "--state-dir", str(tmp_path / "state")]) == 2
    err = capsys.readouterr().err
    assert f"no vLLM environment at {tmp_path / 'no-venv-vllm'}: run `make vllm-deps`" in err
    assert "`make local VLLM=real`, which builds it first" in err
    assert not (tmp_path / "state").exists()  # nothing started, nothing written


def test_the_real_vllm_command_serves_the_mistral_format_checkpoint_on_loopback(tmp_path):
    from voice_devtools.local import real_vllm

    command = real_vllm.command(tmp_path / "model", 18081)
    assert command[:3] == [str(real_vllm.python()), "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert (
        flags["--host"] == "127.0.0.1"
        and flags["--port"] == "18081"
        and flags["--model"] == str(tmp_path / "model")
    )
    assert (flags["--tokenizer-mode"], flags["--config-format"], flags["--load-format"]) == (
        "mistral",
    ) * 3
    assert flags["--max-model-len"] == str(real_vllm.MAX_MODEL_LEN)
    env = real_vllm.environment({"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"})
    assert (
        env["HF_HUB_OFFLINE"] == "1"
        and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
        and "PYTHONPATH" not in env
    )


def test_a_bad_name_is_refused_on_the_terminal_before_anything_starts(tmp_path, capsys):
    from voice_devtools.local.__main__ import main

    state = tmp_path / "state"
    assert (
        main(
            [
                "--state-dir",
                str(state),
                "--name",
                "runtime.sagemaker.us-east-1.amazonaws.com",
                "--name",
                "bad name",
            ]
        )
        == 2
    )
    assert "--name 'bad name': not a host name" in capsys.readouterr().err
    assert not state.exists()  # no process was started, no log written


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--transcription-delay-ms", "160"],
            "--transcription-delay-ms 160 needs --vllm real (make local VLLM=real): the fake "
            "vLLM scripts its deltas (the first after 0.6 s of audio whatever the delay); the "
            "delay is a setting of the real server's tokenizer",
        ),
        (
            ["--vllm", "real", "--transcription-delay-ms", "100"],
            "--transcription-delay-ms 100: must be a multiple of 80 from 80 to 1200, or 2400 "
            "(ms: the delays the Voxtral Realtime model card allows)",
        ),
    ],
)
def test_a_transcription_delay_is_refused_before_anything_starts(tmp_path, capsys, argv, message):
    from voice_devtools.local.__main__ import main

    state = tmp_path / "state"
    assert main([*argv, "--state-dir", str(state)]) == 2
    assert capsys.readouterr().err == f"python -m voice_devtools.local: {message}\n"
    assert not state.exists()


def test_the_real_vllm_serves_a_delayed_copy_of_the_checkpoints_tokenizer(tmp_path):
    from voice_devtools.local import real_vllm, tiny_voxtral

    model = tmp_path / "model"
    model.mkdir()
    (model / "tekken.json").write_text(json.dumps(tiny_voxtral.tekken()))
    tokenizer = real_vllm.write_tokenizer(model, 160, tmp_path / "tokenizer-160ms")
    patched = json.loads((tokenizer / "tekken.json").read_text())
    assert patched["audio"]["transcription_delay_ms"] == 160
    original = tiny_voxtral.tekken()
    assert {**patched, "audio": {**patched["audio"], "transcription_delay_ms": 480}} == original
    command = real_vllm.command(model, 18081, tokenizer=tokenizer)
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert flags["--tokenizer"] == str(tokenizer) and flags["--model"] == str(model)
    assert "--tokenizer" not in real_vllm.command(model, 18081)


def test_the_bridges_settings_are_the_contracts_with_the_real_vllms_context_and_delay():
    """make local writes the bridge's environment through the contract only: with vLLM's real
    server, its context and the delay asked for; with the fake, neither."""
    from voice_devtools.local import real_vllm
    from voice_devtools.local.__main__ import bridge_settings, parse_args

    real = bridge_settings(parse_args(["--vllm", "real", "--transcription-delay-ms", "160"]))
    assert real.to_env() == {
        "TRANSCRIPTION_DELAY_MS": "160",
        "BRIDGE_HOST": "127.0.0.1",
        "BRIDGE_PORT": "8080",
        "VLLM_PORT": "8081",
        "MAX_MODEL_LEN": str(real_vllm.MAX_MODEL_LEN),
        "DRAIN_S": "0",
    }
    fake = bridge_settings(parse_args([]))
    assert (fake.max_model_len, fake.transcription_delay_ms, fake.port) == (None, None, 8080)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--bedrock-first-token-ms", "500"],
            "--bedrock-first-token-ms 500 needs --agent (make local AGENT=1): the Bedrock stand-in "
            "runs only with the voice agent",
        ),
        (
            ["--agent", "--bedrock-first-token-ms", "-5"],
            "--bedrock-first-token-ms -5: must be 0-30000 ms (the bot's Bedrock client gives up on "
            "a silent stream after 60 s)",
        ),
    ],
)
def test_a_bedrock_first_token_time_is_refused_before_anything_starts(
    tmp_path, capsys, argv, message
):
    from voice_devtools.local.__main__ import main

    state = tmp_path / "state"
    assert main([*argv, "--state-dir", str(state)]) == 2
    assert capsys.readouterr().err == f"python -m voice_devtools.local: {message}\n"
    assert not state.exists()


def test_the_bedrock_stand_in_starts_with_the_first_token_time_asked_for(tmp_path):
    from voice_devtools.local.__main__ import agent_parts, parse_args

    bedrock, _ = agent_parts(
        parse_args(["--agent", "--bedrock-first-token-ms", "600"]),
        tmp_path,
        {},
        "AKIALOCALTEST",
        "secret",
    )
    assert bedrock.command[1:] == [
        "-m",
        "voice_devtools.local.fake_bedrock",
        "--port",
        "8095",
        "--first-token-ms",
        "600",
    ]
    default, _ = agent_parts(parse_args(["--agent"]), tmp_path, {}, "AKIALOCALTEST", "secret")
    assert default.command[1:] == ["-m", "voice_devtools.local.fake_bedrock", "--port", "8095"]
