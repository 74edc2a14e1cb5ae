"""constructs_lib/facts/names.py: the forms of AWS names, ARNs and image URIs, and the checks that
name a bad value, its prop and the form allowed."""

from __future__ import annotations

import pytest

from constructs_lib.facts import names
from constructs_lib.validation import Problems

KEY = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-AbCdEf"
TOKEN = "${Token[TOKEN.123]}"


def problems(check, *args, **kwargs) -> list[str]:
    p = Problems()
    check(p, *args, **kwargs)
    return list(p)


@pytest.mark.parametrize(
    "name, valid",
    [
        ("voxtral-realtime", True),
        ("a", True),
        ("A1-b--2", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("-start", False),
        ("end-", False),
        ("under_score", False),
        ("", False),
    ],
)
def test_endpoint_names_follow_create_endpoints_pattern_and_length(name, valid):
    assert problems(names.check_endpoint_name, "endpoint_name", name) == (
        [] if valid else [f"endpoint_name={name!r}: {names.ENDPOINT_NAME_RULE}"]
    )


def test_a_token_is_not_checked_because_cloudformation_resolves_it():
    assert (
        names.is_token(TOKEN)
        and names.is_token("prefix-#{Token[LIST.1]}")
        and not names.is_token("Token[1]")
    )
    assert not names.is_token(None)
    assert problems(names.check_endpoint_name, "endpoint_name", TOKEN) == []
    assert problems(names.check_ecr_image_uri, "image_uri", TOKEN, "us-east-1") == []


def test_a_regional_arn_must_have_its_form_and_the_stacks_region():
    assert problems(names.check_kms_key_arn, "key", KEY, "us-east-1", alias=False) == []
    assert problems(names.check_kms_key_arn, "key", KEY, "eu-west-1", alias=False) == [
        f"key={KEY!r}: the key is in us-east-1 but the stack deploys to eu-west-1"
    ]
    alias = "arn:aws:kms:us-east-1:123456789012:alias/team"
    assert problems(names.check_kms_key_arn, "key", alias, "us-east-1", alias=True) == []
    (problem,) = problems(names.check_kms_key_arn, "key", alias, "us-east-1", alias=False)
    assert problem.startswith(f"key={alias!r}: must be a KMS key ARN") and "not an alias" in problem
    # No Region to compare with (a token, or None): the form alone is checked.
    assert problems(names.check_kms_key_arn, "key", KEY, TOKEN, alias=False) == []
    assert problems(names.check_kms_key_arn, "key", KEY, None, alias=False) == []


def test_a_secret_arn_needs_the_six_character_suffix_an_exact_grant_names():
    assert problems(names.check_secret_arn, "secret", SECRET, "us-east-1") == []
    (problem,) = problems(
        names.check_secret_arn, "secret", SECRET.removesuffix("-AbCdEf"), "us-east-1"
    )
    assert "must be a Secrets Manager secret ARN with its 6-character suffix" in problem


def test_a_model_package_and_an_image_are_named_in_the_endpoints_region_with_what_to_do():
    package = "arn:aws:sagemaker:eu-west-1:123456789012:model-package/sonic36-abc"
    assert problems(names.check_model_package_arn, "package", package, "us-east-1") == [
        f"package={package!r}: the package is in eu-west-1 but the stack deploys to us-east-1; "
        "use the package ARN for us-east-1"
    ]
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/bridge:v1"
    assert problems(names.check_ecr_image_uri, "image", image, "us-east-1") == [
        f"image={image!r}: the image is in eu-west-1 but the stack deploys to us-east-1; "
        "SageMaker pulls images from the endpoint's region"
    ]
    assert problems(
        names.check_ecr_image_uri, "image", "public.ecr.aws/team/bridge:v1", "us-east-1"
    )[0].endswith(
        "must be a private ECR image "
        "'<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or '...@sha256:<digest>'"
    )
    digest = "123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge@sha256:" + "a" * 64
    assert problems(names.check_ecr_image_uri, "image", digest, "us-east-1") == []


def test_one_problem_names_every_bad_id_of_a_list():
    assert problems(
        names.check_ids,
        "subnets",
        ["subnet-0123456789abcdef0", "subnet-1", "subnet-abcdef01", TOKEN],
        names.SUBNET_ID_RE,
        "subnet ids such as 'subnet-0123456789abcdef0'",
    ) == [
        f'subnets=["subnet-0123456789abcdef0", "subnet-1", "subnet-abcdef01", "{TOKEN}"]: '
        "must be subnet ids "
        "such as 'subnet-0123456789abcdef0'; not: 'subnet-1'"
    ]


def test_email_repository_id_and_revision():
    assert problems(names.check_email, "alarm_email", "oncall@example.com") == []
    assert problems(names.check_email, "alarm_email", "oncall") == [
        "alarm_email='oncall': must be one e-mail address such as 'oncall@example.com', or null"
    ]
    assert (
        problems(names.check_repository_id, "model_id", "mistralai/Voxtral-Mini-4B-Realtime-2602")
        == []
    )
    assert problems(names.check_repository_id, "model_id", "voxtral") == [
        "model_id='voxtral': must be a model hub repository id '<owner>/<name>'"
    ]
    longest = "mistralai/" + "v" * 86
    assert problems(names.check_repository_id, "model_id", longest) == []
    assert problems(names.check_repository_id, "model_id", longest + "x") == [
        f"model_id='{longest}x': must be at most 96 characters (the model hub's limit on a "
        "repository id), not 97"
    ]
    assert (
        problems(names.check_revision, "revision", "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf") == []
    )
    assert problems(names.check_revision, "revision", "main")[0].startswith(
        "revision='main': must be a full 40-character commit hash"
    )


def test_the_hub_token_key_goes_only_with_the_secret():
    p = Problems(name=lambda prop: f"voxtral.{prop}")
    names.check_hub_token_key(
        p, "hf_token_secret_kms_key_arn", KEY, "hf_token_secret_arn", False, "us-east-1"
    )
    assert list(p) == [
        f"voxtral.hf_token_secret_kms_key_arn={KEY!r}: set only together with "
        "voxtral.hf_token_secret_arn (the key encrypts that secret)"
    ]
    assert problems(names.check_hub_token_key, "key", KEY, "secret", True, "us-east-1") == []


def test_the_repository_arn_of_an_image_uri():
    assert (
        names.repository_arn_from_image_uri(
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/bridge:v1"
        )
        == "arn:aws:ecr:us-east-1:123456789012:repository/team/bridge"
    )
    assert (
        names.repository_arn_from_image_uri(
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/bridge:v1"
        )
        == "arn:aws-cn:ecr:cn-north-1:123456789012:repository/bridge"
    )
    with pytest.raises(ValueError, match="not a private ECR image URI: 'bridge:v1'"):
        names.repository_arn_from_image_uri("bridge:v1")
