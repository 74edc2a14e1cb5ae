"""The commands the READMEs give for running things locally work as written (the ports moved through
the variables the READMEs name, so that the test does not collide with a running ``make local``),
and ``voicectl local-runtime`` refuses bad arguments with a usage error."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from voice_devtools.local.fake_vllm import free_port

ROOT = Path(__file__).resolve().parents[3]


def fenced_block_after(readme: Path, heading: str) -> list[str]:
    """The command lines of the first ```bash block after ``heading`` (comments stripped)."""
    text = readme.read_text()
    section = text[text.index(heading) :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_bridge_readme_runs_the_bridge_with_the_fake_vllm_as_written():
    readme = ROOT / "services" / "bridge" / "README.md"
    lines = fenced_block_after(readme, "## Run the bridge without Docker")
    assert lines[0] == "make deps"  # done already by the test run
    script = "set -e\n" + "\n".join(lines[1:]) + "\n"
    assert "python -m bridge" in script and "voice_devtools.local.fake_vllm" in script
    bridge_port, vllm_port = free_port(), free_port()
    env = {
        **os.environ,
        "BRIDGE_HOST": "127.0.0.1",
        "BRIDGE_PORT": str(bridge_port),
        "VLLM_PORT": str(vllm_port),
    }
    shell = subprocess.Popen(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, status = time.monotonic() + 30, None
        while time.monotonic() < deadline and status != 200:
            assert shell.poll() is None, shell.stderr.read()
            try:
                status = urllib.request.urlopen(
                    f"http://127.0.0.1:{bridge_port}/ping", timeout=2
                ).status
            except OSError:
                time.sleep(0.2)
        assert (
            status == 200
        )  # the bridge is up and the fake vLLM behind it answers its health probe
        models = json.loads(
            urllib.request.urlopen(f"http://127.0.0.1:{vllm_port}/v1/models", timeout=2).read()
        )
        assert models["data"][0]["id"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    finally:
        os.killpg(shell.pid, signal.SIGTERM)
        shell.wait(10)


def test_local_runtime_refuses_bad_arguments(capsys):
    from voicectl import cli

    assert cli.main(["local-runtime", "--endpoint", "voxtral-realtime=ftp://127.0.0.1:8080"]) == 2
    assert "container URL 'ftp://127.0.0.1:8080'" in capsys.readouterr().err
    assert cli.main(["local-runtime", "--endpoint", "bad_name=ws://127.0.0.1:8080"]) == 2
    assert "endpoint name 'bad_name'" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "local-runtime",
                "--endpoint",
                "a=ws://127.0.0.1:1",
                "--endpoint",
                "a=ws://127.0.0.1:2",
            ]
        )
        == 2
    )
    assert "endpoint a variant AllTraffic is given twice" in capsys.readouterr().err
    assert (
        cli.main(["local-runtime", "--endpoint", "a=ws://127.0.0.1:1", "--ping-interval", "0"]) == 2
    )
    assert "ping_interval_s must be a positive number" in capsys.readouterr().err


def test_local_runtime_reports_a_port_in_use(capsys):
    import socket

    from voicectl import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert (
            cli.main(
                [
                    "local-runtime",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--endpoint",
                    "a=ws://127.0.0.1:1",
                ]
            )
            == 2
        )
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url, message",
    [
        ("ftp://x", "must be https://HOST[:PORT]"),
        ("https://localhost:99999", "invalid port"),
        ("https://localhost:8443/endpoints", "with no path"),
    ],
)
def test_endpoint_url_is_checked_before_anything_is_called(url, message, tmp_path):
    from tests.unit.voice_client.clients_testkit import client_parser
    from voicectl.cli import UsageError
    from voicectl.commands import speak, transcribe

    with pytest.raises(UsageError, match=re.escape(message)):
        transcribe.run(
            client_parser().parse_args(
                [
                    "transcribe",
                    "tests/clients/data/speech_22k_stereo.wav",
                    "--endpoint",
                    "e",
                    "--endpoint-url",
                    url,
                ]
            )
        )
    with pytest.raises(UsageError, match=re.escape(message)):
        speak.run(
            client_parser().parse_args(
                [
                    "speak",
                    "hi",
                    "--endpoint",
                    "e",
                    "--voice",
                    "v",
                    "--endpoint-url",
                    url,
                    "--out",
                    str(tmp_path / "x.wav"),
                ]
            ),
            client=object(),
        )
    with pytest.raises(UsageError, match="goes with --endpoint"):
        transcribe.run(
            client_parser().parse_args(
                [
                    "transcribe",
                    "tests/clients/data/speech_22k_stereo.wav",
                    "--url",
                    "ws://127.0.0.1:1/x",
                    "--endpoint-url",
                    url,
                ]
            )
        )


def test_local_runtime_never_takes_or_prints_the_shells_aws_credentials(tmp_path):
    import sys

    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "AKIAREALKEY000000000",
        "AWS_SECRET_ACCESS_KEY": "a-real-secret-key",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voicectl",
            "local-runtime",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--ca-file",
            str(tmp_path / "ca.pem"),
            "--endpoint",
            "a=ws://127.0.0.1:1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        printed = []
        while not printed or "ready; Ctrl-C stops" not in printed[-1]:
            line = process.stdout.readline()
            assert line, "".join(printed)
            printed.append(line)
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=20)
    text = "".join(printed) + rest
    environment = (tmp_path / "env.sh").read_text() if (tmp_path / "env.sh").exists() else ""
    assert (
        "a-real-secret-key" not in text + environment
        and "AKIAREALKEY000000000" not in text + environment
    )
    assert re.search(r"export AWS_ACCESS_KEY_ID=AKIALOCAL[0-9A-F]{12}\n", text)
    assert process.returncode == 0 and "voicectl local-runtime: stopped" in rest
