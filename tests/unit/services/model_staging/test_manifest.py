"""stage_model/manifest.py: the manifest of a staged prefix, the objects ``--delete-extra`` may
delete, and the verification of a prefix against its manifest (moto's S3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.model import S3Prefix
from model_staging.stage_model import manifest
from model_staging.stage_model.files import LocalFile
from tests.unit.services.model_staging.conftest import BUCKET

PREFIX = S3Prefix(BUCKET, "models/voxtral/")
SOURCE = manifest.Source("huggingface", "mistralai/Voxtral-Mini-4B-Realtime-2602", "b" * 40)
FILES = [
    LocalFile("tekken.json", Path("/m/tekken.json"), 3, "22" * 32),
    LocalFile("params.json", Path("/m/params.json"), 2, "11" * 32),
]


def test_the_manifest_lists_the_files_by_name_with_their_total():
    document = manifest.build_manifest(SOURCE, FILES)
    assert document == {
        "format": "voicectl/model-manifest/v1",
        "source": {
            "kind": "huggingface",
            "repository": "mistralai/Voxtral-Mini-4B-Realtime-2602",
            "revision": "b" * 40,
        },
        "files": [
            {"name": "params.json", "size": 2, "sha256": "11" * 32},
            {"name": "tekken.json", "size": 3, "sha256": "22" * 32},
        ],
        "total_size": 5,
    }
    local = manifest.Source("local-directory", None, None, path="/m").as_json()
    assert local == {"kind": "local-directory", "repository": None, "revision": None, "path": "/m"}
    text = manifest.manifest_bytes(document)
    assert (
        text.endswith(b"}\n")
        and json.loads(text) == document
        and text == manifest.manifest_bytes(json.loads(text))
    )  # canonical: the same bytes however the dict was ordered


def test_extra_keys_are_sorted_into_deletable_nested_and_other():
    keys = [
        PREFIX.key(name)
        for name in (
            "old.bin",
            "consolidated-00003-of-00003.safetensors",
            "notes.txt",
            "other-model/params.json",
            "listed-before.dat",
        )
    ]
    extra = manifest.classify_extra_keys(PREFIX, keys, {"files": [{"name": "listed-before.dat"}]})
    assert extra.deletable == [
        PREFIX.key("consolidated-00003-of-00003.safetensors"),
        PREFIX.key("listed-before.dat"),
        PREFIX.key("old.bin"),
    ]
    assert extra.nested == [PREFIX.key("other-model/params.json")]
    assert extra.other == [PREFIX.key("notes.txt")]
    assert extra.refusals(PREFIX) == [
        "other-model/params.json: in a sub-directory of the prefix; --delete-extra deletes only "
        "model files directly in the prefix, remove it yourself or stage into another prefix",
        "notes.txt: not a model file; --delete-extra deletes only model files directly in the "
        "prefix, remove it yourself or stage into another prefix",
    ]


def put(s3, name: str, body: bytes, sha256: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=PREFIX.key(name), Body=body, Metadata={"sha256": sha256})


def test_a_prefix_is_verified_file_by_file_and_every_problem_is_named(s3):
    document = manifest.build_manifest(SOURCE, FILES)
    put(s3, "params.json", b"{}", "11" * 32)
    put(s3, "tekken.json", b"{}", "22" * 32)  # 2 bytes, the manifest says 3
    put(s3, "stale.safetensors", b"x", "33" * 32)
    with pytest.raises(manifest.VerificationError) as caught:
        manifest.verify_prefix(s3, PREFIX, document)
    assert caught.value.problems == [
        "tekken.json: 2 bytes in S3, expected 3",
        "stale.safetensors: not part of the model (SageMaker would copy it too)",
    ]
    assert str(caught.value).startswith(
        f"{PREFIX} is not complete (2 problem(s)):\n  - tekken.json"
    )
    put(s3, "tekken.json", b"{ }", "44" * 32)
    s3.delete_object(Bucket=BUCKET, Key=PREFIX.key("stale.safetensors"))
    s3.delete_object(Bucket=BUCKET, Key=PREFIX.key("params.json"))
    with pytest.raises(manifest.VerificationError) as caught:
        manifest.verify_prefix(s3, PREFIX, document)
    assert caught.value.problems == [
        f"params.json: missing (expected 2 bytes at s3://{BUCKET}/models/voxtral/params.json)",
        f"tekken.json: SHA-256 {'44' * 32} in S3, expected {'22' * 32}",
    ]


def test_the_manifest_is_written_read_back_and_a_foreign_one_refused(s3):
    assert manifest.read_manifest(s3, PREFIX) is None
    document = manifest.build_manifest(SOURCE, FILES)
    manifest.write_manifest(s3, PREFIX, document)
    assert manifest.read_manifest(s3, PREFIX) == document
    s3.put_object(Bucket=BUCKET, Key=PREFIX.key("model-manifest.json"), Body=b'{"format": "other"}')
    with pytest.raises(
        manifest.VerificationError,
        match=r"model-manifest.json is not a model manifest: format is 'other', expected "
        r"'voicectl/model-manifest/v1'",
    ):
        manifest.read_manifest(s3, PREFIX)
    manifest.delete_manifest(s3, PREFIX)
    assert manifest.read_manifest(s3, PREFIX) is None
