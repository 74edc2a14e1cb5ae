"""The required grants as a whole (tools/cfn_rules/required_grants.py, which gathers the family
modules): every rule has an id of its own and a source. Each rule holds on a template that grants
what AWS documents and fails, naming what is missing, on the same template with the grant taken out
(tests/unit/tools/cfn_rules/test_grants_<family>.py). That every synthesized variant holds them is
tested in tests/app/test_aws_rules.py."""

from __future__ import annotations

from tests.conftest import ROOT
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import required_grants as rg


def test_every_rule_has_a_source_and_an_id_of_its_own():
    ids = [rule.id for rule in rg.RULES]
    assert len(ids) == len(set(ids)) and all(i.startswith("E90") for i in ids)
    assert all(rule.source_url.startswith("https://docs.aws.amazon.com/") for rule in rg.RULES)


def test_the_grants_are_their_families_rules_in_id_order():
    """Each family's ids, so that a family left out of required_grants.FAMILIES (which cfn-lint
    would still load) fails here."""
    assert [rule.id for rule in rg.RULES] == [f"E90{n:02}" for n in range(1, 14)]
    assert [[rule.id for rule in family.RULES] for family in rg.FAMILIES] == [
        ["E9001", "E9002", "E9003", "E9004"],
        ["E9005", "E9013"],
        ["E9006", "E9007", "E9008", "E9009", "E9010"],
        ["E9011", "E9012"],
    ]
    assert {family.__name__ for family in rg.FAMILIES} == {
        path.stem for path in (ROOT / "tools" / "cfn_rules").glob("grants_*.py")
    }
