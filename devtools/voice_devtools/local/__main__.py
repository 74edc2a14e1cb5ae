"""``python -m voice_devtools.local`` (``make local``): the whole path on loopback, one process per
part, as deployed:

    fake vLLM (127.0.0.1:8081) <- bridge (services/bridge, 127.0.0.1:8080) <- front door (https://localhost:8443)
    Sonic stand-in (127.0.0.1:8090)                                          <- front door

``--vllm real`` (``make local VLLM=real``, which first builds ``.venv-vllm`` with ``make
vllm-deps``) puts vLLM's real realtime server (its CPU build) in the fake's place, serving a tiny
random-weight Voxtral Realtime checkpoint it writes into the state directory: real vLLM events
through the whole path, on a machine without a GPU (it starts in 1-3 minutes).

It prints the commands to try (``transcribe``, ``speak``, ``mic``) and the environment file they
need, and stops everything on Ctrl-C (or SIGTERM, or when a part exits). Each part's output goes to
a log file in the state directory. The bridge is run from the repository checkout
(``services/bridge/``), as ``python -m bridge`` from ``services/`` with the project's Python and the
checkout's root on its path (the bridge imports ``contracts/``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from contracts.bridge_env import BridgeEnvironment
from voice_devtools.local import real_vllm
from voice_devtools.local.fake_bedrock import FIRST_TOKEN_S

REPOSITORY = Path(__file__).resolve().parents[3]
"""The checkout this package is installed from (``make deps`` installs it in editable mode)."""

READY_TIMEOUT_S = 30.0
"""Seconds each part has to start listening."""

STOP_TIMEOUT_S = 5.0
"""Seconds each part has to exit after SIGTERM before it is killed."""

SAMPLE = "tests/clients/data/speech_22k_stereo.wav"
"""A short committed recording to try ``transcribe`` with."""

LOCAL_VOICE = "local-voice"
"""The voice id of the printed ``speak`` and ``mic`` commands: the Sonic stand-in takes any id."""

MAX_FIRST_TOKEN_MS = 30_000
"""Longest first-token time of the Bedrock stand-in, ms: half the bot's Bedrock read timeout
(agent.llm.READ_TIMEOUT_S, 60 s), so a slow stand-in is never mistaken for a dead one."""

SPOKEN_FILE = "hello.wav"
"""What the printed ``speak`` command writes, in the state directory (never in the checkout)."""


@dataclass
class Part:
    """One process of the local stack."""

    name: str
    port: int
    command: list[str]
    cwd: Path
    env: dict[str, str]
    process: subprocess.Popen | None = None
    log: Path | None = None
    ready_file: Path | None = None  # also wait for this file (the front door's env.sh)
    ready_path: str | None = None  # also wait for a 200 on this HTTP path (vLLM's /health)
    ready_timeout_s: float = READY_TIMEOUT_S


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m voice_devtools.local", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--runtime-port", type=int, default=8443, help="front door port (default: 8443)"
    )
    parser.add_argument("--bridge-port", type=int, default=8080, help="bridge port (default: 8080)")
    parser.add_argument(
        "--vllm",
        choices=("fake", "real"),
        default="fake",
        help="the fake vLLM (default) or vLLM's real server from .venv-vllm "
        "(make vllm-deps builds it)",
    )
    parser.add_argument("--vllm-port", type=int, default=8081, help="vLLM port (default: 8081)")
    parser.add_argument(
        "--transcription-delay-ms",
        type=int,
        metavar="MS",
        help="with --vllm real: the transcription delay vLLM serves (a multiple "
        "of 80 from 80 to 1200, or 2400; default: the checkpoint's, 480), as "
        "voxtral.transcription_delay_ms sets it in the image",
    )
    parser.add_argument(
        "--sonic-port", type=int, default=8090, help="Sonic stand-in port (default: 8090)"
    )
    parser.add_argument(
        "--agent",
        action="store_true",
        help="also start the voice agent (services/agent/, port --agent-port) and the Bedrock "
        "stand-in (port --bedrock-port) against the local endpoints (make local AGENT=1)",
    )
    parser.add_argument(
        "--agent-port", type=int, default=8100, help="voice agent port (default: 8100)"
    )
    parser.add_argument(
        "--bedrock-port", type=int, default=8095, help="Bedrock stand-in port (default: 8095)"
    )
    parser.add_argument(
        "--bedrock-first-token-ms",
        type=float,
        metavar="MS",
        help="with --agent: the Bedrock stand-in's time to its first token "
        f"(default: {FIRST_TOKEN_S * 1000:.0f})",
    )
    parser.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="HOSTNAME",
        dest="names",
        help="one more name the front door's certificate covers, e.g. "
        "runtime.sagemaker.us-east-1.amazonaws.com (repeat for each)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="logs, CA certificate, env.sh and what the printed commands write "
        "(default: a new temporary directory)",
    )
    return parser.parse_args(argv)


def delay_problem(args: argparse.Namespace) -> str | None:
    """Why ``--transcription-delay-ms`` cannot be used as given (None: it can, or is not given)."""
    from contracts.bridge_env import TRANSCRIPTION_DELAYS_MS

    delay = args.transcription_delay_ms
    if delay is None:
        return None
    if args.vllm != "real":
        return (
            f"--transcription-delay-ms {delay} needs --vllm real (make local VLLM=real): "
            "the fake vLLM scripts its deltas (the first after 0.6 s of audio whatever the "
            "delay); the delay is a setting of the real server's tokenizer"
        )
    if delay not in TRANSCRIPTION_DELAYS_MS:
        return (
            f"--transcription-delay-ms {delay}: must be a multiple of 80 from 80 to 1200, or "
            "2400 (ms: the delays the Voxtral Realtime model card allows)"
        )
    return None


def first_token_problem(args: argparse.Namespace) -> str | None:
    """Why ``--bedrock-first-token-ms`` cannot be used as given (None: it can, or is not given)."""
    first_token_ms = args.bedrock_first_token_ms
    if first_token_ms is None:
        return None
    if not args.agent:
        return (
            f"--bedrock-first-token-ms {first_token_ms:g} needs --agent (make local AGENT=1): "
            "the Bedrock stand-in runs only with the voice agent"
        )
    if not 0 <= first_token_ms <= MAX_FIRST_TOKEN_MS:
        return (
            f"--bedrock-first-token-ms {first_token_ms:g}: must be 0-{MAX_FIRST_TOKEN_MS} ms "
            "(the bot's Bedrock client gives up on a silent stream after 60 s)"
        )
    return None


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_listening(part: Part, deadline: float) -> None:
    """Return once ``part`` accepts TCP connections on its port.

    Raises:
        RuntimeError: it exited, or did not listen before ``deadline``.
    """
    while time.monotonic() < deadline:
        assert part.process is not None
        if part.process.poll() is not None:
            raise RuntimeError(
                f"{part.name} exited with code {part.process.returncode}; see {part.log}"
            )
        try:
            with socket.create_connection(("127.0.0.1", part.port), timeout=0.5):
                if (part.ready_file is None or part.ready_file.exists()) and answers(part):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(
        f"{part.name} did not listen on 127.0.0.1:{part.port} within {part.ready_timeout_s:.0f} s; "
        f"see {part.log}"
    )


def answers(part: Part) -> bool:
    """True when ``part`` has no readiness path, or answers 200 on it."""
    if part.ready_path is None:
        return True
    url = f"http://127.0.0.1:{part.port}{part.ready_path}"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
        return response.status == 200
    return False


def stop(parts: list[Part]) -> None:
    """SIGTERM every running part (its process group), then SIGKILL what is left after
    :data:`STOP_TIMEOUT_S`."""
    for part in reversed(parts):
        if part.process is not None and part.process.poll() is None:
            os.killpg(part.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for part in reversed(parts):
        if part.process is None:
            continue
        try:
            part.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(part.process.pid, signal.SIGKILL)
            part.process.wait()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    services = REPOSITORY / "services"  # the folder that holds the package bridge/
    if (problem := preflight_problem(args, services)) is not None:
        print(f"python -m voice_devtools.local: {problem}", file=sys.stderr)
        return 2
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="voicectl-local-")).resolve()
    state.mkdir(parents=True, exist_ok=True)
    key_id, secret = "AKIALOCAL" + secrets.token_hex(6).upper(), secrets.token_urlsafe(30)
    base_env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    base_env["PYTHONUNBUFFERED"] = "1"
    runtime_env = {
        **base_env,
        "VOICECTL_LOCAL_ACCESS_KEY_ID": key_id,
        "VOICECTL_LOCAL_SECRET_ACCESS_KEY": secret,
    }
    bridge_path = os.pathsep.join(filter(None, [str(REPOSITORY), base_env.get("PYTHONPATH")]))
    bridge_env = {**base_env, "PYTHONPATH": bridge_path, **bridge_settings(args).to_env()}
    python = sys.executable
    parts = [
        vllm_part(args, state, base_env),
        Part("bridge", args.bridge_port, [python, "-m", "bridge"], services, bridge_env),
        Part(
            "Sonic stand-in",
            args.sonic_port,
            [python, "-m", "voice_devtools.local.fake_sonic", "--port", str(args.sonic_port)],
            REPOSITORY,
            base_env,
        ),
        front_door_part(args, state, runtime_env),
    ]
    if args.agent:
        parts += agent_parts(args, state, base_env, key_id, secret)
    (state / "env.sh").unlink(missing_ok=True)
    return supervise(parts, state, args)


def bridge_settings(args: argparse.Namespace) -> BridgeEnvironment:
    """The bridge's environment: on 127.0.0.1 at the chosen ports, no drain; with vLLM's real
    server, its context (as a deployment's bridge gets it from SM_VLLM_MAX_MODEL_LEN: a generation
    that outgrows vLLM's max_model_len while audio streams in kills its engine) and the
    transcription delay, whose tokens the bridge counts in its session limit."""
    real = args.vllm == "real"
    return BridgeEnvironment(
        host="127.0.0.1",
        port=args.bridge_port,
        vllm_port=args.vllm_port,
        drain_s=0,
        max_model_len=real_vllm.MAX_MODEL_LEN if real else None,
        transcription_delay_ms=args.transcription_delay_ms if real else None,
    )


def preflight_problem(args: argparse.Namespace, services: Path) -> str | None:
    """Why the stack cannot start as asked (None: it can), found before anything starts: the error
    on the terminal, not in a part's log."""
    from voice_client.errors import UsageError
    from voice_devtools.local.local_runtime import validate_names

    try:
        validate_names(args.names)
    except UsageError as error:
        return str(error)
    if not (services / "bridge" / "__main__.py").is_file():
        return f"no bridge at {services}/bridge: run it from the repository checkout (make local)"
    for problem in (delay_problem(args), first_token_problem(args)):
        if problem is not None:
            return problem
    if args.vllm == "real" and (reason := real_vllm.missing_reason()):
        return reason
    ports = [args.runtime_port, args.bridge_port, args.vllm_port, args.sonic_port]
    if args.agent:
        ports += [args.agent_port, args.bedrock_port]
    busy = [port for port in ports if not port_free(port)]
    if busy:
        return (
            f"port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1 (another make "
            "local?); stop it or choose others, e.g. make local LOCAL_ARGS='--runtime-port 9443'"
        )
    return None


def vllm_part(args: argparse.Namespace, state: Path, base_env: dict[str, str]) -> Part:
    """The fake vLLM, or vLLM's real server on a tiny checkpoint it writes into ``state`` (the
    bridge's settings for it: :func:`bridge_settings`)."""
    if args.vllm != "real":
        return Part(
            "fake vLLM",
            args.vllm_port,
            [
                sys.executable,
                "-m",
                "voice_devtools.local.fake_vllm",
                "--port",
                str(args.vllm_port),
                "--generate",
            ],
            REPOSITORY,
            base_env,
        )
    print(
        "python -m voice_devtools.local: writing the tiny Voxtral Realtime checkpoint for vLLM",
        file=sys.stderr,
    )
    model_dir = real_vllm.write_checkpoint(state / "Voxtral-Mini-4B-Realtime-2602-tiny")
    tokenizer, delay = None, args.transcription_delay_ms
    if delay is not None:
        # As the image's entrypoint does: vLLM reads the delay from tekken.json, so it gets a
        # patched copy.
        tokenizer = real_vllm.write_tokenizer(model_dir, delay, state / f"tokenizer-{delay}ms")
    return Part(
        "vLLM",
        args.vllm_port,
        real_vllm.command(model_dir, args.vllm_port, tokenizer=tokenizer),
        REPOSITORY,
        real_vllm.environment(base_env),
        ready_path="/health",
        ready_timeout_s=real_vllm.START_TIMEOUT_S,
    )


def front_door_part(args: argparse.Namespace, state: Path, runtime_env: dict[str, str]) -> Part:
    """``voicectl local-runtime`` in front of the bridge and the Sonic stand-in; ready once it has
    written ``env.sh``."""
    return Part(
        "front door",
        args.runtime_port,
        [
            sys.executable,
            "-m",
            "voicectl",
            "local-runtime",
            "--port",
            str(args.runtime_port),
            "--ca-file",
            str(state / "ca.pem"),
            "--endpoint",
            f"voxtral-realtime=ws://127.0.0.1:{args.bridge_port}",
            "--endpoint",
            f"sonic-tts=http://127.0.0.1:{args.sonic_port}",
            *[argument for name in args.names for argument in ("--name", name)],
        ],
        REPOSITORY,
        runtime_env,
        ready_file=state / "env.sh",
    )


def supervise(parts: list[Part], state: Path, args: argparse.Namespace) -> int:
    """Start ``parts`` in order, each once the one before listens; print the banner; then wait
    until Ctrl-C, SIGTERM or a part's exit, and stop them all. Returns the exit code."""
    interrupted = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for part in parts:
            start(part, state)
            wait_listening(part, time.monotonic() + part.ready_timeout_s)
        print_banner(parts, state, args)
        while not interrupted:
            for part in parts:
                assert part.process is not None
                if part.process.poll() is not None:
                    print(
                        f"python -m voice_devtools.local: {part.name} exited with code "
                        f"{part.process.returncode}; see {part.log}. Stopping everything.",
                        file=sys.stderr,
                    )
                    return 1
            time.sleep(0.2)
        return 0
    except RuntimeError as error:
        print(f"python -m voice_devtools.local: {error}. Stopping everything.", file=sys.stderr)
        return 1
    finally:
        stop(parts)
        print(f"python -m voice_devtools.local: stopped (logs in {state})", file=sys.stderr)


def start(part: Part, state: Path) -> None:
    """Start ``part``'s process, its output in its own log file in ``state``."""
    part.log = state / (part.name.replace(" ", "-").lower() + ".log")
    # Owner only: the front door's log shows the local secret key (the environment it prints).
    descriptor = os.open(part.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "wb") as log:
        # Its own session: Ctrl-C reaches only this supervisor, which stops the parts in order.
        part.process = subprocess.Popen(
            part.command,
            cwd=part.cwd,
            env=part.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if part.ready_timeout_s > READY_TIMEOUT_S:
        print(
            f"python -m voice_devtools.local: waiting for {part.name} (up to "
            f"{part.ready_timeout_s:.0f} s)",
            file=sys.stderr,
            flush=True,
        )


def agent_parts(
    args: argparse.Namespace, state: Path, base_env: dict[str, str], key_id: str, secret: str
) -> list[Part]:
    """The Bedrock stand-in and the bot, configured (contracts.agent_env) for the local
    endpoints."""
    sys.path.insert(0, str(REPOSITORY))
    from contracts.agent_env import AgentEnv

    runtime = f"https://localhost:{args.runtime_port}"
    env = AgentEnv(
        sonic_endpoint="sonic-tts",
        sonic_voice="local-voice",
        voxtral_endpoint="voxtral-realtime",
        llm_model_id="local.stand-in",
        region="us-east-1",
        sagemaker_runtime_url=runtime,
        sagemaker_runtime_http2_url=runtime,
        bedrock_runtime_url=f"http://127.0.0.1:{args.bedrock_port}",
        host="127.0.0.1",
        port=args.agent_port,
        greeting="Hello! I am the local voice agent.",
        metric_dimensions={"Deployment": "local"},
    )
    agent_env = {
        **base_env,
        **env.to_env(),
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_CA_BUNDLE": str(state / "ca.pem"),
        "AWS_DEFAULT_REGION": "us-east-1",
        # As the image's /app and /app/services: the root (contracts, voice_client) and services/
        # (the packages agent and bridge).
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY), str(REPOSITORY / "services")]),
    }
    python = sys.executable
    first_token = (
        []
        if args.bedrock_first_token_ms is None
        else ["--first-token-ms", f"{args.bedrock_first_token_ms:g}"]
    )
    return [
        Part(
            "Bedrock stand-in",
            args.bedrock_port,
            [
                python,
                "-m",
                "voice_devtools.local.fake_bedrock",
                "--port",
                str(args.bedrock_port),
                *first_token,
            ],
            REPOSITORY,
            base_env,
        ),
        Part(
            "voice agent",
            args.agent_port,
            [python, "-m", "agent"],
            REPOSITORY,
            agent_env,
            ready_path="/health",
        ),
    ]


