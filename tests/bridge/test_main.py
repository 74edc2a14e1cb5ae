"""The bridge process's start-up tuning (`python -m bridge`, services/bridge/__main__.py)."""

from __future__ import annotations

import gc

from bridge.__main__ import freeze_startup_objects


def test_startup_objects_leave_the_collectors_generations():
    # counted from nothing frozen (tests/conftest.py froze what the test collection left)
    gc.unfreeze()
    try:
        frozen = freeze_startup_objects()
        assert frozen == gc.get_freeze_count()
        # The interpreter and the bridge's imported modules: tens of thousands of objects, none left
        # to traverse.
        assert frozen > 10_000
        assert sum(len(gc.get_objects(generation)) for generation in range(3)) < frozen / 10
    finally:
        # the test process as tests/conftest.py leaves it: what is alive stays out of the
        # collections
        gc.freeze()


def test_a_bridge_started_with_its_token_in_the_environment_runs_without_it_and_still_checks_it(
    tmp_path,
):
    """`python -m bridge` started as make local and the benchmark start it (BRIDGE_TOKEN in its
    environment) re-executes itself without the token: /proc/<pid>/environ no longer shows it, the
    same PID serves, and the token it read (from the pipe) is the one it checks."""
    import os
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request
    from pathlib import Path

    import pytest
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from voice_devtools.local.fake_vllm import free_port

    token, port = "bridge-token-0123456789abcdef", free_port()
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge"],
        cwd=root / "services",  # the folder that holds the package
        stderr=subprocess.DEVNULL,
        env={
            **os.environ,
            "PYTHONPATH": str(root),  # for the contracts
            "BRIDGE_TOKEN": token,
            "BRIDGE_HOST": "127.0.0.1",
            "BRIDGE_PORT": str(port),
            "VLLM_PORT": str(free_port()),
            "LOG_LEVEL": "WARNING",
        },
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1)
            except urllib.error.HTTPError:
                break  # 503: listening (no vLLM behind it)
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None, (
                    "the bridge did not start"
                )
                time.sleep(0.1)
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert token.encode() not in environ and b"BRIDGE_TOKEN" not in environ
        assert (
            b"BRIDGE_SECRETS_FD=" in environ
        )  # the re-exec happened: the token came through its pipe
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
        process.terminate()
        process.wait(10)


def test_a_bad_log_level_ends_the_bridge_with_the_contracts_message_and_exit_2():
    """LOG_LEVEL is checked with the other settings: a bad one is a bad setting (exit 2, one line
    naming it and what is allowed), not a traceback from the logging module."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root), "LOG_LEVEL": "loud"}
    environment.pop("BRIDGE_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "bridge"],
        cwd=root / "services",
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().endswith(
        "ERROR bridge: bad setting: LOG_LEVEL='loud' must be one of DEBUG, INFO, WARNING, "
        "ERROR, CRITICAL (in any case)"
    )
