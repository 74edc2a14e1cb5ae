"""stage_model.location (S3Prefix, exported as constructs_lib.facts.S3Prefix): parsing and
refusals."""

from __future__ import annotations

import pytest

from constructs_lib.facts import S3Prefix


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


@pytest.mark.parametrize(
    "uri",
    ["s3://models-bucket", "s3://models-bucket/", "s3://models-bucket//", "s3://models-bucket///"],
)
def test_s3_uri_without_a_prefix_is_rejected(uri):
    """A whole bucket is never a model prefix: SageMaker would copy all of it, and --delete-extra
    would empty it."""
    with pytest.raises(ValueError, match="names no prefix"):
        S3Prefix.parse(uri)
