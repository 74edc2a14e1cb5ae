"""The rule book's CodeBuild rules (tools/cfn_rules/aws_codebuild.py): each rule fails on a template
written to break it and holds on the same template mended (test_aws_rules.py holds the book as a
whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import findings, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import aws_codebuild


def project(image="aws/codebuild/standard:7.0", kind="LINUX_CONTAINER", **props) -> dict:
    return template(
        Build=(
            "AWS::CodeBuild::Project",
            {
                "Environment": {
                    "Image": image,
                    "Type": kind,
                    "ComputeType": "BUILD_GENERAL1_MEDIUM",
                },
                "QueuedTimeoutInMinutes": 5,
                **props,
            },
        )
    )


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (
        aws_codebuild.CodeBuildEnvironment,
        project(kind="ARM_CONTAINER"),
        "needs LINUX_CONTAINER",
        project(),
    ),
    (
        aws_codebuild.CodeBuildEnvironment,
        project(QueuedTimeoutInMinutes=4),
        "outside 5-480",
        project(),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []
