"""The forms of the AWS names, ARNs and image URIs the constructs accept, each with its source, and
the checks built on them. (S3 URIs: :class:`contracts.model.S3Prefix`, the one parser of the
project; the model hub's repository ids and revisions: :mod:`contracts.model`.)

A check records at most one problem per value through :class:`~constructs_lib.validation.Problems`.
Values that are CDK tokens (resolved at deploy time) are not checked: their producer guarantees the
form.

CDK-free (no ``aws_cdk`` import): the settings layer, which ``voicectl`` imports, uses this module.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from constructs_lib.validation import Problems
from contracts.model import MAX_REPOSITORY_ID_CHARS, PINNED_REVISION_RE, REPOSITORY_ID_RE

#: An AWS Region code such as ``us-east-1`` or ``us-gov-west-1``.
REGION_RE = re.compile(r"[a-z]{2}(-gov)?-[a-z]+-\d")
#: SageMaker EndpointName: 1-63 letters, digits or '-', starting and ending with a letter or digit
#: (CreateEndpoint API reference: pattern ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``, length at most 63).
ENDPOINT_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
ENDPOINT_NAME_MAX_LENGTH = 63
ENDPOINT_NAME_RULE = (
    "must be 1-63 letters, digits or '-', starting and ending with a letter or digit (SageMaker "
    "EndpointName)"
)
#: A private ECR image, by tag or digest (Amazon ECR user guide, "Pulling an image").
ECR_IMAGE_RE = re.compile(
    r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})|@sha256:[0-9a-f]{64})"
)
#: A SageMaker model package ARN (AWS Marketplace listings give one per Region).
MODEL_PACKAGE_ARN_RE = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):model-package/.+"
)
#: A KMS key ARN, single- or multi-Region (KMS developer guide, "Key identifiers": key ARN).
KMS_KEY_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):\d{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})"
)
#: A KMS key or alias ARN: what an EndpointConfig's KmsKeyId accepts as an ARN (CreateEndpointConfig
#: API reference).
KMS_KEY_OR_ALIAS_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):\d{12}:(key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})|alias/[A-Za-z0-9/_-]+)"
)
#: A complete Secrets Manager secret ARN: the service appends "-" and 6 random characters to the
#: name, and an IAM grant on exactly one secret needs them (Secrets Manager user guide, "ARN of a
#: secret").
SECRET_ARN_RE = re.compile(
    r"arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}"
)

#: EC2 resource ids: a prefix and 8 (older) or 17 hexadecimal characters (Amazon EC2 API reference,
#: resource ids).
VPC_ID_RE = re.compile(r"vpc-([0-9a-f]{8}|[0-9a-f]{17})")
SUBNET_ID_RE = re.compile(r"subnet-([0-9a-f]{8}|[0-9a-f]{17})")
SECURITY_GROUP_ID_RE = re.compile(r"sg-([0-9a-f]{8}|[0-9a-f]{17})")
ROUTE_TABLE_ID_RE = re.compile(r"rtb-([0-9a-f]{8}|[0-9a-f]{17})")
VPC_ENDPOINT_ID_RE = re.compile(r"vpce-([0-9a-f]{8}|[0-9a-f]{17})")

#: An e-mail address for an SNS e-mail subscription (one address; SNS asks it to confirm).
EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")

#: How the CDK writes an unresolved string token inside a string (aws-cdk-lib core, ``encoding.ts``:
#: BEGIN_STRING_TOKEN_MARKER and BEGIN_LIST_TOKEN_MARKER).
_TOKEN_MARKERS = ("${Token[", "#{Token[")


def is_token(value: object) -> bool:
    """Whether ``value`` is a string holding a CDK token (a value CloudFormation resolves at deploy
    time)."""
    return isinstance(value, str) and any(marker in value for marker in _TOKEN_MARKERS)


def check_regional_arn(
    p: Problems,
    prop: str,
    value: str,
    pattern: re.Pattern,
    form: str,
    region: str | None,
    noun: str,
    hint: str = "",
) -> re.Match | None:
    """Check that ``value`` has the form of ``pattern`` (which captures ``region``) and is in
    ``region``.

    Records "must be <form>", or "the <noun> is in X but the stack deploys to Y<hint>". ``region``
    None (or a token) skips the Region comparison. Returns the match when both hold (None for a
    token, which is not checked).
    """
    if is_token(value):
        return None
    match = pattern.fullmatch(value)
    if not match:
        p.add(prop, value, f"must be {form}")
        return None
    if region is not None and not is_token(region) and match["region"] != region:
        p.add(
            prop,
            value,
            f"the {noun} is in {match['region']} but the stack deploys to {region}{hint}",
        )
        return None
    return match


def check_ids(
    p: Problems, prop: str, values: Sequence[str], pattern: re.Pattern, example: str
) -> None:
    """A list of EC2 resource ids of one kind (:data:`SUBNET_ID_RE`, ...); ``example`` shows the
    form ("subnet ids such as 'subnet-0123456789abcdef0'"). One problem naming every bad id."""
    bad = [value for value in values if not is_token(value) and not pattern.fullmatch(value)]
    if bad:
        p.add(prop, list(values), f"must be {example}; not: {', '.join(map(repr, bad))}")


def check_endpoint_name(p: Problems, prop: str, value: str) -> None:
    """A SageMaker EndpointName (:data:`ENDPOINT_NAME_RE`)."""
    if not is_token(value) and not (
        ENDPOINT_NAME_RE.fullmatch(value) and len(value) <= ENDPOINT_NAME_MAX_LENGTH
    ):
        p.add(prop, value, ENDPOINT_NAME_RULE)


def check_kms_key_arn(
    p: Problems, prop: str, value: str, region: str | None, *, alias: bool
) -> None:
    """A KMS key ARN in ``region``; ``alias`` also allows an alias ARN (fine where the service
    resolves it, such as an EndpointConfig's KmsKeyId; not in IAM statements, which must name the
    key)."""
    if alias:
        check_regional_arn(
            p,
            prop,
            value,
            KMS_KEY_OR_ALIAS_ARN_RE,
            "a KMS key or alias ARN (arn:aws:kms:<region>:<account>:key/<key id> or :alias/<name>)",
            region,
            "key",
        )
    else:
        check_regional_arn(
            p,
            prop,
            value,
            KMS_KEY_ARN_RE,
            "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants "
            "need the key)",
            region,
            "key",
        )


def check_secret_arn(p: Problems, prop: str, value: str, region: str | None) -> None:
    """A complete Secrets Manager secret ARN (:data:`SECRET_ARN_RE`) in ``region``."""
    check_regional_arn(
        p,
        prop,
        value,
        SECRET_ARN_RE,
        "a Secrets Manager secret ARN with its 6-character suffix "
        "(arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf)",
        region,
        "secret",
    )


def check_model_package_arn(p: Problems, prop: str, value: str, region: str | None) -> None:
    """A SageMaker model package ARN (:data:`MODEL_PACKAGE_ARN_RE`) in ``region``: a Model runs a
    package of its own Region only."""
    check_regional_arn(
        p,
        prop,
        value,
        MODEL_PACKAGE_ARN_RE,
        "'arn:aws:sagemaker:<region>:<account>:model-package/<name>'",
        region,
        "package",
        f"; use the package ARN for {region}",
    )


def check_ecr_image_uri(p: Problems, prop: str, value: str, region: str | None) -> None:
    """A private ECR image URI (:data:`ECR_IMAGE_RE`) in ``region``: SageMaker pulls images from the
    endpoint's Region."""
    check_regional_arn(
        p,
        prop,
        value,
        ECR_IMAGE_RE,
        "a private ECR image '<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or "
        "'...@sha256:<digest>'",
        region,
        "image",
        "; SageMaker pulls images from the endpoint's region",
    )


