"""stage_model/files.py: the allow-listed files of a local model copy, hashed, and a copy that lacks
what vLLM needs named file by file."""

from __future__ import annotations

import hashlib
import json

import pytest

from model_staging.stage_model import files

SHARDS = ["consolidated-00001-of-00002.safetensors", "consolidated-00002-of-00002.safetensors"]


def write(directory, names, content=b"x"):
    for name in names:
        (directory / name).write_bytes(content)


def test_only_the_allow_listed_top_level_files_are_staged_sorted_and_hashed(tmp_path):
    write(
        tmp_path,
        ["params.json", "tekken.json", "consolidated.safetensors", "README.md", "config.json"],
    )
    (tmp_path / "original").mkdir()
    write(tmp_path / "original", ["consolidated.safetensors"])
    selected = files.select_model_files(tmp_path)
    assert [f.name for f in selected] == ["consolidated.safetensors", "params.json", "tekken.json"]
    assert selected[0] == files.LocalFile(
        "consolidated.safetensors",
        (tmp_path / "consolidated.safetensors").resolve(),
        1,
        hashlib.sha256(b"x").hexdigest(),
    )


def test_every_missing_file_is_named(tmp_path):
    write(tmp_path, ["tekken.json"])
    with pytest.raises(files.IncompleteModelError) as caught:
        files.select_model_files(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path} is not a complete model: missing params.json, consolidated*.safetensors "
        "(vLLM needs params.json, tekken.json and the weights consolidated*.safetensors)"
    )


def test_a_shard_the_index_names_must_be_there(tmp_path):
    write(tmp_path, ["params.json", "tekken.json", SHARDS[0]])
    (tmp_path / "consolidated.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1], "c": SHARDS[1]}})
    )
    with pytest.raises(files.IncompleteModelError, match=f"missing {SHARDS[1]} "):
        files.select_model_files(tmp_path)
    (tmp_path / "consolidated.safetensors.index.json").write_text("[]")
    with pytest.raises(
        files.IncompleteModelError, match="is not a safetensors index with a weight_map"
    ):
        files.select_model_files(tmp_path)


def test_a_missing_directory_is_not_a_directory(tmp_path):
    with pytest.raises(NotADirectoryError, match="does not exist or is not a directory"):
        files.select_model_files(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "name, allowed",
    [
        ("params.json", True),
        ("consolidated-00001-of-00002.safetensors", True),
        ("model.safetensors", False),
        ("sub/params.json", False),
        ("PARAMS.JSON", False),
    ],
)
def test_the_allow_list_matches_whole_names_case_sensitively(name, allowed):
    assert files.matches_allow_list(name) is allowed
