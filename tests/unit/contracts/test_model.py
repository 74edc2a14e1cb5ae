"""contracts/model.py: the model's identity and revision rules, and S3Prefix (exported as
constructs_lib.facts.S3Prefix): parsing and refusals."""

from __future__ import annotations

import re

import pytest

from contracts.model import DEFAULT_REPO_ID, PINNED_REVISION_RE, REPOSITORY_ID_RE, S3Prefix


def test_ids_and_revisions():
    assert REPOSITORY_ID_RE.fullmatch(DEFAULT_REPO_ID)
    assert not REPOSITORY_ID_RE.fullmatch("Voxtral-Mini")
    assert PINNED_REVISION_RE.fullmatch("b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf")
    assert not PINNED_REVISION_RE.fullmatch("B45B4DC60CAF4AD824163AAA0A72ADC0AD7BEEAF")  # lowercase
    assert not PINNED_REVISION_RE.fullmatch("main")


@pytest.mark.parametrize(
    ("uri", "bucket", "prefix"),
    [
        ("s3://models-bucket/models/voxtral", "models-bucket", "models/voxtral/"),
        ("s3://models-bucket/a/b/", "models-bucket", "a/b/"),
    ],
)
def test_s3_prefix_parsing(uri, bucket, prefix):
    parsed = S3Prefix.parse(uri)
    assert (parsed.bucket, parsed.prefix) == (bucket, prefix)
    assert parsed.key("params.json") == f"{prefix}params.json"
    assert str(parsed) == parsed.uri() == f"s3://{bucket}/{prefix}"


@pytest.mark.parametrize(
    "uri",
    ["s3://models-bucket", "s3://models-bucket/", "s3://models-bucket//", "s3://models-bucket///"],
)
def test_s3_uri_without_a_prefix_is_rejected(uri):
    """A whole bucket is never a model prefix: SageMaker would copy all of it, and --delete-extra
    would empty it."""
    with pytest.raises(ValueError, match="names no prefix"):
        S3Prefix.parse(uri)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (
            "https://models-bucket/voxtral/",
            "expected an S3 URI like s3://my-bucket/models/voxtral/",
        ),
        (
            "s3://Models_Bucket/voxtral/",
            "'Models_Bucket' in 's3://Models_Bucket/voxtral/' is not a valid S3 bucket name",
        ),
    ],
)
def test_what_is_not_an_s3_prefix_is_named(uri, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        S3Prefix.parse(uri)
