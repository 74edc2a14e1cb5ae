"""Small units of the staging code: Hub comparison, secret token, progress line, S3 prefix parsing."""

from __future__ import annotations

import hashlib
import io

import pytest

from constructs_lib.artifacts.model_staging_build.stage_model.files import LocalFile
from constructs_lib.artifacts.model_staging_build.stage_model.hub import HubFile, compare_with_hub, git_blob_id, token_from_secret
from constructs_lib.facts import S3Prefix
from constructs_lib.artifacts.model_staging_build.stage_model.progress import Progress


def test_compare_with_hub_names_each_mismatching_file(tmp_path):
    params = tmp_path / "params.json"
    params.write_bytes(b'{"dim": 3072}')
    weights = tmp_path / "consolidated.safetensors"
    weights.write_bytes(b"w" * 100)
    local = [
        LocalFile("params.json", params, 13, hashlib.sha256(params.read_bytes()).hexdigest()),
        LocalFile("consolidated.safetensors", weights, 100, hashlib.sha256(weights.read_bytes()).hexdigest()),
    ]
    good = [
        HubFile("params.json", 13, None, git_blob_id(params)),
        HubFile("consolidated.safetensors", 100, hashlib.sha256(b"w" * 100).hexdigest(), "lfs-pointer-blob"),
    ]
    assert compare_with_hub(local, good) == []

    bad = [
        HubFile("params.json", 13, None, "0" * 40),
        HubFile("consolidated.safetensors", 100, "f" * 64, "lfs-pointer-blob"),
        HubFile("tekken.json", 15_000_000, "e" * 64, "x"),
    ]
    assert compare_with_hub(local, bad) == [
        f"params.json: git blob id differs from the Hub's {'0' * 40}",
        f"consolidated.safetensors: SHA-256 {local[1].sha256}, the Hub says {'f' * 64}",
        "tekken.json: on the Hub but not downloaded",
    ]


def test_git_blob_id_matches_git(tmp_path):
    path = tmp_path / "hello"
    path.write_bytes(b"hello\n")
    assert git_blob_id(path) == "ce013625030ba8dba906f756967f9e9ca394464a"  # `git hash-object` of "hello\n"


def test_token_comes_from_the_secret_string(aws):
    client = aws.client("secretsmanager")
    arn = client.create_secret(Name="hf-token", SecretString="hf_abc123\n")["ARN"]
    assert token_from_secret(arn, client) == "hf_abc123"
    empty = client.create_secret(Name="empty", SecretBinary=b"\x00")["ARN"]
    with pytest.raises(ValueError, match="has no SecretString"):
        token_from_secret(empty, client)


def test_progress_line_shows_bytes_rate_and_time_left():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(total=100 * 1024 * 1024, stream=stream, interval_s=2.0, clock=lambda: now[0])
    now[0] = 10.0
    progress.add(25 * 1024 * 1024)
    assert stream.getvalue() == "  upload: 25.0 MiB / 100.0 MiB (25.0%), 2.5 MiB/s, 30s left\n"
    now[0] = 11.0
    progress.add(1024 * 1024)  # within the interval: no new line
    assert stream.getvalue().count("\n") == 1


@pytest.mark.parametrize(
    ("uri", "bucket", "prefix"),
    [("s3://models-bucket/models/voxtral", "models-bucket", "models/voxtral/"), ("s3://models-bucket/a/b/", "models-bucket", "a/b/")],
)
def test_s3_prefix_parsing(uri, bucket, prefix):
    parsed = S3Prefix.parse(uri)
    assert (parsed.bucket, parsed.prefix) == (bucket, prefix)
    assert parsed.key("params.json") == f"{prefix}params.json"


@pytest.mark.parametrize("uri", ["s3://models-bucket", "s3://models-bucket/", "s3://models-bucket//", "s3://models-bucket///"])
def test_s3_uri_without_a_prefix_is_rejected(uri):
    """A whole bucket is never a model prefix: SageMaker would copy all of it, and --delete-extra would empty it."""
    with pytest.raises(ValueError, match="names no prefix"):
        S3Prefix.parse(uri)
