"""Download a pinned revision of the model from the Hugging Face Hub and check it against the Hub's
metadata.

The access token, when the repository needs one (gated repositories such as Mistral's require
accepting the terms), comes from the ``HF_TOKEN`` environment variable (read by huggingface_hub
itself, as is a token saved by ``hf auth login``) or from a Secrets Manager secret holding the token
as its plain SecretString. There is deliberately no command-line option for the token: command lines
end up in shell history, process lists and logs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.model import PINNED_REVISION_RE

from .constants import MODEL_FILE_PATTERNS
from .files import LocalFile, matches_allow_list


@dataclass(frozen=True)
class HubFile:
    """What the Hub says about one file at a revision.

    Attributes:
        name: path in the repository.
        size: bytes.
        sha256: hex SHA-256 for files stored with Git LFS / Xet (the weights, large JSON); None for
            plain git files.
        blob_id: git blob id (SHA-1 of ``b"blob <size>\\0" + content``) for plain git files.
    """

    name: str
    size: int
    sha256: str | None
    blob_id: str | None


def require_pinned(revision: str, repo_id: str) -> str:
    """Return ``revision`` when it is a full commit hash.

    Raises:
        ValueError: anything else (a branch or tag can move, so the weights would not be pinned).
            The message says where to find the commit hash.
    """
    if not PINNED_REVISION_RE.fullmatch(revision):
        raise ValueError(
            f"revision {revision!r} is not a full 40-character commit hash; branches and tags "
            "can move, so the weights would not be pinned. Pick a commit at "
            f"https://huggingface.co/{repo_id}/commits/main"
        )
    return revision


def token_from_secret(secret_id: str, secrets_client: Any) -> str:
    """The Hub token stored as the plain SecretString of Secrets Manager secret ``secret_id`` (name
    or ARN).

    Raises:
        ValueError: the secret is binary or empty.
        botocore.exceptions.ClientError: the secret cannot be read (not found, access denied).
    """
    value = secrets_client.get_secret_value(SecretId=secret_id).get("SecretString", "").strip()
    if not value:
        raise ValueError(
            f"secret {secret_id} has no SecretString; store the Hub token as its plain text value"
        )
    return value


def download(repo_id: str, revision: str, token: str | None, local_dir: Path | None) -> Path:
    """Download the allow-listed files of ``repo_id`` at ``revision``; return the directory holding
    them.

    Args:
        repo_id: e.g. "mistralai/Voxtral-Mini-4B-Realtime-2602".
        revision: full commit hash (see :func:`require_pinned`).
        token: Hub token, or None to let huggingface_hub use HF_TOKEN or its saved login.
        local_dir: download into this directory; None uses the Hugging Face cache (reused by later
            runs).

    Raises:
        huggingface_hub.errors.HfHubHTTPError and subclasses (GatedRepoError, RevisionNotFoundError,
        ...).
    """
    from huggingface_hub import (
        snapshot_download,  # imported here: the hub client is only needed for downloads
    )

    path = snapshot_download(
        repo_id=repo_id,
        revision=revision,
        allow_patterns=list(MODEL_FILE_PATTERNS),
        token=token,
        local_dir=str(local_dir) if local_dir is not None else None,
    )
    return Path(path)


def hub_files(repo_id: str, revision: str, token: str | None) -> list[HubFile]:
    """The Hub's metadata of the allow-listed files of ``repo_id`` at ``revision`` (sizes and
    checksums)."""
    from huggingface_hub import HfApi

    info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, token=token)
    files = []
    for sibling in info.siblings or []:
        if not matches_allow_list(sibling.rfilename):
            continue
        lfs = sibling.lfs
        size = lfs.size if lfs is not None else sibling.size
        if size is None:  # files_metadata=True asks the Hub for every file's size
            raise ValueError(f"{repo_id}@{revision}: the Hub gave no size for {sibling.rfilename}")
        files.append(
            HubFile(
                name=sibling.rfilename,
                size=size,
                sha256=lfs.sha256 if lfs is not None else None,
                blob_id=sibling.blob_id,
            )
        )
    return files


def git_blob_id(path: Path) -> str:
    """The git blob id of the file at ``path``: hex SHA-1 of ``b"blob <size>\\0"`` followed by the
    content."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def compare_with_hub(local: Sequence[LocalFile], remote: Sequence[HubFile]) -> list[str]:
    """Problems found comparing the downloaded files with the Hub's metadata; empty when they agree.

    Each problem names the file: missing locally, not on the Hub, wrong size, or wrong SHA-256 / git
    blob id.
    """
    problems = []
    local_by_name = {file.name: file for file in local}
    remote_names = {file.name for file in remote}
    for expected in remote:
        found = local_by_name.get(expected.name)
        if found is None:
            problems.append(f"{expected.name}: on the Hub but not downloaded")
        elif found.size != expected.size:
            problems.append(
                f"{expected.name}: {found.size} bytes downloaded, the Hub says {expected.size}"
            )
        elif expected.sha256 is not None and found.sha256 != expected.sha256:
            problems.append(
                f"{expected.name}: SHA-256 {found.sha256}, the Hub says {expected.sha256}"
            )
        elif (
            expected.sha256 is None
            and expected.blob_id
            and git_blob_id(found.path) != expected.blob_id
        ):
            problems.append(
                f"{expected.name}: git blob id differs from the Hub's {expected.blob_id}"
            )
    problems.extend(
        f"{name}: not in the Hub repository at this revision"
        for name in local_by_name
        if name not in remote_names
    )
    return problems
