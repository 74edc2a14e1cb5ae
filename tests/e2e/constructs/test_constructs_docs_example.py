"""The docs' example app (docs/constructs.md, "Use the constructs in your own CDK app") as a user
runs it: in a Python of its own where ``config``, ``stacks`` and ``voicectl`` cannot be imported and
the repository is not on the path, synthesizing the whole example (a fresh CDK process: about 8 s of
CPU, so here rather than tests/unit)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.conftest import ROOT
from tests.unit.constructs_lib.test_init import APP_PACKAGES


def readme_example() -> str:
    """The first Python block of docs/constructs.md, "Use the constructs in your own CDK app"."""
    text = (ROOT / "docs" / "constructs.md").read_text()
    section = text.split("# Use the constructs in your own CDK app\n", 1)[1].split("\n## ", 1)[0]
    (block, *_) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


#: Run before the example: the app's packages cannot be imported, and the repository is not on
#: sys.path.
BLOCKER = f"""
import importlib.abc, sys
from pathlib import Path

BLOCKED = {sorted(APP_PACKAGES - {"tests"})!r}

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(
                f"{{name}} cannot be imported here: the construct library must not need it")
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
    check = (
        "\nimport sys\nprint('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in "
        "BLOCKED))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "CDK_OUTDIR": str(tmp_path / "cdk.out")
    }
    result = subprocess.run(
        [sys.executable, "-c", BLOCKER + example + check],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
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
    alarm_names = {
        k: r["Properties"]["AlarmName"] for k, r in by_type["AWS::CloudWatch::Alarm"].items()
    }
    assert [alarm_names[a["AlarmName"]["Ref"]] for a in rollback] == [
        "transcriber-Invocation5XXErrorRate"
    ]
    # 11 alarms on the new endpoint (a GPU instance, with the rollback rate), 10 on the imported
    # one.
    assert sum(n.startswith("transcriber-") for n in alarm_names.values()) == 11
    assert sum(n.startswith("sonic-tts-") for n in alarm_names.values()) == 10
    latency = next(
        r["Properties"]
        for k, r in by_type["AWS::CloudWatch::Alarm"].items()
        if alarm_names[k] == "transcriber-ModelLatencyP90"
    )
    assert latency["Threshold"] == 800_000  # 800 ms in the microseconds SageMaker reports
    ((_, target),) = by_type["AWS::ApplicationAutoScaling::ScalableTarget"].items()
    assert target["Properties"]["ResourceId"] == "endpoint/transcriber/variant/AllTraffic"
    ((_, policy),) = by_type["AWS::ApplicationAutoScaling::ScalingPolicy"].items()
    assert policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 120
    ((_, model),) = by_type["AWS::SageMaker::Model"].items()
    assert (
        model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
        == "s3://my-models/voxtral/2602/"
    )
    statements = [
        s
        for p in by_type["AWS::IAM::Policy"].values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    sids = {s.get("Sid") for s in statements}
    assert {
        "PullImage",
        "ReadModelPrefix",
        "ListModelPrefix",
        "PutMetrics",
        "WriteEndpointLogs",
        "DescribeRollbackAlarms",
    } <= sids
    invoke = [s for s in statements if s["Action"] == "sagemaker:InvokeEndpoint"]
    assert [s["Resource"] for s in invoke] == [{"Ref": endpoint_id}]
