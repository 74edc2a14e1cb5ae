"""constructs_lib as a library: it imports nothing of the app, its props and checks load without aws_cdk, its
public names resolve, and the docs' example (docs/constructs.md) builds and synthesizes in a Python where ``config``,
``stacks`` and ``voicectl`` cannot be imported."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import constructs_lib
from tests.conftest import ROOT

LIBRARY = ROOT / "constructs_lib"
#: Top-level packages of this repository the library must not import (it is imported by them).
APP_PACKAGES = {"config", "stacks", "voicectl", "container", "app", "tests"}
#: The library's modules that must load without aws_cdk (the settings layer and voicectl import them).
CDK_FREE = ("constructs_lib.sagemaker_endpoint.props", "constructs_lib.sagemaker_endpoint.scaling_props",
            "constructs_lib.monitoring.thresholds", "constructs_lib.facts.names", "constructs_lib.validation",
            "constructs_lib.facts.instance_types", "constructs_lib.artifacts.model_staging_build.stage_model.command",
            "constructs_lib.network.props")


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
    offenders = {str(path.relative_to(ROOT)): sorted(imported_roots(path) & APP_PACKAGES)
                 for path in LIBRARY.rglob("*.py") if imported_roots(path) & APP_PACKAGES}
    assert offenders == {}


def test_the_staging_build_imports_only_itself_the_standard_library_boto3_and_the_hub_client():
    allowed = set(sys.stdlib_module_names) | {"boto3", "botocore", "s3transfer", "huggingface_hub", "__future__"}
    paths = sorted((LIBRARY / "artifacts" / "model_staging_build").rglob("*.py"))
    assert paths, "no staging build code found"
    for path in paths:
        assert imported_roots(path) <= allowed, (path, imported_roots(path) - allowed)


def test_props_checks_and_facts_load_without_aws_cdk():
    code = ("import importlib, sys\n"
            + "".join(f"importlib.import_module({name!r})\n" for name in (*CDK_FREE, "config.settings"))
            + "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_every_public_name_resolves():
    for name in constructs_lib.__all__:
        assert getattr(constructs_lib, name) is not None, name
    assert constructs_lib.RealtimeEndpoint.__module__ == "constructs_lib.sagemaker_endpoint.endpoint"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        constructs_lib.Nope  # noqa: B018


def readme_example() -> str:
    """The first Python block of docs/constructs.md, "Use the constructs in your own CDK app"."""
    text = (ROOT / "docs" / "constructs.md").read_text()
    section = text.split("# Use the constructs in your own CDK app\n", 1)[1].split("\n## ", 1)[0]
    (block, *_) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


#: Run before the example: the app's packages cannot be imported, and the repository is not on sys.path.
BLOCKER = f"""
import importlib.abc, sys
from pathlib import Path

BLOCKED = {sorted(APP_PACKAGES - {"tests"})!r}

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} cannot be imported here: the construct library must not need it")
        return None

sys.meta_path.insert(0, Blocked())
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != Path({str(ROOT)!r})]
for name in BLOCKED:
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"the blocker let {{name}} through")
"""


def test_the_readme_example_builds_in_an_app_without_config_stacks_or_voicectl(tmp_path):
    example = readme_example()
    check = "\nimport sys\nprint('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED))\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"CDK_OUTDIR": str(tmp_path / "cdk.out")}
    result = subprocess.run([sys.executable, "-c", BLOCKER + example + check], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "LOADED []"

    template = json.loads((tmp_path / "cdk.out" / "SpeechToText.template.json").read_text())
    by_type: dict[str, dict] = {}
    for logical_id, resource in template["Resources"].items():
        by_type.setdefault(resource["Type"], {})[logical_id] = resource
    ((endpoint_id, endpoint),) = by_type["AWS::SageMaker::Endpoint"].items()
    assert endpoint["Properties"]["EndpointName"] == "transcriber"
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    rollback = endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    alarm_names = {k: r["Properties"]["AlarmName"] for k, r in by_type["AWS::CloudWatch::Alarm"].items()}
    assert [alarm_names[a["AlarmName"]["Ref"]] for a in rollback] == ["transcriber-Invocation5XXErrorRate"]
    # 11 alarms on the new endpoint (a GPU instance, with the rollback rate), 10 on the imported one.
    assert sum(n.startswith("transcriber-") for n in alarm_names.values()) == 11
    assert sum(n.startswith("sonic-tts-") for n in alarm_names.values()) == 10
    latency = next(r["Properties"] for k, r in by_type["AWS::CloudWatch::Alarm"].items()
                   if alarm_names[k] == "transcriber-ModelLatencyP90")
    assert latency["Threshold"] == 800_000  # 800 ms in the microseconds SageMaker reports
    ((_, target),) = by_type["AWS::ApplicationAutoScaling::ScalableTarget"].items()
    assert target["Properties"]["ResourceId"] == "endpoint/transcriber/variant/AllTraffic"
    ((_, policy),) = by_type["AWS::ApplicationAutoScaling::ScalingPolicy"].items()
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 120
    ((_, model),) = by_type["AWS::SageMaker::Model"].items()
    assert model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"] == "s3://my-models/voxtral/2602/"
    statements = [s for p in by_type["AWS::IAM::Policy"].values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    sids = {s.get("Sid") for s in statements}
    assert {"PullImage", "ReadModelPrefix", "ListModelPrefix", "PutMetrics", "WriteEndpointLogs",
            "DescribeRollbackAlarms"} <= sids
    invoke = [s for s in statements if s["Action"] == "sagemaker:InvokeEndpoint"]
    assert [s["Resource"] for s in invoke] == [{"Ref": endpoint_id}]
