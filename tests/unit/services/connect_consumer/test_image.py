"""The consumer's image without Docker: a folder holding only what
services/connect_consumer/Dockerfile copies, and a fresh virtual environment with only
requirements-connect.lock, installed by the
Dockerfile's own pip command. The entry point starts there, ``--check`` builds each target's client,
and the import trace of both targets finds every module it needs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.services.connect_consumer.consumer_imports import BASE_ENV
from tests.unit.services.connect_consumer.test_dockerfile import (
    LOCK,
    ROOT,
    TRACER,
    copied_files,
    instructions,
    lock_versions,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

#: Each target's variables as the construct sets them; BASE_ENV has the rest, fake credentials and
#: no instance metadata (no AWS call).
TARGETS = {
    "sagemaker": {"ENDPOINT_NAME": "voxtral-realtime"},
    "ecs": {
        "ENDPOINT_URL": "wss://voxtral.example.com/invocations-bidirectional-stream",
        "TOKEN_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:token",
    },
}


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, Path]:
    """(``/app`` with the files the Dockerfile copies, the venv's python), made as it makes them."""
    base = tmp_path_factory.mktemp("image")
    app = base / "app"
    for source in copied_files():
        (app / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / source, app / source)
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=120)
    python = base / "venv" / "bin" / "python"
    (run,) = instructions("RUN")
    arguments = shlex.split(run)
    assert arguments[:2] == ["pip", "install"]
    # The Dockerfile's flags, less --no-cache-dir: the machine's pip cache spares the downloads.
    arguments = [argument for argument in arguments[2:] if argument != "--no-cache-dir"]
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", *arguments],
        cwd=app,
        check=True,
        timeout=800,
    )
    return app, python


def run(
    image: tuple[Path, Path], *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python ARGUMENTS`` of the image's venv in its /app, with none of this process's AWS or
    Python variables."""
    app, python = image
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "PYTHON")) and name != "VIRTUAL_ENV"
    }
    # The image's own Python variables (ENV PYTHONPATH=/app/services), at this /app.
    image_env = dict(
        pair.split("=", 1) for line in instructions("ENV") for pair in shlex.split(line)
    )
    paths = image_env.get("PYTHONPATH", "").replace("/app", str(app))
    return subprocess.run(
        [str(python), *arguments],
        cwd=app,
        env={**clean, **({"PYTHONPATH": paths} if paths else {}), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_venv_holds_the_lock_and_nothing_of_the_development_environment(image):
    done = run(image, "-m", "pip", "list", "--format", "json")
    installed = {
        item["name"].lower().replace("_", "-"): item["version"]
        for item in json.loads(done.stdout)
        if item["name"] != "pip"
    }
    assert installed == lock_versions(LOCK)
    assert run(image, "-c", "import aws_cdk").returncode == 1
    assert run(image, "-c", "import pytest").returncode == 1


def test_help_lists_the_environment(image):
    done = run(image, "-m", "connect_consumer", "--help")
    assert done.returncode == 0, done.stderr
    assert "\nenvironment:\n  CALLS_QUEUE_URL" in done.stdout


@pytest.mark.parametrize(
    ("target", "ready"),
    [
        ("sagemaker", "SageMaker endpoint 'voxtral-realtime'"),
        ("ecs", "ECS target 'wss://voxtral.example.com/invocations-bidirectional-stream'"),
    ],
)
def test_a_dry_start_of_each_target_builds_its_client(image, target, ready):
    done = run(image, "-m", "connect_consumer", "--check", env={**BASE_ENV, **TARGETS[target]})
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"connect_consumer: ready: {ready} in us-east-1; calls from "
        f"{BASE_ENV['CALLS_QUEUE_URL']}, 50 at once\n"
    )


def test_without_its_environment_the_service_says_what_is_missing(image):
    done = run(image, "-m", "connect_consumer", env={"AWS_DEFAULT_REGION": "us-east-1"})
    assert done.returncode == 2
    assert done.stderr == (
        "connect_consumer: CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME are not set; "
        "the service needs CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME\n"
    )
    done = run(image, "-c", "import connect_consumer.service")  # the module path docs name
    assert done.returncode == 0, done.stderr


def test_the_import_trace_runs_there_and_finds_what_the_dockerfile_copies(image):
    app, _ = image
    shutil.copyfile(TRACER, app.parent / TRACER.name)
    done = run(image, str(app.parent / TRACER.name))
    assert done.returncode == 0, done.stderr
    traced = json.loads(done.stdout)
    assert traced["failed"] == []
    assert traced["modules"] == sorted(path for path in copied_files() if path.endswith(".py"))
    assert set(traced["distributions"]) <= set(lock_versions(LOCK))
    assert "certifi" not in traced["distributions"]  # test_dockerfile.OPTIONAL_IMPORTS
