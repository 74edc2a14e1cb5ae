"""The manifest of staged weights and the hash it lists: written by the staging build last, once
every file is in S3, and read by the bridge before it copies the weights to a host (ECS) and checks
each file against it.

Manifest (``model-manifest.json`` under the weights' prefix; JSON, keys sorted)::

    {"format": "voicectl/model-manifest/v1",
     "source": {"kind": "huggingface" | "local-directory", "repository": str | null,
                "revision": str | null, "path": str (local-directory only)},
     "files": [{"name": str, "size": int (bytes), "sha256": str (hex)}, ...]   (sorted by name)
     "total_size": int (bytes)}

It carries no timestamp, so restaging the same files rewrites nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final

#: The manifest's object name under the weights' prefix.
MANIFEST_NAME: Final = "model-manifest.json"
#: The manifest's format tag (its "format" field).
MANIFEST_FORMAT: Final = "voicectl/model-manifest/v1"
#: Read size when hashing, bytes: 8 MiB reads keep hashing at disk speed without holding much
#: memory.
HASH_READ_BYTES: Final = 8 * 1024 * 1024


class UnsafeNameError(ValueError):
    """A manifest names a file outside the prefix (an absolute path, or one with ``..``)."""


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of the whole file at ``path``, the hash a manifest lists. Raises OSError
    when unreadable."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(
    source: Mapping[str, Any], files: Iterable[tuple[str, int, str]]
) -> dict[str, Any]:
    """The manifest document: ``source`` as given, ``files`` as ``(name, size, sha256)``, sorted by
    name."""
    entries = [
        {"name": name, "size": size, "sha256": sha256} for name, size, sha256 in sorted(files)
    ]
    return {
        "format": MANIFEST_FORMAT,
        "source": dict(source),
        "files": entries,
        "total_size": sum(entry["size"] for entry in entries),
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """Canonical serialization (sorted keys, 2-space indent, trailing newline), UTF-8."""
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")


def check_format(manifest: Any) -> dict[str, Any]:
    """``manifest`` (a parsed document) when it carries this format and a list of files.

    Raises:
        ValueError: another format, or no list of files (the message says which).
        AttributeError: not a JSON object.
    """
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("files"), list):
        raise ValueError(f"format is {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}")
    return manifest


def check_manifest(manifest: Any) -> dict[str, Any]:
    """:func:`check_format`, and every entry a relative path inside the prefix with an integer size
    and a sha256: what a reader that writes the files where the manifest says must check first.

    Raises:
        UnsafeNameError: an entry names a path outside the prefix.
        ValueError: another format, or an entry without an integer size or a sha256.
        AttributeError, TypeError: not a JSON object, or an entry that is not one.
    """
    check_format(manifest)
    for entry in manifest["files"]:
        safe_name(entry.get("name"))
        if not isinstance(entry.get("size"), int) or not isinstance(entry.get("sha256"), str):
            raise ValueError(f"entry {entry!r} lacks an integer size or a sha256")
    return manifest


def safe_name(name: Any) -> str:
    """A manifest file name as a relative path inside the prefix (no absolute path, no ``..``).

    Raises:
        UnsafeNameError: anything else, named.
    """
    path = PurePosixPath(str(name))
    if not isinstance(name, str) or not name or path.is_absolute() or ".." in path.parts:
        raise UnsafeNameError(
            f"{MANIFEST_NAME}: file name {name!r} is not a relative path inside the prefix"
        )
    return name
