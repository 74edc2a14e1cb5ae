"""Run the project's pinned CDK CLI (``npx --no-install cdk``) against moto's server, and clean up after it.

How this CDK CLI version (aws-cdk 2.1148, AWS SDK for JavaScript v3) takes a custom endpoint, read in
``node_modules/aws-cdk/lib/index.js``: every SDK client honours ``AWS_ENDPOINT_URL`` (and per-service
``AWS_ENDPOINT_URL_<SERVICE>``); the CLI forces S3 path-style addressing when the S3 endpoint is a loopback host
(``forceS3PathStyle``), and builds the ``TemplateURL`` it hands to CloudFormation from the S3 endpoint (or
``AWS_ENDPOINT_URL_S3_FOR_CLOUDFORMATION``) as ``<origin>/<bucket>/<key>``. Setting ``AWS_ENDPOINT_URL`` to
``http://localhost:<port>`` is therefore enough for bootstrap, asset publishing, deploy and destroy.

Each command runs in its own process group with a timeout; the group is killed when the command times out, and
:func:`run_cdk` checks afterwards that no process of the group is left (the CLI starts ``python3 app.py``, which
starts a jsii Node.js runtime).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.lifecycle.lifecycle_moto import ACCOUNT, FAKE_CREDENTIALS, REGION

ROOT = Path(__file__).resolve().parents[3]
log = logging.getLogger("lifecycle")

#: Upper bound for one CDK CLI command here (synthesis takes 8-15 s on the 2-core machine; a deploy a few seconds).
COMMAND_TIMEOUT_S = 120
#: Time a finished command's process group gets to wind down before leftovers count as leaked.
WIND_DOWN_S = 5.0


class CdkCommandError(AssertionError):
    """A CDK CLI command exited non-zero or timed out; the message holds the command and its output's tail."""


@dataclass(frozen=True)
class CdkResult:
    """One finished command: its arguments, exit code, output, and wall time in seconds."""

    args: list[str]
    returncode: int
    output: str
    seconds: float


def cdk_environment(endpoint_url: str) -> dict[str, str]:
    """The environment of every CDK CLI command: moto's endpoint, fake credentials, no profile or config files.

    Everything ``AWS_*`` of the caller is dropped first, so real credentials can never reach a command.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(FAKE_CREDENTIALS)
    env.update({
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        # cdk.json's app command is `python3 app.py`: the project's virtual environment first.
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20,22",
        # The AWS SDK for JavaScript warns about Node 20 on every command; it says nothing about this test.
        "NODE_NO_WARNINGS": "1",
        "CI": "true",
    })
    return env


def run_cdk(args: list[str], endpoint_url: str, log_path: Path, timeout_s: float = COMMAND_TIMEOUT_S) -> CdkResult:
    """Run ``npx --no-install cdk <args>`` in the project directory against ``endpoint_url``.

    The output (stdout and stderr together) is appended to ``log_path``.

    Raises:
        CdkCommandError: non-zero exit or timeout (the process group is killed), with the last 60 lines of output.
        AssertionError: a process of the command's group is still alive ``WIND_DOWN_S`` after it exited.
    """
    command = ["npx", "--no-install", "cdk", *args]
    log.info("$ %s", " ".join(command))
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=ROOT, env=cdk_environment(endpoint_url), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        output, _ = process.communicate()
        raise CdkCommandError(f"`{' '.join(command)}` timed out after {timeout_s} s:\n{_tail(output)}") from None
    except BaseException:
        # Ctrl-C or pytest-timeout while the CLI runs: its group would go on retrying against a stopped moto.
        _kill_group(process.pid)
        raise
    seconds = time.monotonic() - started
    with log_path.open("a") as sink:
        sink.write(f"$ {' '.join(command)}   (exit {process.returncode}, {seconds:.1f} s)\n{output}\n")
    _assert_group_gone(process.pid)
    log.info("  exit %d in %.1f s", process.returncode, seconds)
    if process.returncode != 0:
        raise CdkCommandError(f"`{' '.join(command)}` exited {process.returncode}:\n{_tail(output)}")
    return CdkResult(command, process.returncode, output, seconds)


def _tail(output: str, lines: int = 60) -> str:
    return "\n".join(output.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process exists that we may not signal: still alive
        return True
    return True


def _kill_group(pgid: int) -> None:
    with_signal = [signal.SIGTERM, signal.SIGKILL]
    for sig in with_signal:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + WIND_DOWN_S
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)


def _assert_group_gone(pgid: int) -> None:
    """Fail (after killing them) when processes of the command's group outlive it by more than WIND_DOWN_S."""
    deadline = time.monotonic() + WIND_DOWN_S
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            _kill_group(pgid)
            raise AssertionError(f"processes of the CDK CLI's group {pgid} were still running {WIND_DOWN_S} s after "
                                 "it exited (killed now)")
        time.sleep(0.1)


def bootstrap_target() -> str:
    """``aws://<account>/<region>`` of moto's default account."""
    return f"aws://{ACCOUNT}/{REGION}"
