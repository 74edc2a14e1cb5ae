"""contracts/weights.py: the staged weights' manifest (built, serialized, checked) and the hash it
lists."""

from __future__ import annotations

import hashlib
import json

import pytest

from contracts import weights

FORMAT = weights.MANIFEST_FORMAT


def test_the_hash_reads_the_whole_file_in_pieces(tmp_path):
    data = bytes(range(256)) * (weights.HASH_READ_BYTES // 256 + 3)  # more than one read
    (tmp_path / "w").write_bytes(data)
    assert weights.sha256_of(tmp_path / "w") == hashlib.sha256(data).hexdigest()


def test_the_manifest_lists_the_files_by_name_with_their_total_and_serializes_canonically():
    source = {"kind": "huggingface", "repository": "mistralai/Voxtral", "revision": "a" * 40}
    files = [("tekken.json", 3, "b" * 64), ("params.json", 2, "c" * 64)]
    document = weights.build_manifest(source, files)
    assert document == {
        "format": "voicectl/model-manifest/v1",
        "source": source,
        "total_size": 5,
        "files": [
            {"name": "params.json", "size": 2, "sha256": "c" * 64},
            {"name": "tekken.json", "size": 3, "sha256": "b" * 64},
        ],
    }
    text = weights.manifest_bytes(document)
    assert text.endswith(b"}\n") and json.loads(text) == document
    # Keys sorted: one text per document, whatever the order of its dict.
    assert text == weights.manifest_bytes(dict(reversed(document.items())))
    assert weights.check_manifest(json.loads(text)) == document


def entry(name: str, size: object = 1) -> dict:
    return {"name": name, "size": size, "sha256": "c"}


@pytest.mark.parametrize(
    ("document", "error", "message"),
    [
        (
            {"format": "v0", "files": []},
            ValueError,
            "format is 'v0', expected 'voicectl/model-manifest/v1'",
        ),
        ({"format": FORMAT, "files": {}}, ValueError, "format is 'voicectl/model-manifest/v1'"),
        (
            {"format": FORMAT, "files": [entry("a", "2")]},
            ValueError,
            "lacks an integer size or a sha256",
        ),
        (
            {"format": FORMAT, "files": [entry("../escape")]},
            weights.UnsafeNameError,
            "model-manifest.json: file name '../escape' is not a relative path inside the prefix",
        ),
        (
            {"format": FORMAT, "files": [entry("/etc/passwd")]},
            weights.UnsafeNameError,
            "'/etc/passwd' is not a relative path",
        ),
    ],
)
def test_a_manifest_not_of_this_format_or_naming_a_file_outside_the_prefix_is_refused(
    document, error, message
):
    with pytest.raises(error) as info:
        weights.check_manifest(document)
    assert message in str(info.value)


def test_the_format_check_alone_takes_any_entries():
    """What the staging build reads back (a previous manifest) needs the format only; a reader
    that writes files where the entries say checks them all (check_manifest)."""
    document = {"format": FORMAT, "files": [{"name": "../x"}]}
    assert weights.check_format(document) is document
    with pytest.raises(AttributeError):
        weights.check_format(["not", "an", "object"])
