"""What the mic page's browser tests share (test_clients_mic_browser.py and
test_clients_mic_browser_attacks.py): the fake microphone's speech, Chromium with the attacker's
name resolving to loopback, the fake vLLM, the bridge and the mic page in front of them, the Sonic
stand-in, and readers of the page's recorder. Each test module sets its fixtures up once
(module scope); a module imports the fixtures it uses under ``fixture_<name>`` and pytest offers
them under their ``name``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.browser_testkit import chromium
from tests.unit.voice_client.clients_testkit import (
    RECORDING,
    ResponseStreamServer,
    Servers,
    client_parser,
    serve_mic_page,
)
from voice_devtools.local.fake_vllm import free_port

SENTENCE = "Hello from SageMaker. Streaming speech to text."
"""What the fake microphone says; the fake vLLM answers each 128 ms append with its next word."""

EVIL_NAME = "evil.example"
"""The attacker's host name (RFC 2606's reserved domain), which the browser resolves to
:data:`ATTACKER_SITE_HOST`."""

ATTACKER_SITE_HOST = "127.0.0.2"
"""Loopback address serving a cross-site attacker page: another site than 127.0.0.1 for the browser,
and local, so Chromium's local-network-access rules (public sites may not call private addresses) do
not hide the attack."""

ATTACKER_FLAGS = (f"--host-resolver-rules=MAP {EVIL_NAME} {ATTACKER_SITE_HOST}",)
"""The attacker's name resolves to its address (see test_clients_mic_browser_attacks.py,
rebinding_proxy)."""

RECORD_S = 2.0
"""Seconds of microphone audio per recording (below the WAV's 3.66 s, so the fake microphone does
not loop)."""


@pytest.fixture(scope="module", name="speech_wav")
def fixture_speech_wav(tmp_path_factory) -> Path:
    """The fake microphone's WAV: :data:`SENTENCE` spoken by espeak-ng now, else the committed
    espeak-ng recording."""
    path = tmp_path_factory.mktemp("microphone") / "speech.wav"
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        shutil.copyfile(RECORDING, path)
    else:
        subprocess.run(
            [espeak, "-v", "en-us", "-s", "160", "-w", str(path), SENTENCE], check=True, timeout=30
        )
    return path


@pytest.fixture(scope="module", name="browser")
def fixture_browser(speech_wav) -> Iterator[object]:
    with chromium(speech_wav, ATTACKER_FLAGS) as browser:
        yield browser


@pytest.fixture(scope="module", name="sonic_runtime")
def fixture_sonic_runtime() -> Iterator[ResponseStreamServer]:
    """A loopback SageMaker runtime answering InvokeEndpointWithResponseStream with queued Sonic
    replies."""
    with ResponseStreamServer() as server:
        yield server


@pytest.fixture(scope="module", name="stack")
def fixture_stack(sonic_runtime) -> Iterator[tuple[Servers, str]]:
    """The fake vLLM, the bridge and the mic page in front of them; yields (servers, page URL)."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    words = tuple(f"{word} " for word in SENTENCE.split())
    runtime_env = {
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": sonic_runtime.url,
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {name: os.environ.get(name) for name in runtime_env}
    os.environ.update(
        runtime_env
    )  # the Speak panel's boto3 client calls the stand-in (module scope: no monkeypatch)
    try:
        with Servers(deltas=words, generate=True) as servers:
            args = client_parser().parse_args(
                [
                    "mic",
                    "--url",
                    servers.url,
                    "--port",
                    str(free_port()),
                    "--sonic-endpoint",
                    "sonic-tts",
                    "--voice",
                    "local-voice",
                ]
            )
            with serve_mic_page(args) as url:
                yield servers, url
    finally:
        for name, value in saved.items():
            os.environ.pop(name) if value is None else os.environ.__setitem__(name, value)


def report(request, capsys, figure: str) -> None:
    """Print a figure the run measured, with ``pytest -s`` only (figures are not assertions)."""
    if request.config.getoption("capture") == "no":
        with capsys.disabled():
            print(f"\nmic page in Chromium: {figure}")


def recorder_state(page) -> dict:
    """The recorder's dataset and the text of its parts."""
    return page.evaluate("""() => {
        const root = document.querySelector(".voicectl-recorder");
        const text = (name) => root.querySelector(`[data-part="${name}"]`).textContent;
        return {...root.dataset, status: text("status"), error: text("error-summary"),
                errorDetail: text("error-detail"),
                errorShown: !root.querySelector('[data-part="error"]').hidden, timer: text("timer"),
                announced: text("announce"), transcript: text("transcript"),
                figures: text("figures"),
                recordDisabled: root.querySelector('[data-part="record"]').disabled,
                stopDisabled: root.querySelector('[data-part="stop"]').disabled};
    }""")
