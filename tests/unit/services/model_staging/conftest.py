"""Fixtures for the staging tests: fake AWS credentials, moto's in-process S3, and a small model
directory.

No test reaches the Hugging Face Hub: the model directory is made here and staged with --from-dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

REGION = "us-east-1"
BUCKET = "voice-models-test"
MIB = 1024 * 1024
#: Part size used by the tests: S3's minimum, so a 12 MiB shard makes 3 parts (5 + 5 + 2 MiB).
PART_SIZE_MIB = 5

#: name -> size in bytes of the model files the fixture writes (sizes chosen around the part size).
SHARD_1 = "consolidated-00001-of-00002.safetensors"
SHARD_2 = "consolidated-00002-of-00002.safetensors"
MODEL_FILE_SIZES = {SHARD_1: 12 * MIB, SHARD_2: 3 * MIB}


@pytest.fixture
def aws(monkeypatch):
    """moto's in-process AWS with fake credentials; yields a boto3 Session."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


@pytest.fixture
def s3(aws):
    """An S3 client with the test bucket created."""
    client = aws.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A Mistral-format model directory: params.json, tekken.json, two weight shards with their
    index, and a README.md that is not on the allow-list. Contents are random, so every test uploads
    distinct bytes."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "params.json").write_text(
        json.dumps({"dim": 3072, "n_layers": 26}), encoding="utf-8"
    )
    (directory / "tekken.json").write_text(
        json.dumps({"config": {"pattern": "test"}, "vocab": []}), encoding="utf-8"
    )
    for name, size in MODEL_FILE_SIZES.items():
        (directory / name).write_bytes(os.urandom(size))
    index = {
        "metadata": {},
        "weight_map": {"layers.0.w": SHARD_1, "layers.1.w": SHARD_2, "norm.w": SHARD_2},
    }
    (directory / "consolidated.safetensors.index.json").write_text(
        json.dumps(index), encoding="utf-8"
    )
    (directory / "README.md").write_text("not part of the model\n", encoding="utf-8")
    return directory


@pytest.fixture
def head_needs_list_permission(aws, s3):
    """Make HeadObject behave as it does for the CodeBuild role, whose s3:ListBucket is conditioned
    on s3:prefix.

    moto does not enforce IAM. S3 answers HeadObject of a missing key with 404 only when the caller
    may list the bucket, otherwise with 403 (HeadObject API reference, "Permissions"); a HeadObject
    request carries no s3:prefix, so the role's conditional s3:ListBucket does not apply. This
    fixture fails every HeadObject of a key that does not exist with 403, as S3 would for that role,
    and records the key. Yields the list of such keys.
    """
    from botocore.exceptions import ClientError

    observer = boto3.client(
        "s3", region_name=REGION
    )  # another session: its calls are not intercepted
    refused: list[str] = []

    def forbid_missing(params, **kwargs):
        listed = observer.list_objects_v2(Bucket=params["Bucket"], Prefix=params["Key"]).get(
            "Contents", []
        )
        if not any(item["Key"] == params["Key"] for item in listed):
            refused.append(params["Key"])
            raise ClientError(
                {
                    "Error": {"Code": "403", "Message": "Forbidden"},
                    "ResponseMetadata": {"HTTPStatusCode": 403},
                },
                "HeadObject",
            )

    aws.events.register("before-parameter-build.s3.HeadObject", forbid_missing)
    yield refused
    aws.events.unregister("before-parameter-build.s3.HeadObject", forbid_missing)
