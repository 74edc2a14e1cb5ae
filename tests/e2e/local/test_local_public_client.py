"""A public client nobody here wrote, unmodified, against ``make local``: the AWS blog's file client
of SageMaker bidirectional streaming (aws-samples/sagemaker-genai-hosting-examples,
``03-features/bidirectional-streaming-vLLM/ sagemaker_bidi_client.py``) on its pinned SDK,
``aws_sdk_sagemaker_runtime_http2==0.4.0`` (awscrt underneath).

Only the set-up a user of that client would do, each step documented by ``make local``'s banner:

- ``make local LOCAL_ARGS='--name runtime.sagemaker.us-east-1.amazonaws.com'``: the certificate
  covers the hostname the client hard-codes
  (``https://runtime.sagemaker.<region>.amazonaws.com:8443``);
- that hostname resolved to loopback (the hosts-file lines printed), and the local CA trusted the
  way awscrt reads trust (the system bundle, ``/etc/ssl/certs/ca-certificates.crt`` on Debian;
  awscrt ignores ``AWS_CA_BUNDLE``);
- credentials in a shared credentials file: the client drops
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` from its environment and asks boto3's chain, which
  then reads the file.

Nothing of this touches the machine: the test makes a network namespace (``ip netns add``, its own
loopback, so the fixed ports 8443/8080/8081/8090 are free there), runs ``python -m
voice_devtools.local`` inside it, and runs the client in a mount namespace of its own inside it
(``unshare --mount``) where
the system bundle (with the local CA appended) and ``/etc/hosts`` are bind-mounted. It needs root
(namespaces, mounts), iproute2 and util-linux.

The client's file is not committed (its code is not ours): ``make bidi-client`` downloads it at its
pinned commit and checks its SHA-256, and installs its SDK from ``requirements-bidi-client.lock``
(hashed) into ``.venv-bidi-client``; ``.ci/run`` does so before ``make test``. Without them the test
is skipped and says which is missing. ``VOICECTL_BIDI_CLIENT`` may name the file elsewhere (its
SHA-256 is still checked).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CLIENT_COMMIT = "147c6fbfad4dc94c83af57ebdadae2dee58c9c4c"
"""The commit of aws-samples/sagemaker-genai-hosting-examples the client is taken at (also in the
Makefile)."""
CLIENT_SHA256 = "0e16b4950c89d1881702cb4f22bc10c732c9bad0c27c2d1479d777f69919eb17"
"""SHA-256 of ``sagemaker_bidi_client.py`` at :data:`CLIENT_COMMIT`: the file runs unmodified."""
CLIENT_FILE = Path(
    os.environ.get("VOICECTL_BIDI_CLIENT", ROOT / ".public-clients" / "sagemaker_bidi_client.py")
)
CLIENT_PYTHON = ROOT / ".venv-bidi-client" / "bin" / "python"
HOSTNAME = "runtime.sagemaker.us-east-1.amazonaws.com"
"""The hostname the client hard-codes for its default Region (``--region us-east-1``)."""
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
"""The first CA file aws-c-io looks for on Linux (Debian's bundle), the one awscrt then trusts."""
SAMPLE = ROOT / "tests" / "clients" / "data" / "speech_22k_stereo.wav"
FAKE_DELTAS = ("hello ", "world ")
"""What make local's fake vLLM answers, one delta per append in turn (voice_devtools.local.fake_vllm
defaults)."""
CLIENT_TIMEOUT_S = 300.0
"""Seconds the client may take (librosa's first import compiles with numba, slowly on a loaded
machine)."""


def missing_prerequisites() -> list[str]:
    problems = []
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        problems.append("root on Linux (network and mount namespaces)")
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} (iproute2 / util-linux)")
    if not SYSTEM_BUNDLE.is_file():
        problems.append(f"a system CA bundle at {SYSTEM_BUNDLE}")
    if not CLIENT_FILE.is_file():
        problems.append(f"the blog's client at {CLIENT_FILE} (make bidi-client downloads it)")
    elif hashlib.sha256(CLIENT_FILE.read_bytes()).hexdigest() != CLIENT_SHA256:
        problems.append(
            f"the unmodified client: {CLIENT_FILE} does not have the SHA-256 of commit "
            f"{CLIENT_COMMIT}"
        )
    if not CLIENT_PYTHON.is_file():
        problems.append(
            f"its SDK's venv at {CLIENT_PYTHON.parent.parent} (make bidi-client makes it)"
        )
    return problems


