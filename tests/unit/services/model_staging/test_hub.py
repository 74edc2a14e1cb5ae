"""stage_model.hub: the comparison with the Hub, git blob ids, the token from its secret."""

from __future__ import annotations

import hashlib

import pytest

from model_staging.stage_model.files import LocalFile
from model_staging.stage_model.hub import (
    HubFile,
    compare_with_hub,
    git_blob_id,
    token_from_secret,
)


def test_compare_with_hub_names_each_mismatching_file(tmp_path):
    params = tmp_path / "params.json"
    params.write_bytes(b'{"dim": 3072}')
    weights = tmp_path / "consolidated.safetensors"
    weights.write_bytes(b"w" * 100)
    local = [
        LocalFile("params.json", params, 13, hashlib.sha256(params.read_bytes()).hexdigest()),
        LocalFile(
            "consolidated.safetensors",
            weights,
            100,
            hashlib.sha256(weights.read_bytes()).hexdigest(),
        ),
    ]
    good = [
        HubFile("params.json", 13, None, git_blob_id(params)),
        HubFile(
            "consolidated.safetensors",
            100,
            hashlib.sha256(b"w" * 100).hexdigest(),
            "lfs-pointer-blob",
        ),
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
    assert (
        git_blob_id(path) == "ce013625030ba8dba906f756967f9e9ca394464a"
    )  # `git hash-object` of "hello\n"


def test_token_comes_from_the_secret_string(aws):
    client = aws.client("secretsmanager")
    arn = client.create_secret(Name="hf-token", SecretString="hf_abc123\n")["ARN"]
    assert token_from_secret(arn, client) == "hf_abc123"
    empty = client.create_secret(Name="empty", SecretBinary=b"\x00")["ARN"]
    with pytest.raises(ValueError, match="has no SecretString"):
        token_from_secret(empty, client)
