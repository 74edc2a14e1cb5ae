"""Off SageMaker (ECS, EKS, a plain GPU host): copy the staged weights from S3 to the host's disk
once per host, check them against the staging manifest, and hand vLLM the local directory.

SageMaker copies ``ModelDataSource`` to /opt/ml/model itself; elsewhere the entrypoint calls
:func:`ensure_local_copy` when ``MODEL_S3_URI`` is set. The copy lives under ``MODEL_CACHE_DIR`` (on
ECS a host directory bind-mounted into the task), keyed by bucket and prefix, so:

- **reused**: a second task on the same host (or a restarted one) finds the copy complete (a
  ``.complete`` marker holding the SHA-256 of the manifest it was checked against) and downloads
  nothing;
- **one copy at a time**: an exclusive ``flock`` on a lock file beside the copy; a second task waits
  for the first to finish, then reuses its copy;
- **resumed**: each file is downloaded to ``<name>.part``, its SHA-256 checked against the manifest,
  then renamed and recorded in ``.verified.json``; after an interruption the files recorded with the
  SHA-256 the manifest asks for are kept, and the copy goes on with the rest. The unit of resumption
  is the file: a file cut off mid-way is fetched again from its start (boto3's transfer manager
  downloads a file in parallel ranged parts but does not resume one).
- **refused**: a file whose size or SHA-256 differs from the manifest is deleted and the copy fails
  with :class:`WeightsError` naming it; vLLM never starts on it.

The manifest (``model-manifest.json`` under the prefix) is the one the staging step writes last;
its format, the check of what it lists and the hash of each file are the contract's
(contracts/weights.py), which the staging build writes with.

The transfer is boto3's managed download (``download_file`` with a
:class:`boto3.s3.transfer.TransferConfig`): parallel ranged GETs, retries; progress goes to the log
every :data:`PROGRESS_EVERY_S` seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contracts.model import S3Prefix
from contracts.weights import MANIFEST_NAME, UnsafeNameError, check_manifest, sha256_of

log = logging.getLogger("bridge.weights")

#: Written last into the copy: the SHA-256 of the manifest the copy was checked against.
COMPLETE_MARKER = ".complete"
PART_SUFFIX = ".part"
#: ``{name: sha256}`` of every file whose SHA-256 was checked after its download: what a resumed
#: copy keeps. A file is kept only when the manifest asks for that very SHA-256 (a same-sized file
#: of another revision is fetched again).
VERIFIED_FILE = ".verified.json"
#: Seconds between two progress lines in the log.
PROGRESS_EVERY_S = 10.0


class WeightsError(Exception):
    """The weights cannot be copied or do not match the manifest; the message names the file or the
    S3 URI."""


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/prefix/`` -> ``("bucket", "prefix/")`` (the prefix gets one trailing ``/``).

    Raises:
        WeightsError: not an ``s3://<bucket>/<prefix>`` URI (:class:`contracts.model.S3Prefix`).
    """
    try:
        weights = S3Prefix.parse(uri)
    except ValueError:
        raise WeightsError(f"MODEL_S3_URI={uri!r} must be 's3://<bucket>/<prefix>/'") from None
    return weights.bucket, weights.prefix