pytestmark = pytest.mark.skipif(
    bool(missing_prerequisites()),
    reason="needs " + "; ".join(missing_prerequisites() or ["nothing"]),
)


@dataclass
class LocalPath:
    """``make local`` running inside the namespace ``namespace``, its state in ``state``."""

    namespace: str
    state: Path
    environment: dict[str, str]  # env.sh's variables

    def credentials_file(self, path: Path, secret: str | None = None) -> Path:
        path.write_text(
            f"[default]\naws_access_key_id = {self.environment['AWS_ACCESS_KEY_ID']}\n"
            f"aws_secret_access_key = {secret or self.environment['AWS_SECRET_ACCESS_KEY']}\n"
        )
        path.chmod(0o600)
        return path


@pytest.fixture(scope="module")
def local_path(tmp_path_factory) -> Iterator[LocalPath]:
    # The client loads its audio with librosa, whose first use compiles with numba (over a minute on
    # a loaded machine, beyond the bridge's 60 s IDLE_TIMEOUT_S on a stream already open): compile
    # it once beforehand, into numba's cache in the client's venv. The client itself is not touched.
    subprocess.run(
        [
            str(CLIENT_PYTHON),
            "-c",
            f"import librosa; librosa.load({str(SAMPLE)!r}, sr=16000, mono=True)",
        ],
        check=True,
        timeout=CLIENT_TIMEOUT_S,
        capture_output=True,
    )
    namespace = f"voicectl-bidi-{os.getpid()}"
    state = tmp_path_factory.mktemp("make-local")
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    process = None
    try:
        subprocess.run(
            ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True
        )
        process = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                namespace,
                sys.executable,
                "-m",
                "voice_devtools.local",
                "--state-dir",
                str(state),
                "--name",
                HOSTNAME,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        banner = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, "make local ended early:\n" + "".join(banner)
            banner.append(line)
            if line.startswith("Ctrl-C stops everything"):
                break
        text = "".join(banner)
        # The set-up the banner documents for such a client, used below as printed.
        assert f"    127.0.0.1 {HOSTNAME}" in text and "sudo update-ca-certificates" in text
        environment = {}
        for line in (state / "env.sh").read_text().splitlines():
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                environment[name] = shlex.split(value)[0]
        yield LocalPath(namespace, state, environment)
    finally:
        if process is not None:
            process.send_signal(
                signal.SIGINT
            )  # ip netns exec passes it on: make local stops every part
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        subprocess.run(["ip", "netns", "delete", namespace], check=False)


@dataclass
class ClientRun:
    returncode: int | None
    lines: list[tuple[float, str]]  # (seconds since start, line)

    def first(self, pattern: str) -> tuple[int, float, str]:
        """(index, time, line) of the first line matching ``pattern``."""
        for index, (at, line) in enumerate(self.lines):
            if re.search(pattern, line):
                return index, at, line
        raise AssertionError(
            f"no line matches {pattern!r}:\n" + "\n".join(line for _, line in self.lines)
        )


