"""The required grants of Amazon Connect (E9011, E9012): the key of its media streams for
their consumers, and the permission and order a Lambda function associated with an instance
needs (:mod:`required_grants` says what they are)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helpers
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _grants import (
    AppRule,
    account_root_manages,
    allows,
    key_of,
    key_statements,
    role_statements,
)


def _stream_keys(templates, stack, template):
    for lid, props in t.resources(template, "AWS::Connect::InstanceStorageConfig").items():
        config = props.get("KinesisVideoStreamConfig") or {}
        key = (config.get("EncryptionConfig") or {}).get("KeyId")
        if key is not None:
            yield lid, config.get("Prefix"), key


class KinesisVideoStreamKeyForConsumers(AppRule, CloudFormationLintRule):
    id = "E9011"
    shortdesc = (
        "Connect's media streams under a customer managed key: a role that reads the streams "
        "(kinesisvideo:GetMedia) must allow kms:Decrypt on that key, and a key the app makes "
        "must let the account's IAM principals use it"
    )
    description = (
        "Kinesis Video Streams developer guide, 'Data protection in Kinesis Video Streams' "
        "(server-side encryption: consumers need kms:Decrypt on the stream's key; producers "
        "kms:GenerateDataKey, which Connect holds through its service-linked role). Connect "
        "admin guide, 'Enable live media streaming': the streams use the key of the instance's "
        "storage config."
    )
    source_url = "https://docs.aws.amazon.com/kinesisvideostreams/latest/dg/how-kms.html"
    tags: ClassVar[list[str]] = ["kinesisvideo", "connect", "kms"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            for lid, prefix, key_value in _stream_keys(templates, stack, template):
                key = key_of(templates, stack, key_value)
                if key is not None and not account_root_manages(key_statements(templates, key)):
                    yield (
                        stack,
                        ("Resources", lid),
                        f"the policy of stream key {key[1]} does not delegate to IAM",
                    )
                for role in t.resources(template, "AWS::IAM::Role"):
                    statements = role_statements(template, role)
                    if not allows(statements, "kinesisvideo:GetMedia"):
                        continue  # a grant on "*" reads the streams too
                    if not allows(statements, "kms:Decrypt", key_value):
                        yield (
                            stack,
                            ("Resources", role),
                            (
                                f"{role} reads Connect's streams ({prefix}) but may not "
                                "kms:Decrypt with their key"
                            ),
                        )


def _sub_names(value) -> set[str]:
    """The logical ids an Fn::Sub template string names (``${Name}``, ``${Name.Attribute}``), at
    any depth."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, arg in value.items():
            text = arg[0] if key == "Fn::Sub" and isinstance(arg, list) and arg else arg
            if key == "Fn::Sub" and isinstance(text, str):
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text)}
            found |= _sub_names(arg)
    elif isinstance(value, list):
        for item in value:
            found |= _sub_names(item)
    return found


class ConnectFunctionAssociation(AppRule, CloudFormationLintRule):
    id = "E9012"
    shortdesc = (
        "A Lambda function associated with a Connect instance: its resource policy must let "
        "connect.amazonaws.com invoke it for that instance (SourceArn, SourceAccount the "
        "instance's account), and a flow of the template that invokes it must be created after "
        "the association"
    )
    description = (
        "Connect admin guide, 'Grant Amazon Connect access to your AWS Lambda functions': "
        "'Before you can use an AWS Lambda function in a flow, you must add it to your Amazon "
        "Connect instance'; the association adds a resource policy for connect.amazonaws.com "
        "limited to the instance. The instance ARN's account is the request's source account "
        "(Lambda developer guide, resource-based policies)."
    )
    source_url = (
        "https://docs.aws.amazon.com/connect/latest/adminguide/connect-lambda-functions.html"
    )
    tags: ClassVar[list[str]] = ["connect", "lambda"]

    def app_findings(self, templates):
        for stack, template in templates.items():
            resources = template.get("Resources") or {}
            permissions = t.resources(template, "AWS::Lambda::Permission")
            for lid, props in t.resources(template, "AWS::Connect::IntegrationAssociation").items():
                if props.get("IntegrationType") != "LAMBDA_FUNCTION":
                    continue
                function = t.ref_target(template, props.get("IntegrationArn"))
                if function is None:
                    continue
                instance = props.get("InstanceId")
                account = (
                    instance.split(":")[4]
                    if isinstance(instance, str) and instance.count(":") >= 5
                    else None
                )
                granted = [
                    p
                    for p in permissions.values()
                    if function in t.references(p.get("FunctionName"))
                    and p.get("Principal") == "connect.amazonaws.com"
                    and p.get("SourceArn") == instance
                ]
                where = ("Resources", lid)
                if not granted:
                    yield (
                        stack,
                        where,
                        (
                            f"no permission lets connect.amazonaws.com invoke {function} for "
                            f"{instance}"
                        ),
                    )
                elif account and not any(p.get("SourceAccount") == account for p in granted):
                    yield (
                        stack,
                        where,
                        (
                            f"{function}'s permission for {instance} names another SourceAccount "
                            f"than the instance's {account}"
                        ),
                    )
                for flow_id, flow in t.resources(template, "AWS::Connect::ContactFlow").items():
                    named = t.references(flow.get("Content")) | _sub_names(flow.get("Content"))
                    waits_for = t.as_list(resources[flow_id].get("DependsOn"))
                    if function in named and lid not in waits_for:
                        yield (
                            stack,
                            ("Resources", flow_id, "DependsOn"),
                            (
                                f"{flow_id} invokes {function} but is not created after its "
                                f"association {lid}"
                            ),
                        )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
