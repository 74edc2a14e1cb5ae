"""The gate ``tests/conftest.py`` applies to every app a test session synthesizes: the rule book
(:mod:`aws_rules`, which gathers the ``aws_*`` modules), the required grants
(:mod:`required_grants`, the ``grants_*`` modules), the guides' rules (:mod:`guide_rules`), the API
model check (:mod:`api_models`) and the IAM check (:mod:`iam_actions`) over each template, as plain
functions (cfn-lint's own run would cost seconds per template; the rules read template dicts)."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import aws_rules
import guide_rules
import required_grants
from api_models import ApiModel
from iam_actions import IamStatements

#: Every rule the gate runs, in id order.
ALL_RULES = (
    *sorted(
        (*required_grants.RULES, *aws_rules.RULES, *guide_rules.RULES), key=lambda rule: rule.id
    ),
    ApiModel,
    IamStatements,
)


def template_findings(templates: dict[str, dict], rules=ALL_RULES) -> list[str]:
    """``"<rule id> <stack>: <path>: <message> (<source>)"`` for every finding of ``rules`` in
    ``templates`` (``{stack name: template dict}``); empty when every rule holds."""
    instances = [rule() for rule in rules]
    found = []
    for rule in instances:
        if getattr(rule, "app_level", False):  # reads across the stacks (exports and imports)
            found += [
                (rule, stack, path, message)
                for stack, path, message in rule.app_findings(templates)
            ]
        else:
            found += [
                (rule, stack, path, message)
                for stack, template in templates.items()
                for path, message in rule.findings(template)
            ]
    return [
        f"{rule.id} {stack}: {'/'.join(map(str, path))}: {message} ({rule.source_url})"
        for rule, stack, path, message in found
    ]