@contextlib.contextmanager
def _host_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every task on the host (``flock`` on a file in the bind-mounted
    directory); the kernel releases it when the process dies, so a killed task never leaves it
    held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        started = time.monotonic()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("weights: another task on this host is copying them; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
            log.info("weights: the other task finished after %.0f s", time.monotonic() - started)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _Progress:
    """boto3 transfer callback: counts bytes across the whole copy and logs at most every
    PROGRESS_EVERY_S."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done, self._lock = total, done, threading.Lock()
        self._start = self._last = time.monotonic()
        self._start_done = done

    def __call__(self, nbytes: int) -> None:  # called from the transfer manager's threads
        with self._lock:
            self.done += nbytes
            now = time.monotonic()
            if now - self._last >= PROGRESS_EVERY_S:
                self._last = now
                rate = (self.done - self._start_done) / max(now - self._start, 1e-9)
                log.info(
                    "weights: %.2f of %.2f GB (%.0f %%), %.0f MB/s",
                    self.done / 1e9,
                    self.total / 1e9,
                    100 * self.done / max(self.total, 1),
                    rate / 1e6,
                )


def _read_manifest(s3: Any, bucket: str, prefix: str) -> tuple[dict[str, Any], str]:
    """(manifest, SHA-256 of its bytes). Raises WeightsError when it is missing or malformed (a
    prefix without a manifest is not complete: the staging step writes it last)."""
    key = prefix + MANIFEST_NAME
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey as error:
        raise WeightsError(
            f"s3://{bucket}/{key} does not exist: the prefix is not staged (or not completely)"
        ) from error
    try:
        manifest = check_manifest(json.loads(body))
    except UnsafeNameError as error:
        raise WeightsError(str(error)) from None
    except (ValueError, AttributeError, TypeError) as error:
        raise WeightsError(f"s3://{bucket}/{key} is not a model manifest: {error}") from error
    return manifest, hashlib.sha256(body).hexdigest()


def _read_verified(target: Path) -> dict[str, str]:
    try:
        data = json.loads((target / VERIFIED_FILE).read_text())
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_verified(target: Path, verified: dict[str, str]) -> None:
    """Replace the record atomically, so an interruption leaves the old record or the new one, never
    half of one."""
    temporary = target / (VERIFIED_FILE + PART_SUFFIX)
    temporary.write_text(json.dumps(verified, sort_keys=True))
    os.replace(temporary, target / VERIFIED_FILE)


def local_dir(cache_dir: Path, bucket: str, prefix: str) -> Path:
    """Where the copy of ``s3://bucket/prefix`` lives under ``cache_dir``."""
    return cache_dir / bucket / prefix.strip("/")


def ensure_local_copy(
    s3_uri: str, cache_dir: Path, s3: Any | None = None, transfer_config: Any | None = None
) -> Path:
    """Copy the staged weights at ``s3_uri`` under ``cache_dir`` once per host, checked against the
    manifest, and return the directory to give vLLM (``--model``).

    Args:
        s3_uri: ``s3://bucket/prefix/`` holding the files and ``model-manifest.json``.
        cache_dir: host directory shared by the tasks of the host (MODEL_CACHE_DIR).
        s3: a boto3 S3 client (default: a new one from the environment's credentials, i.e. the task
            role).
        transfer_config: a :class:`boto3.s3.transfer.TransferConfig` (default: boto3's).

    Raises:
        WeightsError: the manifest is missing or malformed, a file is missing in S3, or a file's
            size or SHA-256 differs from the manifest (that file is deleted; the files verified
            before it are kept for a resume).
    """
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import ClientError

    bucket, prefix = parse_s3_uri(s3_uri)
    if s3 is None:
        s3 = boto3.client("s3")
    config = transfer_config or TransferConfig()
    target = local_dir(cache_dir, bucket, prefix)
    with _host_lock(target.parent / f"{target.name}.lock"):
        manifest, manifest_sha = _read_manifest(s3, bucket, prefix)
        marker = target / COMPLETE_MARKER
        files = manifest["files"]
        total = sum(entry["size"] for entry in files)
        if (
            marker.is_file()
            and marker.read_text().strip() == manifest_sha
            and all(
                (target / entry["name"]).is_file()
                and (target / entry["name"]).stat().st_size == entry["size"]
                for entry in files
            )
        ):
            log.info(
                "weights: reusing the copy in %s (%d files, %.2f GB, checked against this "
                "manifest)",
                target,
                len(files),
                total / 1e9,
            )
            return target
        marker.unlink(missing_ok=True)
        verified = _read_verified(target)
        present = [
            e
            for e in files
            if verified.get(e["name"]) == e["sha256"]
            and (target / e["name"]).is_file()
            and (target / e["name"]).stat().st_size == e["size"]
        ]
        progress = _Progress(total, sum(e["size"] for e in present))
        log.info(
            "weights: copying %s to %s: %d files, %.2f GB (%d already here from an earlier run)",
            s3_uri,
            target,
            len(files),
            total / 1e9,
            len(present),
        )
        started = time.monotonic()
        for entry in files:
            name, path = entry["name"], target / entry["name"]
            if entry in present:
                continue  # renamed only after its SHA-256 matched: verified by an earlier run
            part = path.with_name(path.name + PART_SUFFIX)
            part.parent.mkdir(parents=True, exist_ok=True)
            try:
                s3.download_file(bucket, prefix + name, str(part), Callback=progress, Config=config)
            except ClientError as error:
                part.unlink(missing_ok=True)
                raise WeightsError(
                    f"{name}: cannot download s3://{bucket}/{prefix}{name}: {error}"
                ) from error
            size, digest = part.stat().st_size, sha256_of(part)
            if size != entry["size"] or digest != entry["sha256"]:
                part.unlink()
                raise WeightsError(
                    f"{name}: refused, it does not match {MANIFEST_NAME} (size {size} bytes, "
                    f"sha256 {digest}; the manifest says {entry['size']} bytes, sha256 "
                    f"{entry['sha256']}); restage the prefix"
                )
            os.replace(part, path)
            verified[name] = digest
            _write_verified(target, verified)
        marker.write_text(manifest_sha + "\n")
        elapsed = time.monotonic() - started
        log.info(
            "weights: %d files, %.2f GB in %s, checked against the manifest, in %.0f s",
            len(files),
            total / 1e9,
            target,
            elapsed,
        )
        return target
