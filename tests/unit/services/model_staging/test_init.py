"""services/model_staging/: the staging build's code imports only what its build source carries and
its pinned requirements install, and loads without the CDK (``voicectl stage-model`` imports it)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.unit.constructs_lib.test_init import imported_roots

BUILD = ROOT / "services" / "model_staging"


def test_the_staging_build_imports_only_itself_the_contracts_the_stdlib_boto3_and_the_hub_client():
    """Its build source carries the contracts beside it (test_model_staging.py), and nothing else of
    the project."""
    allowed = set(sys.stdlib_module_names) | {
        "boto3",
        "botocore",
        "s3transfer",
        "huggingface_hub",
        "__future__",
        "contracts",
    }
    paths = sorted(BUILD.rglob("*.py"))
    assert [p.relative_to(BUILD).as_posix() for p in paths][:3] == [
        "__init__.py",
        "stage_model/__init__.py",
        "stage_model/__main__.py",
    ]
    for path in paths:
        assert imported_roots(path) <= allowed, (path, imported_roots(path) - allowed)


def test_the_command_loads_without_aws_cdk():
    code = (
        "import sys\nimport model_staging.stage_model.command\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "services")])},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"
