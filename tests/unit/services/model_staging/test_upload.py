"""stage_model/upload.py: how files go to S3 (part sizes, S3's limits), which objects already hold a
file, and an unfinished multipart upload that is kept (the uploads themselves, against moto:
test_command.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_staging.stage_model import upload
from model_staging.stage_model.files import LocalFile

MIB = 1024 * 1024
FILE = LocalFile("params.json", Path("/m/params.json"), 10, "ab" * 32)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"part_size": 5 * MIB - 1},
            "part size must be at least 5242880 bytes (5 MiB, S3's minimum); got 5242879",
        ),
        ({"max_concurrency": 0}, "max concurrency must be at least 1; got 0"),
        (
            {"max_bandwidth": 0},
            "max bandwidth must be a positive number of bytes per second; got 0",
        ),
    ],
)
def test_settings_s3_would_refuse_are_named(kwargs, message):
    with pytest.raises(ValueError) as caught:
        upload.TransferSettings(**kwargs)
    assert str(caught.value) == message


def test_the_transfer_config_uses_the_part_size_as_threshold_and_the_classic_client():
    config = upload.TransferSettings(part_size=8 * MIB, max_concurrency=3).transfer_config()
    assert (
        config.multipart_threshold,
        config.multipart_chunksize,
        config.max_request_concurrency,
    ) == (8 * MIB, 8 * MIB, 3)
    assert config.preferred_transfer_client == "classic"


def test_parts_grow_to_stay_within_10000_and_multipart_starts_at_the_part_size():
    settings = upload.TransferSettings(part_size=5 * MIB)
    assert settings.part_size_for(100 * MIB) == 5 * MIB
    big = 100_000 * MIB
    assert big / settings.part_size_for(big) <= 10_000
    assert settings.is_multipart(5 * MIB) and not settings.is_multipart(5 * MIB - 1)


def test_an_object_is_current_only_with_the_same_size_and_sha256():
    assert upload.is_current({"ContentLength": 10, "Metadata": {"sha256": "ab" * 32}}, FILE)
    assert not upload.is_current({"ContentLength": 11, "Metadata": {"sha256": "ab" * 32}}, FILE)
    assert not upload.is_current({"ContentLength": 10, "Metadata": {}}, FILE)
    assert not upload.is_current(None, FILE)


def test_part_arithmetic():
    assert upload._part_count(11 * MIB, 5 * MIB) == 3
    assert [upload._part_length(11 * MIB, 5 * MIB, n) for n in (1, 2, 3)] == [5 * MIB, 5 * MIB, MIB]
    assert upload._sha256_b64(b"") == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
