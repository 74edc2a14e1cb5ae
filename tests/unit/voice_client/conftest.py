"""Fixtures for the client tests (what they stand on: ``clients_testkit.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.voice_client.clients_testkit import (
    RECORDING,
    MemoryServer,
    QuietBridge,
    ResponseStreamServer,
    client_parser,
    serve_mic_page,
)
from tests.unit.voice_client.mic_testkit import recording_url
from tests.unit.voice_client.token_testkit import secrets  # noqa: F401 (a fixture)
from voice_client import mic_recording
from voice_devtools.local.fake_vllm import free_port


@pytest.fixture
def parse():
    """Parse a voicectl command line (list of arguments) into a Namespace."""
    return client_parser().parse_args


@pytest.fixture
def recording() -> Path:
    return RECORDING


@pytest.fixture
def memory_server() -> MemoryServer:
    return MemoryServer()


@pytest.fixture
def sagemaker_runtime() -> Iterator[ResponseStreamServer]:
    with ResponseStreamServer() as server:
        yield server


@pytest.fixture
def quiet_page(monkeypatch) -> Iterator[tuple[QuietBridge, str]]:
    """The mic page in front of a :class:`QuietBridge`, with the watchdog's timeouts shortened."""
    pytest.importorskip(
        "gradio", reason="the mic extra is not installed (make test installs requirements-mic.lock)"
    )
    for name, value in {
        "FIRST_ANSWER_TIMEOUT_S": 1.0,
        "STALL_NOTICE_S": 0.5,
        "STALL_TIMEOUT_S": 1.5,
        "STOP_TIMEOUT_S": 1.0,
        "WATCHDOG_TICK_S": 0.05,
    }.items():
        monkeypatch.setattr(mic_recording, name, value)
    bridge = QuietBridge()
    with bridge.serving() as container:
        args = client_parser().parse_args(["mic", "--url", container, "--port", str(free_port())])
        with serve_mic_page(args) as url:
            yield bridge, recording_url(url)
