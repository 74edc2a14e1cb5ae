"""The consumer's image (services/connect_consumer/Dockerfile): its own lock, only the modules its
process imports (an import trace of both targets: consumer_imports.py here), not root, and its entry
point ``python -m connect_consumer``."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.staging_requirements import lock_blocks

ROOT = Path(__file__).resolve().parents[4]
DOCKERFILE = (ROOT / "services" / "connect_consumer" / "Dockerfile").read_text()
LOCK = ROOT / "requirements-connect.lock"
INPUT = ROOT / "services" / "connect_consumer" / "requirements.in"
TRACER = Path(__file__).with_name("consumer_imports.py")

#: Distributions the trace meets only because the development environment has them: imported when
#: installed, not needed otherwise. {name: why}
OPTIONAL_IMPORTS = {
    "certifi": "botocore.httpsession loads certifi's CA file when it is installed, else uses "
    "botocore's own cacert.pem, as any boto3 installed without certifi does",
    "brotli": "urllib3 and aiohttp decode brotli responses when it is installed (the mic page's "
    "lock brings it); neither AWS endpoint the consumer calls sends brotli",
}
#: What the image installed with the whole development lock, and must not.
DEVELOPMENT_ONLY = (
    "aws-cdk-lib",
    "cdk-nag",
    "cfn-lint",
    "moto",
    "pytest",
    "gradio",
    "jsii",
    "constructs",
    "hypothesis",
    "av",
    "huggingface-hub",
    "hypercorn",
    "uv",
)
#: The image's platform for markers: linux/amd64 (the asset's), CPython 3.12 (the base image's).
TARGET = {
    **default_environment(),
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def instructions(name: str) -> list[str]:
    """Arguments of every ``name`` instruction (continuation lines joined, comments left out)."""
    lines = [line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\s*\\\n\s*", " ", "\n".join(lines))
    return [
        line.split(None, 1)[1] for line in joined.splitlines() if line.split(None, 1)[:1] == [name]
    ]


def copied_files() -> list[str]:
    """Every source of every COPY (paths in the build context, the repository root)."""
    return [source for copy in instructions("COPY") for source in copy.split()[:-1]]


@functools.cache
def trace() -> dict[str, list[str]]:
    """The import trace in this environment, run from the root (as the image runs from /app) with
    the image's PYTHONPATH (services/ of this checkout, not the one the environment has installed
    in editable mode)."""
    done = subprocess.run(
        [sys.executable, str(TRACER)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "services")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def lock_versions(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of a ``uv pip compile`` lock."""
    return {
        name: block.split("==", 1)[1].split()[0]
        for name, block in lock_blocks(path.read_text()).items()
    }


