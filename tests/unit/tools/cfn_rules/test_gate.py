"""The gate tests/conftest.py applies to every synthesized app (tools/cfn_rules/_gate.py):
every rule over every template, app-level rules over the app at once, each finding one line naming
rule, stack, path and source."""

from __future__ import annotations

from tools.cfn_rules import _gate

# isort: split

import aws_rules  # put on sys.path by _gate, as cfn-lint imports it
import guide_rules
import required_grants
from api_models import ApiModel
from iam_actions import IamStatements


class EveryBucket:
    """A stand-in rule: one finding per bucket, in each template on its own."""

    id, source_url = "E9998", "https://example.com/buckets"

    def findings(self, template):
        for lid, resource in template.get("Resources", {}).items():
            if resource["Type"] == "AWS::S3::Bucket":
                yield ("Resources", lid, "Properties", 0), f"{lid} is a bucket"


class StackCount:
    """A stand-in app-level rule: reads every stack at once; its per-template findings must not
    run."""

    id, source_url, app_level = "E9999", "https://example.com/app", True

    def findings(self, template):
        raise AssertionError("an app-level rule is run over the app, not template by template")

    def app_findings(self, templates):
        yield sorted(templates)[-1], ("Outputs",), f"{len(templates)} stacks"


BUCKET = {"Type": "AWS::S3::Bucket"}
APP = {
    "A": {"Resources": {"Logs": BUCKET, "Queue": {"Type": "AWS::SQS::Queue"}}},
    "B": {"Resources": {"Data": BUCKET}},
}


def test_all_rules_are_the_required_grants_the_rule_book_then_the_api_models_and_iam_checks_in_id_order():  # noqa: E501 (a test's name says what it checks)
    assert set(_gate.ALL_RULES) == {
        *required_grants.RULES,
        *aws_rules.RULES,
        *guide_rules.RULES,
        ApiModel,
        IamStatements,
    }
    assert _gate.ALL_RULES[-2:] == (ApiModel, IamStatements)
    ids = [rule.id for rule in _gate.ALL_RULES]
    assert ids == sorted(ids)
    assert (ids[0], ids[len(required_grants.RULES)], ids[-2], ids[-1]) == (
        "E9001",
        "E9101",
        "E9950",
        "E9960",
    )


def test_each_finding_is_one_line_with_rule_stack_path_message_and_source():
    assert _gate.template_findings(APP, rules=(EveryBucket,)) == [
        "E9998 A: Resources/Logs/Properties/0: Logs is a bucket (https://example.com/buckets)",
        "E9998 B: Resources/Data/Properties/0: Data is a bucket (https://example.com/buckets)",
    ]


def test_an_app_level_rule_reads_the_app_once_and_the_others_each_template():
    assert _gate.template_findings(APP, rules=(StackCount, EveryBucket)) == [
        "E9999 B: Outputs: 2 stacks (https://example.com/app)",
        "E9998 A: Resources/Logs/Properties/0: Logs is a bucket (https://example.com/buckets)",
        "E9998 B: Resources/Data/Properties/0: Data is a bucket (https://example.com/buckets)",
    ]


def test_no_findings_when_every_rule_holds():
    assert (
        _gate.template_findings(
            {"A": {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}}, rules=(EveryBucket,)
        )
        == []
    )
    assert _gate.template_findings({"A": {"Resources": {}}}) == []


def test_the_default_rules_are_every_rule():
    """A KMS key on local-NVMe storage (the rule book) and an unknown member (the API models): both
    found."""
    config = {
        "Type": "AWS::SageMaker::EndpointConfig",
        "Properties": {
            "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "ModelName": "m",
                    "InitialInstanceCount": 1,
                    "InstanceType": "ml.g6.4xlarge",
                    "ModelNmae": "m",
                }
            ],
        },
    }
    found = _gate.template_findings({"S": {"Resources": {"C": config}}})
    assert sorted(line.split(":")[0] for line in found) == ["E9101 S", "E9950 S"], found
