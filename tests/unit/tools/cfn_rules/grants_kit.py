"""Template dicts for the required grants' tests (tests/unit/tools/cfn_rules/test_grants*.py):
roles and key policies with the statements a test gives, and a statement's action taken out."""

from __future__ import annotations

import copy

ROLE_ARN = {"Fn::GetAtt": ["Role", "Arn"]}
KEY_REF = {"Fn::GetAtt": ["Key", "Arn"]}
ROOT = {"AWS": "arn:aws:iam::123456789012:root"}
INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"


def template(**resources) -> dict:
    return {
        "Resources": {
            lid: r if "Type" in r else {"Type": r["T"], "Properties": r["P"]}
            for lid, r in resources.items()
        }
    }


def res(kind: str, **props) -> dict:
    return {"T": kind, "P": props}


def allow(*actions, resource="*", **extra) -> dict:
    return {"Effect": "Allow", "Action": list(actions), "Resource": resource, **extra}


def role_with(*statements) -> dict:
    return {
        "Role": res("AWS::IAM::Role", AssumeRolePolicyDocument={}),
        "Policy": res(
            "AWS::IAM::Policy",
            Roles=[{"Ref": "Role"}],
            PolicyDocument={"Statement": list(statements)},
        ),
    }


def key_with(*statements) -> dict:
    return {"Key": res("AWS::KMS::Key", KeyPolicy={"Statement": list(statements)})}


def found(rule, tpl) -> list[str]:
    return [message for _, message in rule().findings(tpl)]


def without(tpl: dict, lid: str, action: str) -> dict:
    """``tpl`` with ``action`` taken out of every statement of ``lid``'s policy document or key
    policy."""
    broken = copy.deepcopy(tpl)
    props = broken["Resources"][lid]["Properties"]
    for s in (props.get("PolicyDocument") or props.get("KeyPolicy"))["Statement"]:
        s["Action"] = [a for a in s["Action"] if a != action]
    return broken