def check_email(p: Problems, prop: str, value: str) -> None:
    """One e-mail address (:data:`EMAIL_RE`)."""
    if not is_token(value) and not EMAIL_RE.fullmatch(value):
        p.add(prop, value, "must be one e-mail address such as 'oncall@example.com', or null")


def check_repository_id(p: Problems, prop: str, value: str) -> None:
    """A model hub repository id, ``<owner>/<name>``, of at most 96 characters."""
    if not REPOSITORY_ID_RE.fullmatch(value):
        p.add(prop, value, "must be a model hub repository id '<owner>/<name>'")
    elif len(value) > MAX_REPOSITORY_ID_CHARS:
        p.add(
            prop,
            value,
            f"must be at most {MAX_REPOSITORY_ID_CHARS} characters (the model hub's limit on a "
            f"repository id), not {len(value)}",
        )


def check_revision(p: Problems, prop: str, value: str) -> None:
    """A pinned model hub revision: a full commit hash."""
    if not PINNED_REVISION_RE.fullmatch(value):
        p.add(
            prop,
            value,
            "must be a full 40-character commit hash of the model hub repository (a branch or "
            "tag such as 'main' can move)",
        )


def check_hub_token_key(
    p: Problems,
    key_prop: str,
    key_arn: str,
    secret_prop: str,
    secret_given: bool,
    region: str | None,
) -> None:
    """The customer managed KMS key of the hub-token secret: a key ARN (IAM grants name the key, not
    an alias), given only together with the secret."""
    if not secret_given:
        p.add(
            key_prop,
            key_arn,
            f"set only together with {p.name(secret_prop)} (the key encrypts that secret)",
        )
    else:
        check_kms_key_arn(p, key_prop, key_arn, region, alias=False)


def repository_arn_from_image_uri(image_uri: str) -> str:
    """ARN of the private ECR repository of ``image_uri``.

    ``123456789012.dkr.ecr.us-east-1.amazonaws.com/team/bridge:v1`` ->
    ``arn:aws:ecr:us-east-1:123456789012:repository/team/bridge``.

    Raises:
        ValueError: ``image_uri`` is not a private ECR image URI.
    """
    match = ECR_IMAGE_RE.fullmatch(image_uri)
    if not match:
        raise ValueError(f"not a private ECR image URI: {image_uri!r}")
    partition = "aws-cn" if ".amazonaws.com.cn/" in image_uri else "aws"
    return (
        f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"
    )
