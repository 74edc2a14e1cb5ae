"""constructs_lib.facts: the facts load without the CDK (``config`` and ``voicectl`` import them),
and the package exports the shared value type S3Prefix (the contracts', which the staging build and
the bridge parse with)."""

from __future__ import annotations

import ast
import subprocess
import sys

from contracts.model import S3Prefix as ContractS3Prefix
from tests.conftest import ROOT

FACTS = ROOT / "constructs_lib" / "facts"
#: Top-level packages of the CDK and its runtime (jsii), none of which a facts module may import.
CDK_ROOTS = {"aws_cdk", "constructs", "jsii", "cdk_nag", "cdk_ecr_deployment"}


def test_no_facts_module_imports_the_cdk():
    paths = sorted(FACTS.glob("*.py"))
    assert {path.name for path in paths} >= {
        "__init__.py",
        "capacity.py",
        "cuda_compat.py",
        "instance_types.py",
        "names.py",
    }
    offenders = {}
    for path in paths:
        roots = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
        if roots & CDK_ROOTS:
            offenders[path.name] = sorted(roots & CDK_ROOTS)
    assert offenders == {}


def test_importing_every_facts_module_loads_no_cdk_module():
    modules = ["constructs_lib.facts"] + [
        f"constructs_lib.facts.{path.stem}"
        for path in sorted(FACTS.glob("*.py"))
        if path.stem != "__init__"
    ]
    code = (
        "import importlib, sys\n"
        + "".join(f"importlib.import_module({name!r})\n" for name in modules)
        + f"print(sorted(m for m in {sorted(CDK_ROOTS)!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_s3_prefix_is_the_one_the_staging_build_parses_with():
    from constructs_lib import S3Prefix
    from constructs_lib.facts import S3Prefix as FactsS3Prefix
    from model_staging.stage_model import command

    assert S3Prefix is FactsS3Prefix is command.S3Prefix is ContractS3Prefix
    assert str(S3Prefix.parse("s3://models-bucket/voxtral")) == "s3://models-bucket/voxtral/"
