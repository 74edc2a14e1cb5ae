"""cdk.json configures every feature flag of the pinned aws-cdk-lib, at its recommended value except
the ones kept at their old value for a deployed stack's sake; docs/reference.md "CDK feature flags"
records each of those with its reason.

The recommended values come from aws-cdk-lib itself (``recommended-feature-flags.json`` in the jsii
bundle of the installed ``aws_cdk`` package), so an upgrade that brings new flags fails here until
they are set (and the templates compared, see docs/reference.md).
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import aws_cdk
import pytest
from aws_cdk import App, CfnResource, Stack

ROOT = Path(__file__).resolve().parents[2]

#: Flags kept at their pre-flag behaviour, the value, and the gist of the reason (docs/reference.md
#: has it in full).
KEPT = {
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": (False, "already exists"),
    "@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker": (False, "Replacement"),
    "@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal": (False, "broader IAM for nothing"),
    "@aws-cdk/core:enablePartitionLiterals": (False, "partition token"),
}

#: Flags configured before the rest were set, left at their values (unlike today's recommendation).
EARLIER = {
    "@aws-cdk/aws-s3:keepNotificationInImportedBucket": True,
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
}


def recommended() -> dict[str, object]:
    (bundle,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as archive:
        return json.load(archive.extractfile("package/recommended-feature-flags.json"))


def context() -> dict[str, object]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def test_every_recommended_flag_is_configured():
    flags = recommended()
    assert len(flags) > 80  # the bundle's list was found and read
    assert sorted(set(flags) - set(context())) == []


def test_each_flag_is_recommended_unless_kept_for_a_stated_reason():
    flags, configured = recommended(), context()
    differing = {name: configured[name] for name in flags if configured[name] != flags[name]}
    assert differing == {**{name: value for name, (value, _) in KEPT.items()}, **EARLIER}


def test_the_readme_records_each_kept_flag_with_its_value_and_reason():
    section = (
        (ROOT / "docs" / "reference.md")
        .read_text()
        .split("## CDK feature flags\n", 1)[1]
        .split("\n## ", 1)[0]
    )
    prose = re.sub(r"\s+", " ", section)
    for name, (value, reason) in KEPT.items():
        entry = re.search(rf"`{re.escape(name)}` = `{json.dumps(value)}`: (.*?)(?= - `@|$)", prose)
        assert entry and reason in entry.group(1), name
    for name, value in EARLIER.items():
        assert f"`{name}` (`{value if isinstance(value, str) else json.dumps(value)}`" in prose, (
            name
        )


def test_the_cdks_own_template_validation_fails_the_synth_under_cdk_json(tmp_path):
    """aws-cdk-lib validates every template at synth (its resource schemas and default rules).
    cdk.json's ``@aws-cdk/core:validateAgainstDefaultRules`` makes a finding fail the synth, of the
    app and of every variant the tests synthesize; without the flag the finding is a warning in the
    report and the synth passes, which is why most construct tests switch the validation off
    (tests/unit/constructs_lib/construct_kit.py ``unit_app``). Both synths print the finding on
    stderr (from jsii's node process, which pytest does not capture): the probe's stack is named for
    it."""

    def synth(context: dict, outdir) -> None:
        app = App(context=context, outdir=str(outdir))
        CfnResource(
            Stack(app, "ExpectedFindingProbe"),
            "Bucket",
            type="AWS::S3::Bucket",
            properties={"NoSuchProperty": 1},
        )
        app.synth()

    def findings(outdir) -> list[tuple[str, str]]:
        """(rule, severity) of each finding of the CDK's validation in the synth's validation
        report."""
        report = json.loads((outdir / "validation-report.json").read_text())
        (validation,) = [
            r for r in report["pluginReports"] if r["pluginName"] == "CloudFormation Validate"
        ]
        return [(v["ruleName"], v["severity"]) for v in validation["violations"]]

    assert context()["@aws-cdk/core:validateAgainstDefaultRules"] is True
    with pytest.raises(Exception, match="ValidationFailed"):
        synth(context(), tmp_path / "flagged")
    assert findings(tmp_path / "flagged") == [("F3002", "error")]
    synth({}, tmp_path / "unflagged")  # passes
    assert findings(tmp_path / "unflagged") == [("F3002", "warning")]
