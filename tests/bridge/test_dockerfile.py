"""The Dockerfile: base image argument, the bidirectional-streaming label, entrypoint, health check,
what it copies (the bridge and the contracts it imports), no secrets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The bridge's folder: the package ``bridge`` itself, with its Dockerfile and requirements.
BRIDGE_DIR = ROOT / "services" / "bridge"
DOCKERFILE = (BRIDGE_DIR / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    """Arguments of every `name` instruction (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [
        line.split(None, 1)[1] for line in joined.splitlines() if line.split(None, 1)[:1] == [name]
    ]


def test_base_image_is_a_build_argument_defaulting_to_the_vllm_sagemaker_dlc():
    assert instructions("ARG") == [
        "BASE_IMAGE=public.ecr.aws/deep-learning-containers/vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0"
    ]
    assert instructions("FROM") == ["${BASE_IMAGE}"]


def test_the_build_fails_early_without_voxtrals_audio_dependencies():
    assert 'python3 -c "import mistral_common.audio, soundfile, soxr"' in instructions("RUN")


def test_bidirectional_streaming_label():
    assert instructions("LABEL") == [
        "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true"
    ]


#: The bridge's own Python environment in the image, apart from vLLM's (its pinned websockets,
#: uvloop and aiohttp must not replace the versions vLLM runs with).
BRIDGE_VENV = "/opt/bridge/venv"


def test_entrypoint_runs_the_supervisor_in_exec_form_with_the_bridge_venv():
    (entrypoint,) = instructions("ENTRYPOINT")
    assert json.loads(entrypoint) == [f"{BRIDGE_VENV}/bin/python", "-m", "bridge.entrypoint"]
    assert (BRIDGE_DIR / "entrypoint.py").is_file()


def test_bridge_dependencies_go_into_their_own_venv_not_vllms_environment():
    runs = instructions("RUN")
    assert any(f"python3 -m venv {BRIDGE_VENV}" in run for run in runs)
    installs = [part for run in runs for part in run.split("&&") if "pip install" in part]
    assert installs and all(
        part.strip().startswith(f"{BRIDGE_VENV}/bin/python -m pip install") for part in installs
    )
    # The bridge package is importable by the venv's Python only: no image-wide PYTHONPATH that vLLM
    # would see.
    assert not any("PYTHONPATH" in env for env in instructions("ENV"))


#: Where the bridge's venv imports from (its .pth file names it).
APP_DIR = "/opt/bridge/app"


def test_the_image_copies_the_bridge_and_the_contracts_it_imports_and_nothing_else(tmp_path):
    """The build context is the repository root, of which the image gets the bridge's folder and
    the contracts only (constructs_lib/artifacts/bridge_image.py stages no more:
    tests/unit/constructs_lib/artifacts/test_bridge_image.py). The app folder, laid out as the COPY
    instructions lay it out, holds every module the bridge imports: each of its modules imports
    with that folder and the bridge's dependencies alone (no project install, no repository). Of
    the bridge's folder only the modules go in (not its Dockerfile, README or requirements)."""
    copies = [copy.split() for copy in instructions("COPY")]
    assert [[*sources, destination] for *sources, destination in copies] == [
        ["services/bridge/requirements.txt", "/opt/bridge/requirements.txt"],
        ["services/bridge/*.py", f"{APP_DIR}/bridge/"],
        ["contracts", f"{APP_DIR}/contracts"],
    ]
    assert any(f"'bridge.pth').write_text('{APP_DIR}\\n')" in run for run in instructions("RUN"))
    for *sources, destination in copies:
        (source,) = sources
        if not destination.startswith(APP_DIR):
            continue
        target = tmp_path / destination.lstrip("/")
        if source.endswith("/*.py"):  # COPY of a wildcard into a folder (destination ends in /)
            target.mkdir(parents=True)
            for module in (ROOT / source).parent.glob("*.py"):
                shutil.copy(module, target / module.name)
        else:
            shutil.copytree(
                ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
    app = tmp_path / APP_DIR.lstrip("/")
    modules = sorted(f"bridge.{path.stem}" for path in (app / "bridge").glob("*.py"))
    assert sorted(path.name for path in (app / "bridge").iterdir()) == sorted(
        path.name for path in BRIDGE_DIR.glob("*.py")
    )
    assert "bridge.entrypoint" in modules
    code = (
        "import importlib, sys\n"
        + "".join(f"importlib.import_module({name!r})\n" for name in modules)
        + "print(sorted({m.__file__.split('/app/')[1].split('/')[0]"
        " for m in list(sys.modules.values())"
        " if (getattr(m, '__file__', None) or '').startswith(sys.argv[1])}))"
    )
    # -S: no site-packages .pth files, so no editable install of the project can supply what the
    # image lacks.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(app), sysconfig.get_paths()["purelib"]]),
    }
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(app)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['bridge', 'contracts']"


def test_health_check_asks_ping_on_port_8080():
    (check,) = instructions("HEALTHCHECK")
    assert "http://127.0.0.1:8080/ping" in check
    assert "--timeout=" in check


def requirement_lines() -> list[str]:
    return [
        line
        for line in (BRIDGE_DIR / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]


def test_dependencies_are_pinned_or_ranged_and_installed():
    requirements = requirement_lines()
    assert {re.split(r"[=<>]", line)[0] for line in requirements} == {
        "websockets",
        "aws-embedded-metrics",
        "uvloop",
        "pybase64",
        "boto3",
        "aiohttp",
    }
    # Pinned, except websockets: one range, the project's (the bridge relies on its documented
    # Sans-I/O API only).
    assert all(
        re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", line)
        for line in requirements
        if not line.startswith("websockets")
    )
    assert any("pip install" in run and "requirements.txt" in run for run in instructions("RUN"))
    assert any(f"{BRIDGE_VENV}/bin/python -m pip install" in run for run in instructions("RUN"))


def test_aiohttp_is_the_version_the_lock_pins():
    """The bridge's aiohttp (task protection) is the one aws-embedded-metrics brings and the tests
    ran with."""
    (pinned,) = [line for line in requirement_lines() if line.startswith("aiohttp")]
    locked = re.search(
        r"^aiohttp==([0-9.]+)", (ROOT / "requirements.lock").read_text(), re.MULTILINE
    )
    assert pinned == f"aiohttp=={locked.group(1)}"


def test_websockets_has_one_version_range_in_the_project_and_the_image():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (in_project,) = [dependency for dependency in project if dependency.startswith("websockets")]
    (in_image,) = [line for line in requirement_lines() if line.startswith("websockets")]
    assert in_project == in_image == "websockets>=15.0.1,<18"
    locked = (ROOT / "requirements.lock").read_text()
    version = re.search(r"^websockets==([0-9.]+)", locked, re.MULTILINE).group(1)
    assert (
        tuple(int(part) for part in version.split(".")) >= (15, 0, 1)
        and int(version.split(".")[0]) < 18
    )


def test_no_secrets_in_the_image():
    for name in ("ENV", "ARG", "LABEL"):
        for value in instructions(name):
            assert not re.search(r"(?i)(secret|password|token|aws_access_key|aws_secret)", value), (
                value
            )
