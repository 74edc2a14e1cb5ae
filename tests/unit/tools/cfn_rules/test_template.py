"""The rules' shared helpers (tools/cfn_rules/_template.py): reading template dicts (resources
by type, references across stacks, literal values), the rule base that wraps a pure check as a
cfn-lint rule, and the rules a module defines."""

from __future__ import annotations

import sys
import types

import pytest

from tests.conftest import ROOT
from tools.cfn_rules import _gate  # noqa: F401  (puts the rules folder on sys.path, as cfn-lint does)

# isort: split

import _template  # the module the rules import, not a copy under another name

TEMPLATE = {
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "b"}},
        "Bare": {"Type": "AWS::S3::Bucket"},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "Broken": "not a resource",
    }
}


def test_the_project_root_is_importable_for_the_rules():
    assert _template.ROOT == ROOT
    assert str(ROOT) in sys.path


def test_resources_of_a_type_with_their_properties():
    assert _template.resources(TEMPLATE, "AWS::S3::Bucket") == {
        "Bucket": {"BucketName": "b"},
        "Bare": {},
    }
    assert _template.resources(TEMPLATE, "AWS::SQS::Queue") == {"Queue": {}}
    assert _template.resources(TEMPLATE, "AWS::SNS::Topic") == {}
    assert _template.resources({}, "AWS::S3::Bucket") == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Ref": "X"}, True),
        ({"Fn::GetAtt": ["X", "Arn"]}, True),
        ({"Fn::ImportValue": "e"}, True),
        ({"Fn::Sub": "${AWS::Region}"}, True),
        ({"Condition": "IsProd"}, True),
        ({"Ref": "X", "Other": 1}, False),  # two keys: a property map, not an intrinsic
        ({"Fn::Unknown": 1}, False),
        ({"Key": "v"}, False),
        ("Ref", False),
        (["Ref"], False),
        (3, False),
    ],
)
def test_an_intrinsic_is_a_one_key_map_of_a_cloudformation_function(value, expected):
    assert _template.is_intrinsic(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"Ref": "Bucket"}, "Bucket"),
        ({"Fn::GetAtt": ["Bucket", "Arn"]}, "Bucket"),
        ({"Fn::GetAtt": "Queue.Arn"}, "Queue"),
        ({"Ref": "AWS::AccountId"}, None),  # a pseudo parameter, not a resource
        ({"Ref": "Missing"}, None),
        ({"Fn::ImportValue": "Bucket"}, None),
        ("Bucket", None),
    ],
)
def test_the_resource_a_ref_or_getatt_points_at(value, expected):
    assert _template.ref_target(TEMPLATE, value) == expected


def test_references_at_any_depth():
    value = {
        "Fn::Join": [
            "",
            [
                {"Ref": "A"},
                ":",
                {"Fn::GetAtt": ["B", "Arn"]},
                {"Fn::GetAtt": "C.Name"},
                {"Nested": [{"Ref": "D"}, {"Ref": 3}]},
            ],
        ]
    }
    assert _template.references(value) == {"A", "B", "C", "D"}
    assert _template.references("A") == set()
    assert _template.references([{"Ref": "E"}, "F"]) == {"E"}


