"""The rule book's rules for data at rest: KMS keys and the log groups they encrypt (E96xx),
S3 buckets and ECR repositories (E97xx: bucket policies, emptied before deletion) and Secrets
Manager secrets (E98xx) (:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

KMS_API = "https://docs.aws.amazon.com/kms/latest/APIReference"


# ---------------------------------------------------------------------------------------------- KMS
class KeyPolicyKeepsTheKeyManageable(TemplateRule, CloudFormationLintRule):
    id = "E9601"
    shortdesc = (
        "CreateKey: the key policy must allow the account (its root principal) to manage the "
        "key, PutKeyPolicy included, and every statement must have a principal, an action and a "
        "resource; PendingWindowInDays is 7-30; automatic rotation only for symmetric encryption "
        "keys"
    )
    description = (
        "CreateKey Policy: 'The key policy must allow the calling principal to make a subsequent "
        "PutKeyPolicy request on the KMS key' (lockout safety check; the default key policy "
        "gives the account root kms:*); 'Each statement in the key policy must contain one or "
        "more principals'; statements missing Resource or Action have no effect. "
        "ScheduleKeyDeletion: 'it must be between 7 and 30, inclusive.' EnableKeyRotation: "
        "symmetric encryption KMS keys only."
    )
    source_url = f"{KMS_API}/API_CreateKey.html"
    tags: ClassVar[list[str]] = ["kms"]

    @staticmethod
    def _is_root(principal) -> bool:
        aws = t.as_list((principal or {}).get("AWS")) if isinstance(principal, dict) else []
        return any(
            re.search(r"(:root$|^\d{12}$|^\{\}$)", t.joined_text(p) or "")
            and (":root" in (t.joined_text(p) or "") or re.fullmatch(r"\d{12}", str(p)))
            for p in aws
        )

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::KMS::Key").items():
            where = ("Resources", lid, "Properties")
            window = t.literal_int(props.get("PendingWindowInDays"))
            if window is not None and not 7 <= window <= 30:
                yield (
                    (*where, "PendingWindowInDays"),
                    f"PendingWindowInDays {window} is outside 7-30",
                )
            spec = props.get("KeySpec", "SYMMETRIC_DEFAULT")
            if t.literal_bool(props.get("EnableKeyRotation")) and spec != "SYMMETRIC_DEFAULT":
                yield (
                    (*where, "EnableKeyRotation"),
                    f"rotation is for symmetric keys, not {props.get('KeySpec')}",
                )
            policy = props.get("KeyPolicy")
            if not isinstance(policy, dict):
                continue
            statements = t.as_list(policy.get("Statement"))
            for i, s in enumerate(statements):
                for element in ("Principal", "Action", "Resource"):
                    if element not in s and f"Not{element}" not in s:
                        yield (*where, "KeyPolicy", "Statement", i), f"statement without {element}"
            manageable = any(
                s.get("Effect") == "Allow"
                and self._is_root(s.get("Principal"))
                and {"kms:*", "kms:PutKeyPolicy", "*"} & set(t.as_list(s.get("Action")))
                for s in statements
            )
            if (
                not manageable
                and t.literal_bool(props.get("BypassPolicyLockoutSafetyCheck")) is not True
            ):
                yield (
                    (*where, "KeyPolicy"),
                    (
                        "no statement lets the account root manage the key (kms:* or "
                        "kms:PutKeyPolicy)"
                    ),
                )


LOGS_KEY_ACTIONS = (
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
)


class LogGroupKeyLetsCloudWatchLogsIn(TemplateRule, CloudFormationLintRule):
    id = "E9602"
    shortdesc = (
        "A log group encrypted with a KMS key: the key policy must allow the CloudWatch Logs "
        "service principal (logs.<region>.amazonaws.com) kms:Encrypt*, kms:Decrypt*, "
        "kms:ReEncrypt*, kms:GenerateDataKey* and kms:Describe*, with any "
        "kms:EncryptionContext:aws:logs:arn condition covering the group's ARN; else creating "
        "the group fails"
    )
    description = (
        "CloudWatch Logs user guide, 'Encrypt log data in CloudWatch Logs using AWS KMS': the "
        "key policy statement for logs.<region>.amazonaws.com, optionally limited with "
        "kms:EncryptionContext:aws:logs:arn; CreateLogGroup or AssociateKmsKey fails when the "
        "key does not allow it. Checked across the app's stacks (the key may be another stack's "
        "export); a group without LogGroupName has CloudFormation's name <stack>-<logical "
        "id>-<suffix>."
    )
    source_url = (
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html"
    )
    tags: ClassVar[list[str]] = ["logs", "kms"]
    app_level = True

    def findings(self, template):
        """One template alone (cfn-lint's run): its stack name, part of a generated group name, is
        unknown."""
        for _stack, path, message in self.app_findings({"Template": template}, stack_names=False):
            yield path, message

    def app_findings(self, templates: dict[str, dict], stack_names: bool = True):
        """Findings over the app's ``templates`` (``{stack name: template}``)."""
        import fnmatch

        keys = {
            (stack, lid): props
            for stack, tpl in templates.items()
            for lid, props in t.resources(tpl, "AWS::KMS::Key").items()
        }
        for stack, tpl in templates.items():
            for lid, props in t.resources(tpl, "AWS::Logs::LogGroup").items():
                key = t.resolve(templates, stack, props.get("KmsKeyId"))
                if key is None or key not in keys:
                    continue
                name = props.get("LogGroupName")
                name = (
                    name if isinstance(name, str) else f"{stack}-{lid}-*" if stack_names else None
                )
                statements = [
                    s
                    for s in t.as_list((keys[key].get("KeyPolicy") or {}).get("Statement"))
                    if s.get("Effect") == "Allow"
                    and "logs." in repr((s.get("Principal") or {}).get("Service"))
                ]
                granted = [
                    s
                    for s in statements
                    if all(
                        any(
                            fnmatch.fnmatchcase(want, a) or a in ("kms:*", want)
                            for a in t.as_list(s.get("Action"))
                        )
                        for want in LOGS_KEY_ACTIONS
                    )
                ]
                where = ("Resources", lid, "Properties", "KmsKeyId")
                if not granted:
                    yield (
                        stack,
                        where,
                        (
                            f"the policy of key {key[1]} ({key[0]}) does not let CloudWatch Logs "
                            "use it"
                        ),
                    )
                    continue
                if name is not None and not any(self._covers(s, name) for s in granted):
                    yield (
                        stack,
                        where,
                        (
                            f"key {key[1]}'s CloudWatch Logs statement limits "
                            f"kms:EncryptionContext:aws:logs:arn to log groups that {name!r} is not"
                        ),
                    )

    @staticmethod
    def _covers(statement: dict, name: str) -> bool:
        import fnmatch

        patterns = []
        for _operator, block in (statement.get("Condition") or {}).items():
            for key, value in (block or {}).items():
                if key.lower() == "kms:encryptioncontext:aws:logs:arn":
                    patterns += [t.joined_text(v) or "" for v in t.as_list(value)]
        if not patterns:
            return True
        groups = [p.split(":log-group:", 1)[1] for p in patterns if ":log-group:" in p]
        return any(
            fnmatch.fnmatchcase(name.replace("*", "x"), g.replace("{}", "*")) for g in groups
        )


# ----------------------------------------------------------------------------------------------- S3
class BucketPolicyResources(TemplateRule, CloudFormationLintRule):
    id = "E9701"
    shortdesc = (
        "PutBucketPolicy: every statement has a principal, and every resource is the bucket the "
        "policy is attached to or its objects (else 'Policy has invalid resource')"
    )
    description = (
        "Amazon S3 user guide, bucket policies: a bucket policy's resources are the bucket and its "
        "objects; PutBucketPolicy refuses others (MalformedPolicy 'Policy has invalid resource')."
    )
    source_url = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html"
    tags: ClassVar[list[str]] = ["s3"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::S3::BucketPolicy").items():
            bucket = t.ref_target(template, props.get("Bucket"))
            name = props.get("Bucket") if isinstance(props.get("Bucket"), str) else None
            for i, s in enumerate(t.as_list((props.get("PolicyDocument") or {}).get("Statement"))):
                where = ("Resources", lid, "Properties", "PolicyDocument", "Statement", i)
                if "Principal" not in s and "NotPrincipal" not in s:
                    yield where, "a bucket policy statement needs a Principal"
                for resource in t.as_list(s.get("Resource")):
                    names = t.references(resource)
                    text = t.joined_text(resource)
                    if bucket and names and bucket not in names:
                        yield (
                            (*where, "Resource"),
                            f"{resource} is not bucket {bucket} or its objects",
                        )
                    elif (
                        name
                        and isinstance(text, str)
                        and not names
                        and not re.fullmatch(rf"arn:aws[a-z-]*:s3:::{re.escape(name)}(/.*)?", text)
                    ):
                        yield (*where, "Resource"), f"{text} is not bucket {name} or its objects"


class DeletedStoresAreEmptiedFirst(TemplateRule, CloudFormationLintRule):
    id = "E9702"
    shortdesc = (
        "DeleteBucket: all objects (versions and delete markers included) must be deleted before "
        "the bucket; DeleteRepository: a repository that holds images is deleted only with force "
        "(EmptyOnDelete): a bucket or repository CloudFormation deletes is emptied first, or the "
        "stack deletion fails"
    )
    description = (
        "Amazon S3 API reference, DeleteBucket: 'All objects (including all object versions and "
        "delete markers) in the bucket must be deleted before the bucket itself can be deleted.' "
        "Amazon ECR, DeleteRepository: 'If the repository isn't empty, you must either delete "
        "the contents of the repository or use the force option' (CloudFormation's "
        "EmptyOnDelete). A bucket is emptied by a custom resource naming it (CDK's "
        "Custom::S3AutoDeleteObjects). Retained ones are not checked."
    )
    source_url = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucket.html"
    tags: ClassVar[list[str]] = ["s3", "ecr", "destroy"]

    def findings(self, template):
        resources = template.get("Resources") or {}
        for lid, resource in resources.items():
            if (
                not isinstance(resource, dict)
                or resource.get("DeletionPolicy", "Delete") != "Delete"
            ):
                continue
            if resource.get("Type") == "AWS::S3::Bucket":
                emptied = any(
                    str(r.get("Type")).startswith("Custom::")
                    and lid in t.references(r.get("Properties"))
                    and "AutoDelete" in str(r.get("Type"))
                    for r in resources.values()
                )
                if not emptied:
                    yield (
                        ("Resources", lid, "DeletionPolicy"),
                        f"{lid} is deleted with the stack but nothing empties it",
                    )
            if (
                resource.get("Type") == "AWS::ECR::Repository"
                and t.literal_bool((resource.get("Properties") or {}).get("EmptyOnDelete"))
                is not True
            ):
                yield (
                    ("Resources", lid, "Properties", "EmptyOnDelete"),
                    f"{lid} is deleted with the stack but EmptyOnDelete is not true",
                )


# ---------------------------------------------------------------------------------- Secrets Manager
class SecretValueSource(TemplateRule, CloudFormationLintRule):
    id = "E9801"
    shortdesc = (
        "AWS::SecretsManager::Secret: SecretString or GenerateSecretString, not both; a generated "
        "password is 1-4096 characters long"
    )
    description = (
        "CloudFormation AWS::SecretsManager::Secret ('Either SecretString or "
        "GenerateSecretString must have a value, but not both'); GetRandomPassword "
        "PasswordLength 1-4096."
    )
    source_url = (
        "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
        "aws-resource-secretsmanager-secret.html"
    )
    tags: ClassVar[list[str]] = ["secretsmanager"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::SecretsManager::Secret").items():
            where = ("Resources", lid, "Properties")
            if "SecretString" in props and "GenerateSecretString" in props:
                yield where, "SecretString and GenerateSecretString exclude each other"
            length = t.literal_int((props.get("GenerateSecretString") or {}).get("PasswordLength"))
            if length is not None and not 1 <= length <= 4096:
                yield (
                    (*where, "GenerateSecretString", "PasswordLength"),
                    f"PasswordLength {length} is outside 1-4096",
                )


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
