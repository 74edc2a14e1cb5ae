"""stage_model/constants.py: the facts the staging build and voicectl share, held to what they say
(the model's identity and revision rules are the contracts': tests/unit/contracts/test_model.py)."""

from __future__ import annotations

import fnmatch

from contracts.weights import MANIFEST_NAME
from model_staging.stage_model import constants


def test_the_allow_list_is_what_vllm_loads_in_mistral_format_and_nothing_else():
    assert constants.MODEL_FILE_PATTERNS == (
        "params.json",
        "tekken.json",
        "consolidated*.safetensors",
        "consolidated.safetensors.index.json",
    )
    assert set(constants.REQUIRED_FILES) <= set(constants.MODEL_FILE_PATTERNS)
    for name in ("README.md", ".gitattributes", "config.json", "model.safetensors"):
        assert not any(
            fnmatch.fnmatchcase(name, pattern) for pattern in constants.MODEL_FILE_PATTERNS
        ), name


def test_every_model_file_is_also_deletable_as_an_extra_but_the_manifest_is_not():
    assert set(constants.MODEL_FILE_PATTERNS) <= set(constants.DELETABLE_EXTRA_PATTERNS)
    assert not any(
        fnmatch.fnmatchcase(MANIFEST_NAME, pattern)
        for pattern in constants.DELETABLE_EXTRA_PATTERNS
    )


def test_part_sizes_are_within_s3s_limits():
    assert constants.MIN_PART_SIZE == 5 * 1024 * 1024
    assert constants.MIN_PART_SIZE <= constants.DEFAULT_PART_SIZE <= 5 * 1024**3
    assert 8.3e9 / constants.DEFAULT_PART_SIZE < 10_000  # the 8.3 GB weights fit S3's part count