def closure(roots: list[str]) -> set[str]:
    """``roots`` and everything they require on the image's platform (extras followed)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonicalize_name(root), frozenset()) for root in roots]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for spec in distribution(name).requires or []:
            requirement = Requirement(spec)
            marker = requirement.marker
            if marker is None or any(
                marker.evaluate({**TARGET, "extra": extra}) for extra in {"", *extras}
            ):
                todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return {name for name, _ in seen}


def test_the_image_installs_only_the_connect_lock_with_hashes():
    assert instructions("RUN") == [
        "pip install --no-cache-dir --disable-pip-version-check "
        "--require-hashes -r requirements-connect.lock"
    ]
    assert "requirements-connect.lock" in copied_files()
    assert not {"requirements.lock", "pyproject.toml"} & set(copied_files())


def test_the_image_runs_the_consumers_entry_point_as_nobody():
    (entrypoint,) = instructions("ENTRYPOINT")
    assert json.loads(entrypoint) == ["python", "-m", "connect_consumer"]
    assert (ROOT / "services" / "connect_consumer" / "__main__.py").is_file()
    assert instructions("USER") == ["65534"]
    assert instructions("WORKDIR") == ["/app"]


def test_the_image_copies_exactly_the_modules_the_process_imports():
    traced = trace()
    assert traced["failed"] == []
    assert sorted(path for path in copied_files() if path.endswith(".py")) == traced["modules"]
    # Each COPY lands in the folder its files come from: /app mirrors the repository.
    for copy in instructions("COPY"):
        *sources, destination = copy.split()
        assert {f"{Path(source).parent}/" for source in sources} == {destination}, copy


def test_the_trace_reaches_both_targets_and_the_model_id_facts():
    modules = trace()["modules"]
    assert {
        "voice_client/sagemaker_stream.py",
        "voice_client/realtime/websocket.py",
        "contracts/model.py",
        "contracts/realtime.py",
    } <= set(modules)
    assert [path for path in modules if path.startswith("config/")] == []  # not the settings
    assert [path for path in modules if path.startswith("constructs_lib/")] == []  # nor those
    assert {"aws-sdk-sagemaker-runtime-http2", "awscrt", "websockets", "ebmlite", "boto3"} <= set(
        trace()["distributions"]
    )


def test_the_lock_holds_what_the_trace_needs_and_nothing_else():
    locked = set(lock_versions(LOCK))
    needed = closure([name for name in trace()["distributions"] if name not in OPTIONAL_IMPORTS])
    assert locked == needed
    assert locked & {canonicalize_name(name) for name in DEVELOPMENT_ONLY} == set()


def test_the_lock_pins_the_main_locks_versions_and_hashes():
    connect = lock_blocks(LOCK.read_text())
    main = lock_blocks((ROOT / "requirements.lock").read_text())
    assert connect == {name: main[name] for name in connect}


def test_the_lock_inputs_are_the_projects_dependencies_and_make_lock_writes_it():
    names = [line for line in INPUT.read_text().splitlines() if line and not line.startswith("#")]
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    project = {canonicalize_name(Requirement(spec).name) for spec in dependencies}
    assert names == sorted(names)
    assert {canonicalize_name(name) for name in names} <= project  # their ranges: pyproject.toml's
    command = re.search(r"^#    uv pip compile (.+)$", LOCK.read_text(), re.MULTILINE).group(1)
    assert command == (
        "--universal --python-version 3.12 --generate-hashes "
        "services/connect_consumer/requirements.in -c requirements.lock "
        "-o requirements-connect.lock"
    )
    makefile = re.sub(r"\\\n\s*", "", (ROOT / "Makefile").read_text())
    recipe = makefile[makefile.index("\nlock:") : makefile.index("\nclean:")]
    make_command = command.replace("-o requirements-connect.lock", "-o $(CONNECT_LOCK)")
    assert f"uv pip compile --quiet {make_command}" in recipe


def test_the_construct_stages_every_file_the_dockerfile_copies(tmp_path):
    from aws_cdk import App, Environment, Stack

    from constructs_lib.connect.transcription import ConnectTranscription, ConnectTranscriptionProps

    app = App(outdir=str(tmp_path), builtin_cloud_formation_validation=False)
    stack = Stack(app, "Connect", env=Environment(account="123456789012", region="us-east-1"))
    instance = (
        "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
    )
    ConnectTranscription(
        stack,
        "Transcription",
        ConnectTranscriptionProps(
            instance_arn=instance,
            stream_prefix="voice-live",
            image_directory=str(ROOT),
            endpoint_name="voxtral-realtime",
        ),
    )
    app.synth()
    (context,) = [
        path
        for path in tmp_path.glob("asset.*")
        if (path / "services" / "connect_consumer" / "Dockerfile").is_file()
    ]
    staged = {str(path.relative_to(context)) for path in context.rglob("*") if path.is_file()}
    assert set(copied_files()) <= staged
    assert staged & {"requirements.lock", "pyproject.toml", "app.py", "cdk.json"} == set()
    assert [path for path in staged if path.startswith(("config/", "stacks/", "tests/"))] == []
    # Of services/ only the consumer's folder: not the other services beside it (the bridge's).
    assert {path.split("/")[1] for path in staged if path.startswith("services/")} == {
        "connect_consumer"
    }
