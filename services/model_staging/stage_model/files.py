"""Select the model files to stage from a local directory and hash them.

The selection applies the allow-list of :mod:`.constants` and checks completeness before anything is
uploaded: both required files, at least one weight file, and every shard the weights index names.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path

from contracts.weights import sha256_of

from .constants import (
    MODEL_FILE_PATTERNS,
    REQUIRED_FILES,
    WEIGHTS_INDEX_FILE,
    WEIGHTS_PATTERN,
)


class IncompleteModelError(Exception):
    """The local copy lacks a file vLLM needs; the message names every missing file."""


@dataclass(frozen=True)
class LocalFile:
    """One file to stage.

    Attributes:
        name: path relative to the model directory, with "/" separators (also the key suffix under
            the prefix).
        path: absolute path on disk.
        size: bytes.
        sha256: hex SHA-256 of the whole file.
    """

    name: str
    path: Path
    size: int
    sha256: str


def matches_allow_list(name: str, patterns: tuple[str, ...] = MODEL_FILE_PATTERNS) -> bool:
    """True when the relative ``name`` matches one of the allow-list ``patterns`` (fnmatch, whole
    name)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def select_model_files(
    directory: Path, patterns: tuple[str, ...] = MODEL_FILE_PATTERNS
) -> list[LocalFile]:
    """Return the allow-listed files of ``directory`` (sorted by name, hashed), after checking
    completeness.

    Only top-level files are considered: the Mistral-format files all sit at the repository root.

    Raises:
        NotADirectoryError: ``directory`` is not a directory.
        IncompleteModelError: a required file, every weight file, or a shard named by the weights
            index is missing; or the index is not valid JSON with a ``weight_map`` object. The
            message names the files.
    """
    if not directory.is_dir():
        raise NotADirectoryError(
            f"model directory {directory} does not exist or is not a directory"
        )
    names = sorted(
        entry.name
        for entry in directory.iterdir()
        if entry.is_file() and matches_allow_list(entry.name, patterns)
    )
    missing = [name for name in REQUIRED_FILES if name not in names]
    weights = [name for name in names if fnmatch.fnmatchcase(name, WEIGHTS_PATTERN)]
    if not weights:
        missing.append(WEIGHTS_PATTERN)
    if WEIGHTS_INDEX_FILE in names:
        missing.extend(
            shard
            for shard in _shards_named_by_index(directory / WEIGHTS_INDEX_FILE)
            if shard not in names
        )
    if missing:
        raise IncompleteModelError(
            f"{directory} is not a complete model: missing {', '.join(missing)} "
            f"(vLLM needs {', '.join(REQUIRED_FILES)} and the weights {WEIGHTS_PATTERN})"
        )
    return [_describe(directory / name) for name in names]


def _shards_named_by_index(index_path: Path) -> list[str]:
    """Return the sorted shard file names of a safetensors index (``{"weight_map": {tensor:
    file}}``)."""
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
        return sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise IncompleteModelError(
            f"{index_path} is not a safetensors index with a weight_map: {error}"
        ) from error


def _describe(path: Path) -> LocalFile:
    return LocalFile(
        name=path.name, path=path.resolve(), size=path.stat().st_size, sha256=sha256_of(path)
    )