def print_banner(parts: list[Part], state: Path, args: argparse.Namespace) -> None:
    """What runs where, and the commands to try from another terminal."""
    voicectl_path = Path(sys.executable).parent / "voicectl"
    if voicectl_path.is_relative_to(REPOSITORY):  # .venv/bin/voicectl, as the READMEs write it
        voicectl_path = voicectl_path.relative_to(REPOSITORY)
    voicectl = shlex.quote(str(voicectl_path))
    env_file = shlex.quote(str(state / "env.sh"))
    spoken = shlex.quote(str(state / SPOKEN_FILE))
    lines = ["", "The whole path runs on this machine:"]
    for part in parts:
        lines.append(f"  {part.name:<15} 127.0.0.1:{part.port:<6} (log: {part.log})")
    lines += [
        f"  The front door is https://localhost:{args.runtime_port}: SageMaker runtime with "
        "SigV4, HTTP/2 and event streams.",
        (
            "  vLLM's real server (CPU build) serves a tiny random-weight checkpoint: real "
            "events, letters for text, a transcription delay of "
            f"{delay_text(args.transcription_delay_ms)}; "
            if args.vllm == "real"
            else "  The fake vLLM answers 80 ms of audio with a scripted word, as vLLM times its "
            "deltas (it recognises nothing); "
        )
        + "the Sonic stand-in speaks a tone.",
        "",
        "Try, in another terminal from the repository root:",
        f"  source {env_file}",
        f"  {voicectl} transcribe {SAMPLE} --endpoint voxtral-realtime",
        f'  {voicectl} speak "Hello from SageMaker." --endpoint sonic-tts --voice {LOCAL_VOICE} '
        f"--out {spoken}",
        f"  {voicectl} mic --endpoint voxtral-realtime --sonic-endpoint sonic-tts "
        f"--voice {LOCAL_VOICE}    # needs: make mic-deps",
        "",
    ]
    if args.agent:
        lines += [
            f"  {voicectl} talk --url ws://127.0.0.1:{args.agent_port}/    # talk with the voice "
            "agent: open http://127.0.0.1:7870/",
            "",
        ]
    lines += other_clients_lines(state / "ca.pem", args.names)
    lines += ["", "Ctrl-C stops everything."]
    print("\n".join(lines), flush=True)


