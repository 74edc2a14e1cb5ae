"""What the required grants share (:mod:`required_grants`): the statements a role or a key
policy holds, across the app's stacks, whether they allow an action, and the base of the rules
that read the whole app. The leading underscore keeps cfn-lint from loading this file as rules.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections.abc import Iterator
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

#: What the AWS managed policies the app attaches allow (AWS Managed Policy Reference guide, each
#: policy's page).
AWS_MANAGED_POLICIES: dict[str, tuple[str, ...]] = {
    "service-role/AWSLambdaBasicExecutionRole": (
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ),
    "service-role/AWSLambdaVPCAccessExecutionRole": (
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSubnets",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ),
    "service-role/AmazonECSTaskExecutionRolePolicy": (
        "ecr:GetAuthorizationToken",
        "ecr:BatchCheckLayerAvailability",
        "ecr:GetDownloadUrlForLayer",
        "ecr:BatchGetImage",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    ),
}

ECR_PULL_ACTIONS = ("ecr:GetAuthorizationToken", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
LOG_WRITE_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")


def _matches(pattern: str, action: str) -> bool:
    return fnmatch.fnmatchcase(action.lower(), str(pattern).lower())


def allows(statements: list[dict], action: str, resource=None) -> bool:
    """Some Allow statement of ``statements`` grants ``action`` (its Action patterns), on ``*`` or
    ``resource`` (a template value, compared as written, or by the logical ids it names) when
    given."""
    for s in statements:
        if s.get("Effect") != "Allow" or not any(
            _matches(a, action) for a in t.as_list(s.get("Action"))
        ):
            continue
        if resource is None or covers(s.get("Resource"), resource):
            return True
    return False


def covers(resources, wanted) -> bool:
    """Some resource of ``resources`` (a statement's Resource) is ``*``, is ``wanted`` as written,
    names every logical id ``wanted`` names, or is an ARN pattern ``wanted`` matches."""
    text = json.dumps(wanted, sort_keys=True)
    names = t.references(wanted)
    for r in t.as_list(resources):
        if (
            r == "*"
            or json.dumps(r, sort_keys=True) == text
            or (names and names <= t.references(r))
        ):
            return True
        if isinstance(r, str) and isinstance(wanted, str) and fnmatch.fnmatchcase(wanted, r):
            return True
    return False


def role_statements(template: dict, role: str) -> list[dict]:
    """Every statement of role ``role`` (a logical id of ``template``): its inline policies, the
    AWS::IAM::Policy and ManagedPolicy resources attached to it, and the AWS managed policies of
    :data:`AWS_MANAGED_POLICIES`."""
    props = t.resources(template, "AWS::IAM::Role").get(role)
    if props is None:
        return []
    found = [
        s
        for p in t.as_list(props.get("Policies"))
        for s in t.as_list((p.get("PolicyDocument") or {}).get("Statement"))
    ]
    for kind, key in (("AWS::IAM::Policy", "Roles"), ("AWS::IAM::ManagedPolicy", "Roles")):
        for policy in t.resources(template, kind).values():
            if role in t.references(policy.get(key)):
                found += t.as_list((policy.get("PolicyDocument") or {}).get("Statement"))
    for arn in t.as_list(props.get("ManagedPolicyArns")):
        text = t.joined_text(arn) or ""
        for name, actions in AWS_MANAGED_POLICIES.items():
            if text.endswith(f":policy/{name}"):
                found.append({"Effect": "Allow", "Action": list(actions), "Resource": "*"})
    return found


def key_statements(templates: dict[str, dict], key: tuple[str, str]) -> list[dict]:
    props = t.resources(templates[key[0]], "AWS::KMS::Key").get(key[1]) or {}
    return t.as_list((props.get("KeyPolicy") or {}).get("Statement"))


def service_statements(statements: list[dict], service: str) -> list[dict]:
    return [
        s
        for s in statements
        if service in t.as_list((s.get("Principal") or {}).get("Service"))
        or any(
            service == (t.joined_text(p) or "")
            for p in t.as_list((s.get("Principal") or {}).get("Service"))
        )
    ]


def account_root_manages(statements: list[dict]) -> bool:
    """The key policy gives the account (its root principal) kms:*: IAM policies may then grant the
    key (KMS developer guide, "Default key policy": "Allows access to the AWS account and enables
    IAM policies")."""
    for s in statements:
        aws = [t.joined_text(p) or "" for p in t.as_list((s.get("Principal") or {}).get("AWS"))]
        if (
            s.get("Effect") == "Allow"
            and any(a.endswith(":root") for a in aws)
            and {"kms:*", "*"} & set(t.as_list(s.get("Action")))
        ):
            return True
    return False


def key_of(templates: dict[str, dict], stack: str, value) -> tuple[str, str] | None:
    """``(stack, logical id)`` of the KMS key ``value`` names in the app's ``templates`` (a Ref or
    Fn::GetAtt in ``stack``, or an import of another stack's export); None for a key given by ARN
    or anything else."""
    found = t.resolve(templates, stack, value)
    if found and found[1] in t.resources(templates[found[0]], "AWS::KMS::Key"):
        return found
    return None


def role_of(templates: dict[str, dict], stack: str, value) -> tuple[str, str] | None:
    """``(stack, logical id)`` of the IAM role ``value`` names in the app's ``templates``, as
    :func:`key_of` finds a key."""
    found = t.resolve(templates, stack, value)
    if found and found[1] in t.resources(templates[found[0]], "AWS::IAM::Role"):
        return found
    return None


class AppRule(TemplateRule):
    """A rule over the app's templates (``{stack: template}``); one template alone is an app of one
    stack."""

    app_level = True

    def findings(self, template):
        for _stack, path, message in self.app_findings({"Template": template}):
            yield path, message

    def app_findings(
        self, templates: dict[str, dict]
    ) -> Iterator[tuple[str, tuple, str]]:  # pragma: no cover
        raise NotImplementedError
