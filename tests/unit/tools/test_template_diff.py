"""tools/template_diff.py, the comparison of two synthesized apps: it lists every difference
and fails on a changed logical id of a resource that must keep it."""

from __future__ import annotations

import json
import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import template_diff

BUCKET = {
    "Type": "AWS::S3::Bucket",
    "Properties": {"Versioning": {"Status": "Enabled"}},
    "Metadata": {"aws:cdk:path": "App/Models/Bucket/Resource"},
}
POLICY = {
    "Type": "AWS::IAM::Policy",
    "Properties": {
        "PolicyDocument": {
            "Statement": [
                {"Sid": "A", "Action": "s3:GetObject"},
                {"Sid": "B", "Action": "logs:PutLogEvents"},
            ]
        }
    },
}


def write(folder, resources, outputs=None):
    folder.mkdir()
    (folder / "App.template.json").write_text(
        json.dumps({"Resources": resources, "Outputs": outputs or {}})
    )
    return folder


def test_identical_templates_have_no_difference(tmp_path):
    before = write(tmp_path / "a", {"ModelsBucket1": BUCKET})
    after = write(tmp_path / "b", {"ModelsBucket1": BUCKET})
    assert template_diff.compare(before, after) == (["== App: no difference(s)"], [])


def test_a_moved_construct_with_the_same_logical_id_is_reported_but_allowed(tmp_path):
    moved = {**BUCKET, "Metadata": {"aws:cdk:path": "App/Default/Models/Bucket/Resource"}}
    lines, violations = template_diff.compare(
        write(tmp_path / "a", {"ModelsBucket1": BUCKET}),
        write(tmp_path / "b", {"ModelsBucket1": moved}),
    )
    assert lines[1:] == [
        "  ModelsBucket1: construct path App/Models/Bucket/Resource -> "
        "App/Default/Models/Bucket/Resource (logical id unchanged)"
    ]
    assert violations == []


def test_a_changed_logical_id_of_a_bucket_is_a_violation_and_a_policy_rename_is_compared(tmp_path):
    renamed_policy = {
        "Type": "AWS::IAM::Policy",
        "Properties": {
            "PolicyDocument": {
                "Statement": [
                    {"Sid": "B", "Action": "logs:PutLogEvents"},
                    {"Sid": "A2", "Action": "s3:GetObject"},
                ]
            }
        },
    }
    before = write(
        tmp_path / "a", {"ModelsBucket1": BUCKET, "Policy1": POLICY}, {"Name": {"Value": "x"}}
    )
    after = write(
        tmp_path / "b",
        {"ModelsBucket2": BUCKET, "Policy2": renamed_policy},
        {"Name": {"Value": "y"}},
    )
    lines, violations = template_diff.compare(before, after)
    assert violations == [
        "App: ModelsBucket1 (AWS::S3::Bucket) removed: holds the model weights and access logs",
        "App: ModelsBucket2 (AWS::S3::Bucket) added: holds the model weights and access logs",
    ]
    assert (
        "  removed Policy1 (AWS::IAM::Policy)" in lines
        and "  added Policy2 (AWS::IAM::Policy)" in lines
    )
    assert any(
        line.startswith(
            "  Policy1 -> Policy2 (renamed?).Properties.PolicyDocument.Statement[Sid=A]: removed"
        )
        for line in lines
    )
    assert '  Outputs.Name.Value: "x" -> "y"' in lines
    assert template_diff.main([str(before), str(after)]) == 1


def test_json_inside_a_string_is_compared_field_by_field(tmp_path):
    def project(command):
        return {
            "Type": "AWS::CodeBuild::Project",
            "Properties": {
                "Source": {
                    "BuildSpec": json.dumps(
                        {"phases": {"build": {"commands": [command]}}, "version": "0.2"}
                    )
                }
            },
        }

    lines, _ = template_diff.compare(
        write(tmp_path / "a", {"Build": project("python -m old")}),
        write(tmp_path / "b", {"Build": project("python -m new")}),
    )
    assert lines[1:] == [
        '  Build.Properties.Source.BuildSpec(json).phases.build.commands[0]: "python -m old" -> '
        '"python -m new"'
    ]