def run_client(
    local: LocalPath,
    tmp_path: Path,
    endpoint: str,
    credentials: Path,
    stop_after: Callable[[str], bool] = lambda line: False,
) -> ClientRun:
    """Run the blog's client, unmodified, in a mount namespace inside ``local``'s network namespace,
    where the system bundle holds the local CA and /etc/hosts resolves :data:`HOSTNAME` to
    loopback."""
    bundle = tmp_path / "ca-certificates.crt"
    bundle.write_bytes(SYSTEM_BUNDLE.read_bytes() + b"\n" + (local.state / "ca.pem").read_bytes())
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n::1 localhost\n127.0.0.1 {HOSTNAME}\n::1 {HOSTNAME}\n")
    inside = (
        f"mount --bind {shlex.quote(str(bundle))} {SYSTEM_BUNDLE} && "
        f"mount --bind {shlex.quote(str(hosts))} /etc/hosts && "
        f"exec {shlex.quote(str(CLIENT_PYTHON))} {shlex.quote(str(CLIENT_FILE))} {endpoint} "
        f"{shlex.quote(str(SAMPLE))}"
    )
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONUNBUFFERED": "1",
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    started = time.monotonic()
    process = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            local.namespace,
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            inside,
        ],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[tuple[float, str]] = []
    try:
        for line in process.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
            if stop_after(line):
                break
            assert time.monotonic() - started < CLIENT_TIMEOUT_S, (
                "the client took too long:\n" + "\n".join(text for _, text in lines)
            )
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return ClientRun(process.returncode, lines)


def test_the_blogs_client_transcribes_through_make_local(local_path, tmp_path):
    run = run_client(
        local_path,
        tmp_path,
        "voxtral-realtime",
        local_path.credentials_file(tmp_path / "credentials"),
    )
    assert run.returncode == 0, "\n".join(line for _, line in run.lines)
    _, _, streaming = run.first(r"Streaming (\d+) chunks at real-time pace")
    chunks = int(re.search(r"Streaming (\d+) chunks", streaming).group(1))
    _, _, final = run.first(r"^Final: ")
    assert final.removeprefix("Final: ") == "".join(
        FAKE_DELTAS[index % 2] for index in range(chunks)
    )
    run.first(r"INFO:__main__:Done")
    assert not any("Traceback" in line or "ERROR" in line for _, line in run.lines)


@pytest.mark.parametrize("refusal", ["unknown endpoint", "bad signature"])
def test_a_refused_call_reaches_the_blogs_client_before_its_audio_is_sent(
    local_path, tmp_path, refusal
):
    """The refusal arrives while the client's call is open: before it even starts sending audio
    (whose end would come some 3.7 s later at its real-time pace), so a stream left open (no
    RST_STREAM) cannot pass."""
    endpoint = "no-such-endpoint" if refusal == "unknown endpoint" else "voxtral-realtime"
    credentials = local_path.credentials_file(
        tmp_path / "credentials", secret="wrong-secret" if refusal == "bad signature" else None
    )
    # After the refusal the client goes on to load and send its audio on the refused stream and
    # waits there: stop it once it says it is streaming (what is checked happened before).
    run = run_client(
        local_path,
        tmp_path,
        endpoint,
        credentials,
        stop_after=lambda line: "chunks at real-time pace" in line,
    )
    connecting, connected_at, _ = run.first(r"Connecting to endpoint")
    refused, refused_at, line = run.first(r"ERROR:__main__:Receive error: ")
    streaming, _, _ = run.first(r"Streaming \d+ chunks at real-time pace")
    expected = (
        "Endpoint no-such-endpoint of account 123456789012 not found"
        if refusal == "unknown endpoint"
        else "status: 403 - id: com.amazonaws.sagemakerruntimehttp2#InvalidSignatureException"
    )
    assert expected in line
    assert connecting < refused < streaming
    assert not any("Timeout" in text for _, text in run.lines[:streaming])
    logs = {path.name: path.read_text() for path in local_path.state.glob("*.log")}
    assert {
        name: "Traceback" in text or "KeyError" in text for name, text in logs.items()
    } == dict.fromkeys(logs, False)  # a client's mistake is no error of the front door's
    print(f"{refusal}: refused {refused_at - connected_at:.3f} s after the call opened")