def test_resolve_follows_an_import_to_the_exporting_stack():
    foundation = {
        "Resources": {"Key": {"Type": "AWS::KMS::Key"}},
        "Outputs": {
            "KeyArn": {"Value": {"Fn::GetAtt": ["Key", "Arn"]}, "Export": {"Name": "F:KeyArn"}},
            "Name": {"Value": "literal", "Export": {"Name": "F:Name"}},
        },
    }
    app = {"F": foundation, "V": {"Resources": {"Logs": {"Type": "AWS::Logs::LogGroup"}}}}
    assert _template.resolve(app, "V", {"Ref": "Logs"}) == ("V", "Logs")
    assert _template.resolve(app, "V", {"Fn::ImportValue": "F:KeyArn"}) == ("F", "Key")
    assert _template.resolve(app, "V", {"Fn::ImportValue": "F:Name"}) is None  # exports no resource
    assert _template.resolve(app, "V", {"Fn::ImportValue": "Nobody:KeyArn"}) is None
    assert _template.resolve(app, "V", {"Ref": "Key"}) is None  # the key is not in V
    assert _template.resolve(app, "Absent", {"Ref": "Logs"}) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (300, 300),
        ("300", 300),
        (" 300 ", 300),
        ("-5", -5),
        (300.0, 300),
        (300.5, None),
        ("3e2", None),
        ("", None),
        (True, None),
        (False, None),
        ({"Ref": "P"}, None),
        (None, None),
    ],
)
def test_a_literal_integer_as_cloudformation_reads_it(value, expected):
    assert _template.literal_int(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("yes", None),
        (1, None),
        ({"Ref": "P"}, None),
        (None, None),
    ],
)
def test_a_literal_boolean_as_cloudformation_reads_it(value, expected):
    assert _template.literal_bool(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::b"]]}, "arn:{}:s3:::b"),
        ({"Fn::Join": ["/", ["a", "b"]]}, "a/b"),
        ({"Fn::Join": ["", {"Ref": "List"}]}, None),  # the pieces are computed
        ({"Fn::Sub": "x"}, None),
        (3, None),
    ],
)
def test_joined_text_stands_in_for_computed_pieces(value, expected):
    assert _template.joined_text(value) == expected


def test_as_list_and_elbv2_attributes():
    assert _template.as_list([1, 2]) == [1, 2]
    assert _template.as_list("a") == ["a"]
    assert _template.as_list(None) == []
    props = {
        "LoadBalancerAttributes": [
            {"Key": "idle_timeout.timeout_seconds", "Value": "70"},
            "junk",
            {"Key": "access_logs.s3.enabled", "Value": "true"},
        ],
        "TargetGroupAttributes": {"Key": "deregistration_delay.timeout_seconds", "Value": "25"},
    }
    assert _template.attributes(props) == {
        "idle_timeout.timeout_seconds": "70",
        "access_logs.s3.enabled": "true",
    }
    assert _template.attributes(props, "TargetGroupAttributes") == {
        "deregistration_delay.timeout_seconds": "25"
    }
    assert _template.attributes({}) == {}


def test_match_wraps_each_finding_as_a_cfn_lint_match_with_its_source():
    class NamedBuckets(_template.TemplateRule):
        id, shortdesc, source_url = "E9999", "Buckets have no name", "https://example.com/rule"

        def findings(self, template):
            for lid, props in _template.resources(template, "AWS::S3::Bucket").items():
                if "BucketName" in props:
                    yield ("Resources", lid, "Properties", "BucketName"), f"{lid} is named"

    from cfnlint.rules import RuleMatch

    (match,) = NamedBuckets().match(types.SimpleNamespace(template=TEMPLATE))
    assert isinstance(match, RuleMatch)
    assert match.path == ["Resources", "Bucket", "Properties", "BucketName"]
    assert match.message == "Bucket is named [https://example.com/rule]"
    assert NamedBuckets().match(types.SimpleNamespace(template={"Resources": {}})) == []


def test_the_rules_of_a_module_are_its_own_rule_classes_in_id_order():
    """Not the bases (no id), not a rule the module imports, not a class that is no rule."""
    module = types.ModuleType("family")

    class Base(_template.TemplateRule):
        pass

    class Second(Base):
        id = "E9002"

    class First(_template.TemplateRule):
        id = "E9001"

    class NoRule:
        id = "E9003"

    class Imported(_template.TemplateRule):
        id = "E9000"

    for cls in (Base, Second, First, NoRule):
        cls.__module__ = "family"
    vars(module).update(
        Base=Base, Second=Second, First=First, NoRule=NoRule, Imported=Imported, T=_template
    )
    assert _template.rules_of(vars(module)) == (First, Second)