def delay_text(delay_ms: int | None) -> str:
    """The transcription delay the real server runs at, for the banner."""
    from contracts.bridge_env import DEFAULT_TRANSCRIPTION_DELAY_MS

    if delay_ms is None:
        return f"{DEFAULT_TRANSCRIPTION_DELAY_MS} ms (the checkpoint's)"
    return f"{delay_ms} ms (--transcription-delay-ms)"


def other_clients_lines(ca_file: Path, names: list[str]) -> list[str]:
    """For clients not written here: the hosts-file lines of the ``--name`` host names, and how to
    trust the CA the way awscrt reads it (the system's store; it ignores ``AWS_CA_BUNDLE``), and how
    to remove it again."""
    from voice_devtools.local.local_runtime import hosts_lines, system_trust_commands

    lines = ["", "Other clients (e.g. on awscrt, which ignores AWS_CA_BUNDLE and SSL_CERT_FILE):"]
    if hosted := hosts_lines(names):
        lines.append("  resolve the --name host names to this machine, in /etc/hosts:")
        lines += [f"    {line}" for line in hosted]
    else:
        lines.append(
            "  a client that hard-codes SageMaker's hostname needs it in the certificate: make "
            "local LOCAL_ARGS='--name runtime.sagemaker.us-east-1.amazonaws.com'"
        )
    lines.append(
        "  trust the local CA system-wide (a new CA at each start: add it again after a restart):"
    )
    for system, add, remove in system_trust_commands(ca_file):
        lines += [f"    {system}: {' && '.join(add)}", f"      remove: {' && '.join(remove)}"]
    return lines


if __name__ == "__main__":
    sys.exit(main())
