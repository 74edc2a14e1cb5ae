"""docs/clients.md "Call the endpoints from your own code" (the README leads there): its two Python
blocks run exactly as written, each in a fresh interpreter, against the local SageMaker runtime (the
real bridge and the fake vLLM behind it; the Sonic stand-in), configured only through the standard
variables the page names: ``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`` (Voxtral),
``AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`` (Sonic), ``AWS_CA_BUNDLE`` and the credentials."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import wave
from pathlib import Path

from tests.e2e.local.conftest import DELTAS, Stack

ROOT = Path(__file__).resolve().parents[3]


def readme_examples() -> list[str]:
    """The Python blocks of the docs/clients.md section "Call the endpoints from your own code", in
    order."""
    text = (ROOT / "docs" / "clients.md").read_text()
    section = text.split("## Call the endpoints from your own code\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)


def run_example(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The examples use paths of the checkout (tests/clients/data/...): run them from a directory
    # that has them, with a temporary directory of the test's own (TMPDIR), where what they write
    # (hello.wav) must land.
    (cwd / "tests").symlink_to(ROOT / "tests")
    (cwd / "tmp").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "services")]),
        "TMPDIR": str(cwd / "tmp"),
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_readme_has_one_example_per_endpoint():
    voxtral, sonic = readme_examples()
    assert (
        "from voice_client.sagemaker_stream import open_endpoint" in voxtral
        and "transcribe_stream" in voxtral
    )
    assert "from voice_client.speak import synthesize" in sonic and "SonicRequest" in sonic
    for example in (voxtral, sonic):
        assert len(example.strip().splitlines()) <= 20  # short, as promised
        assert (
            "endpoint_url" not in example and "localhost" not in example
        )  # nothing local in the example


def test_the_voxtral_example_streams_the_file_and_prints_the_transcript(
    client_env: Stack, monkeypatch, tmp_path
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", client_env.url)
    voxtral, _ = readme_examples()
    done = run_example(voxtral, tmp_path)
    assert done.returncode == 0, done.stderr
    deltas, transcript, figures = (
        done.stdout.splitlines()
    )  # deltas as they came, then the transcript, the figure
    assert transcript.startswith(
        "".join(DELTAS).strip()
    )  # the fake vLLM's scripted words, one delta per append
    assert transcript.split() == deltas.split()  # the transcript is what the deltas said
    first_delta = float(figures.removeprefix("time to first delta (s): "))
    assert 0 <= first_delta < 5
    assert (
        len(client_env.vllm.sessions) >= 1
    )  # the audio went through the local runtime, the bridge and vLLM


def test_the_sonic_example_writes_the_speech_to_a_wav_file(
    client_env: Stack, monkeypatch, tmp_path
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", client_env.url)
    _, sonic = readme_examples()
    done = run_example(sonic, tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "hello.wav").exists()  # not where it ran (the checkout, for a reader)
    with wave.open(str(tmp_path / "tmp" / "hello.wav")) as audio:
        rate, frames, width = audio.getframerate(), audio.getnframes(), audio.getsampwidth()
    assert (rate, width) == (44100, 2) and frames > 0
    assert done.stdout.strip() == f"{frames / rate:.2f} s of audio at 44100 Hz"
