"""The manifest written next to the weights, and the verification of a staged prefix.

The manifest (``model-manifest.json`` under the prefix) names the source and revision and lists
every file with its size and SHA-256; its format is the contract's (:mod:`contracts.weights`),
which the bridge reads it with. It is written last, only after every file was found in S3 with the
right size and checksum, and deleted first whenever a run is about to change the prefix; so a
prefix with a manifest is complete, and a prefix without one is not to be served.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from contracts import weights
from contracts.model import S3Prefix
from contracts.weights import MANIFEST_NAME, check_format, manifest_bytes

from .constants import DELETABLE_EXTRA_PATTERNS, SHA256_METADATA_KEY
from .files import LocalFile, matches_allow_list
from .upload import head_listed, list_objects


class VerificationError(Exception):
    """The prefix does not hold the complete model. ``problems`` lists one sentence per file, naming
    it."""

    def __init__(self, destination: S3Prefix, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{destination} is not complete ({len(self.problems)} problem(s)):\n"
            + "\n".join(f"  - {problem}" for problem in self.problems)
        )


@dataclass(frozen=True)
class Source:
    """Where the files came from.

    Attributes:
        kind: "huggingface" (downloaded at a pinned revision) or "local-directory" (--from-dir).
        repository: Hub repository id, when known.
        revision: commit hash, when known (for a local directory: as declared by the user, not
            checked).
        path: the local directory, for kind "local-directory".
    """

    kind: str
    repository: str | None
    revision: str | None
    path: str | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "repository": self.repository,
            "revision": self.revision,
        }
        if self.path is not None:
            data["path"] = self.path
        return data


def build_manifest(source: Source, files: Sequence[LocalFile]) -> dict[str, Any]:
    """The manifest document for ``files`` from ``source``
    (:func:`contracts.weights.build_manifest`)."""
    return weights.build_manifest(source.as_json(), ((f.name, f.size, f.sha256) for f in files))


def read_manifest(s3: Any, destination: S3Prefix) -> dict[str, Any] | None:
    """The manifest under ``destination``; None when there is none (found by listing the prefix, not
    by a request for the key, which a role with prefix-conditioned s3:ListBucket gets as 403 when
    the key is missing).

    Raises:
        VerificationError: the object exists but is not a manifest of this format.
    """
    if destination.key(MANIFEST_NAME) not in list_objects(s3, destination):
        return None
    body = s3.get_object(Bucket=destination.bucket, Key=destination.key(MANIFEST_NAME))[
        "Body"
    ].read()
    try:
        manifest = check_format(json.loads(body))
    except (ValueError, AttributeError) as error:
        raise VerificationError(
            destination, [f"{MANIFEST_NAME} is not a model manifest: {error}"]
        ) from error
    return manifest


def delete_manifest(s3: Any, destination: S3Prefix) -> None:
    """Remove the manifest, marking the prefix as not complete (no error when there is none)."""
    s3.delete_object(Bucket=destination.bucket, Key=destination.key(MANIFEST_NAME))


def write_manifest(s3: Any, destination: S3Prefix, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` under ``destination`` (call only after :func:`verify_prefix` passed)."""
    s3.put_object(
        Bucket=destination.bucket,
        Key=destination.key(MANIFEST_NAME),
        Body=manifest_bytes(manifest),
        ContentType="application/json",
        ChecksumAlgorithm="SHA256",
    )


def list_keys(s3: Any, destination: S3Prefix) -> list[str]:
    """Every object key under the prefix (all depths), sorted."""
    return sorted(list_objects(s3, destination))


def extra_keys(
    s3: Any, destination: S3Prefix, names: Sequence[str], listing: dict[str, int] | None = None
) -> list[str]:
    """Keys under the prefix that are neither one of ``names`` nor the manifest, sorted.
    ``listing``: the result of :func:`list_objects` when the caller has one (listed afresh
    otherwise).

    They matter because SageMaker copies the whole prefix into /opt/ml/model: a stale
    ``consolidated-*.safetensors`` from another revision would be loaded by vLLM with the new
    weights.
    """
    listing = list_objects(s3, destination) if listing is None else listing
    expected = {destination.key(name) for name in names} | {destination.key(MANIFEST_NAME)}
    return sorted(key for key in listing if key not in expected)


