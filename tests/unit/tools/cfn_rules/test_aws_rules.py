"""The rule book as a whole (tools/cfn_rules/aws_rules.py, which gathers the family modules): every
rule has a case in its family's tests (tests/unit/tools/cfn_rules/test_aws_<family>.py, where each
fails on a template written to break it and holds on the same template mended) and states its
source; the rules load into cfn-lint with --append-rules. That every app a session synthesizes is
held to them (tests/conftest.py synthesize) is tested in tests/app/test_aws_rules.py."""

from __future__ import annotations

import json

from tests.conftest import ROOT
from tests.unit.tools.cfn_rules import (
    test_aws_cloudwatch,
    test_aws_codebuild,
    test_aws_ecs,
    test_aws_network,
    test_aws_sagemaker,
    test_aws_storage,
)
from tests.unit.tools.cfn_rules.book_kit import config, template
from tools.cfn_rules import _gate

# isort: split

import aws_rules  # put on sys.path by _gate, as cfn-lint imports it
import aws_storage

RULES_DIR = ROOT / "tools" / "cfn_rules"
#: Every family's cases (rule, broken template, a piece of the finding, mended template).
CASES = [
    *test_aws_sagemaker.CASES,
    *test_aws_cloudwatch.CASES,
    *test_aws_ecs.CASES,
    *test_aws_network.CASES,
    *test_aws_storage.CASES,
    *test_aws_codebuild.CASES,
]


def test_every_rule_has_a_case_and_states_its_source():
    assert {c[0] for c in CASES} | {aws_storage.LogGroupKeyLetsCloudWatchLogsIn} == set(
        aws_rules.RULES
    )
    ids = [rule.id for rule in _gate.ALL_RULES]
    assert len(ids) == len(set(ids)) and all(i.startswith("E9") and len(i) == 5 for i in ids)
    for rule in _gate.ALL_RULES:
        assert rule.source_url.startswith("https://"), rule.id
        assert len(rule.shortdesc) > 40 and rule.description, rule.id


def test_intrinsic_values_are_not_guessed():
    """A value CloudFormation computes is unknown at synth: the rules skip it rather than guess."""
    tpl = template(
        C=config({"Ref": "InstanceType"}),
        T=(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "MinCapacity": {"Ref": "Low"},
                "MaxCapacity": 1,
                "ServiceNamespace": "sagemaker",
                "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                "ResourceId": {
                    "Fn::Join": ["", ["endpoint/", {"Ref": "Name"}, "/variant/AllTraffic"]]
                },
            },
        ),
    )
    assert _gate.template_findings({"Probe": tpl}) == []


def test_findings_name_rule_stack_path_and_source():
    (line,) = _gate.template_findings({"RealtimeVoice-Voxtral": template(C=config())})
    assert line.startswith(
        "E9101 RealtimeVoice-Voxtral: Resources/C/Properties/ProductionVariants/0/InstanceType: "
    )
    assert line.endswith(
        "(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html)"
    )


def test_cfn_lint_loads_the_rules_with_append_rules(tmp_path):
    """The same folder .cfnlintrc.yaml appends: cfn-lint finds the broken EndpointConfig
    (in-process, one template)."""
    import cfnlint.api
    from cfnlint.rules import RulesCollection

    rules = RulesCollection()
    rules.create_from_directory(str(RULES_DIR))
    assert {r.id for r in rules} >= {rule.id for rule in _gate.ALL_RULES}
    broken = template(C=config())
    broken["Resources"]["C"]["Properties"]["ProductionVariants"][0]["ModelName"] = "m"
    matches = cfnlint.api.lint(json.dumps(broken), rules=rules, regions=["us-east-1"])
    assert [m.rule.id for m in matches] == ["E9101"], matches
    assert "append_rules: [tools/cfn_rules]" in (ROOT / ".cfnlintrc.yaml").read_text()


def test_the_book_is_its_families_rules_in_id_order():
    """Each family's ids, so that a family left out of aws_rules.FAMILIES (which cfn-lint would
    still load) fails here."""
    assert [rule.id for rule in aws_rules.RULES] == [
        *(f"E91{n:02}" for n in range(1, 11)),
        "E9201",
        *(f"E93{n:02}" for n in range(1, 10)),
        "E9401",
        "E9402",
        "E9403",
        "E9501",
        "E9502",
        "E9503",
        "E9601",
        "E9602",
        "E9701",
        "E9702",
        "E9801",
        "E9901",
    ]
    assert {family.__name__ for family in aws_rules.FAMILIES} == {
        path.stem for path in RULES_DIR.glob("aws_*.py") if path.stem != "aws_rules"
    }


def test_the_gate_runs_every_rule_cfn_lint_loads_from_the_folder():
    """cfn-lint loads every rule module of the folder on its own: the gate runs the same rules,
    each once."""
    from cfnlint.rules import RulesCollection

    rules = RulesCollection()
    rules.create_from_directory(str(RULES_DIR))
    loaded = [rule.id for rule in rules if rule.id.startswith("E9")]
    assert sorted(loaded) == [rule.id for rule in _gate.ALL_RULES]
