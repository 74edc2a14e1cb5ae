"""The bot's image (services/agent/Dockerfile): exactly the modules the bot imports (an import
trace: agent_imports.py here), its lock covering their third-party imports, and its entry point. The
staged build context is checked against the same COPY list in tests/app/test_agent_stack.py."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from tools.staging_requirements import lock_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "services" / "agent" / "Dockerfile").read_text()
LOCK = ROOT / "requirements-agent.lock"
TRACER = Path(__file__).with_name("agent_imports.py")

#: Distributions the trace meets only because the development environment has them (each is
#: imported inside a try/except ImportError or by another such one). {name: why}
OPTIONAL_IMPORTS = {
    "certifi": "botocore.httpsession uses certifi's CA file when installed, else its own",
    "brotli": "aiohttp.compression_utils decodes brotli only when it is installed",
    "opentelemetry-api": "pipecat.utils.tracing.setup: tracing only when OpenTelemetry is there",
    "opentelemetry-sdk": "the same",
    "opentelemetry-proto": "the same",
    "opentelemetry-semantic-conventions": "the same",
    "opentelemetry-exporter-otlp": "the same",
    "opentelemetry-exporter-otlp-common": "the same",
    "opentelemetry-exporter-otlp-proto-common": "the same",
    "opentelemetry-exporter-otlp-proto-grpc": "the same",
    "opentelemetry-exporter-otlp-proto-http": "the same",
    "opentelemetry-exporter-http-transport": "the same",
    "psutil": "opentelemetry.sdk.resources (above)",
    "httpx": "the development environment's httpx (openai here runs on httpx2, which is locked)",
    "click": "httpx._main, imported by httpx's __init__ only when click is installed",
    "pygments": "httpx._main (above)",
    "rich": "httpx._main (above)",
    "h2": "httpcore2's HTTP/2 module, used only with http2=True (the http2 extra)",
    "hpack": "h2 (above)",
    "hyperframe": "h2 (above)",
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
    done = subprocess.run(
        [sys.executable, str(TRACER)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_image_copies_exactly_the_modules_the_bot_imports():
    traced = trace()
    assert traced["failed"] == []
    assert sorted(path for path in copied_files() if path.endswith(".py")) == traced["modules"]
    # Each COPY lands in the folder its files come from: /app mirrors the repository.
    for copy in instructions("COPY"):
        *sources, destination = copy.split()
        folders = {f"{Path(source).parent}/" for source in sources}
        assert folders == {destination} or sources == ["requirements-agent.lock"], copy


def test_the_trace_reaches_both_targets_protection_and_the_pipeline():
    traced = trace()
    assert {
        "services/bridge/task_protection.py",
        "contracts/agent_metrics.py",
        "voice_client/sagemaker_stream.py",
        "voice_client/realtime/websocket.py",
        "contracts/model.py",
        "contracts/realtime.py",
    } <= set(traced["modules"])
    assert [
        path
        for path in traced["modules"]
        if path.startswith(("config/", "stacks/", "constructs_lib/"))
    ] == []
    assert {
        "pipecat-ai",
        "onnxruntime",
        "awscrt",
        "aws-sdk-sagemaker-runtime-http2",
        "aiohttp",
        "boto3",
        "websockets",
    } <= set(traced["distributions"])


def test_the_lock_covers_every_third_party_import():
    locked = set(lock_blocks(LOCK.read_text()))
    needed = {canonicalize_name(name) for name in trace()["distributions"]} - set(OPTIONAL_IMPORTS)
    assert sorted(needed - locked) == []
    assert {"awscrt", "aiohttp", "pipecat-ai"} <= locked
    assert locked & {"aws-cdk-lib", "cdk-nag", "moto", "pytest", "gradio"} == set()


def test_the_image_installs_the_lock_and_runs_the_bot_as_non_root():
    assert instructions("RUN")[0] == (
        "pip install --no-cache-dir --no-deps --require-hashes -r requirements-agent.lock"
    )
    assert "requirements-agent.lock" in copied_files()
    assert json.loads(instructions("CMD")[0]) == ["python", "-m", "agent"]
    assert (ROOT / "services" / "agent" / "__main__.py").is_file()
    # The services' packages (agent, bridge) import from /app/services, as services/ in the tree.
    assert "PYTHONPATH=/app/services" in instructions("ENV")
    assert instructions("WORKDIR") == ["/app"]
    assert instructions("USER") == ["10001"]