@dataclass(frozen=True)
class ExtraKeys:
    """Keys under a prefix that are not part of the model, sorted into what ``--delete-extra`` may
    delete.

    Attributes:
        deletable: directly in the prefix, and a model file by name (DELETABLE_EXTRA_PATTERNS) or
            listed by the prefix's previous manifest.
        nested: in a sub-"directory" of the prefix (never deleted: another model or data may live
            there).
        other: directly in the prefix but not a model file (never deleted).
    """

    deletable: list[str]
    nested: list[str]
    other: list[str]

    def refusals(self, destination: S3Prefix) -> list[str]:
        """One sentence per key ``--delete-extra`` will not delete, naming it (relative to the
        prefix)."""
        start = len(destination.prefix)
        return [
            f"{key[start:]}: in a sub-directory of the prefix; --delete-extra deletes only model "
            "files directly in the prefix, remove it yourself or stage into another prefix"
            for key in self.nested
        ] + [
            f"{key[start:]}: not a model file; --delete-extra deletes only model files directly "
            "in the prefix, remove it yourself or stage into another prefix"
            for key in self.other
        ]


def classify_extra_keys(
    destination: S3Prefix, keys: Sequence[str], previous_manifest: dict[str, Any] | None
) -> ExtraKeys:
    """Sort ``keys`` (extra keys under ``destination``, see :func:`extra_keys`) into
    :class:`ExtraKeys`."""
    known = {
        entry.get("name")
        for entry in (previous_manifest or {}).get("files", [])
        if isinstance(entry, dict)
    }
    deletable, nested, other = [], [], []
    for key in sorted(keys):
        name = key[len(destination.prefix) :]
        if "/" in name:
            nested.append(key)
        elif name in known or matches_allow_list(name, DELETABLE_EXTRA_PATTERNS):
            deletable.append(key)
        else:
            other.append(key)
    return ExtraKeys(deletable=deletable, nested=nested, other=other)


def delete_keys(s3: Any, destination: S3Prefix, keys: Sequence[str]) -> None:
    """DeleteObjects ``keys`` (batches of 1,000, the API's limit).

    Raises:
        RuntimeError: S3 reported keys it could not delete (named in the message).
    """
    for start in range(0, len(keys), 1000):
        batch = keys[start : start + 1000]
        response = s3.delete_objects(
            Bucket=destination.bucket,
            Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
        )
        if response.get("Errors"):
            failed = ", ".join(
                f"{error['Key']} ({error.get('Code')})" for error in response["Errors"]
            )
            raise RuntimeError(f"could not delete from {destination}: {failed}")


def verify_prefix(s3: Any, destination: S3Prefix, manifest: dict[str, Any]) -> None:
    """Check that every file of ``manifest`` is under ``destination`` with its size and SHA-256, and
    nothing else.

    The SHA-256 is compared with the object's ``x-amz-meta-sha256``, which the upload set from the
    local file and S3 stored with the object; S3 itself checked each part's SHA-256 on receipt.
    Missing objects are found by listing the prefix; only listed keys are HEADed.

    Raises:
        VerificationError: one problem per missing, wrong-sized, wrong-checksum or unexpected
            object, each naming it.
    """
    problems = []
    listing = list_objects(s3, destination)
    for entry in manifest["files"]:
        key = destination.key(entry["name"])
        found = head_listed(s3, destination.bucket, key, listing)
        if found is None:
            problems.append(
                f"{entry['name']}: missing (expected {entry['size']} bytes at s3://{destination.bucket}/{key})"
            )
        elif found.get("ContentLength") != entry["size"]:
            problems.append(
                f"{entry['name']}: {found.get('ContentLength')} bytes in S3, expected "
                f"{entry['size']}"
            )
        elif found.get("Metadata", {}).get(SHA256_METADATA_KEY) != entry["sha256"]:
            problems.append(
                f"{entry['name']}: SHA-256 {found.get('Metadata', {}).get(SHA256_METADATA_KEY)} "
                f"in S3, expected {entry['sha256']}"
            )
    for key in extra_keys(s3, destination, [entry["name"] for entry in manifest["files"]], listing):
        problems.append(
            f"{key[len(destination.prefix) :]}: not part of the model (SageMaker would copy it too)"
        )
    if problems:
        raise VerificationError(destination, problems)
