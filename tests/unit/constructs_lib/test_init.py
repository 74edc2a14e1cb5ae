"""constructs_lib as a library: it imports nothing of the app, its props and checks load without
aws_cdk, and its public names resolve. The docs' example app, run in a Python of its own, is
tests/e2e/constructs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import constructs_lib
from tests.conftest import ROOT

LIBRARY = ROOT / "constructs_lib"
#: Top-level packages of this repository the library must not import (it is imported by them, or
#: builds their images: the services' packages, from services/).
APP_PACKAGES = {
    "config",
    "stacks",
    "voicectl",
    "bridge",
    "connect_consumer",
    "agent",
    "voice_devtools",
    "app",
    "tests",
}
#: The library's modules that must load without aws_cdk (the settings layer and voicectl import
#: them).
CDK_FREE = (
    "constructs_lib.sagemaker_endpoint.props",
    "constructs_lib.sagemaker_endpoint.scaling_props",
    "constructs_lib.monitoring.thresholds",
    "constructs_lib.facts.names",
    "constructs_lib.validation",
    "constructs_lib.facts.instance_types",
    "constructs_lib.network.props",
    "constructs_lib.ecs_service.props",
)


def imported_roots(path: Path) -> set[str]:
    """The top-level names ``path`` imports (absolute imports only)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_library_imports_nothing_of_the_app():
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & APP_PACKAGES)
        for path in LIBRARY.rglob("*.py")
        if imported_roots(path) & APP_PACKAGES
    }
    assert offenders == {}


def test_props_checks_and_facts_load_without_aws_cdk():
    code = (
        "import importlib, sys\n"
        + "".join(f"importlib.import_module({name!r})\n" for name in (*CDK_FREE, "config.settings"))
        + "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_every_public_name_resolves():
    for name in constructs_lib.__all__:
        assert getattr(constructs_lib, name) is not None, name
    assert (
        constructs_lib.RealtimeEndpoint.__module__ == "constructs_lib.sagemaker_endpoint.endpoint"
    )
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        constructs_lib.Nope  # noqa: B018
