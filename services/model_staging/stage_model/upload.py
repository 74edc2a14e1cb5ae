"""Upload model files to S3: skip what is already there, resume interrupted multipart uploads,
upload the rest.

Fresh uploads go through boto3's managed transfer (``boto3.s3.transfer.create_transfer_manager``:
multipart from the part size up, parts in parallel, optional bandwidth cap). Every object carries
the file's SHA-256 in its metadata (``x-amz-meta-sha256``) and every part a SHA-256 checksum that S3
checks on receipt (``ChecksumAlgorithm=SHA256``,
https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html).

How a rerun avoids work:

- The prefix is listed first (ListObjectsV2 with ``Prefix``), and only keys the listing shows are
  read with HeadObject. A missing key is never HEADed: S3 answers 404 for it only to a caller
  allowed s3:ListBucket on the bucket and 403 otherwise (HeadObject API reference, "Permissions"),
  and the CodeBuild role's s3:ListBucket is conditioned on ``s3:prefix``, a key a HeadObject request
  does not carry, so S3 would answer 403 and the run fail.
- A file whose object exists with the same size and ``sha256`` metadata is skipped. Objects appear
  atomically (PutObject, or CompleteMultipartUpload), so an existing object is never a partial file.
- A file with an unfinished multipart upload for its key (left by a run that was interrupted, killed
  or failed) is resumed: the parts already in S3 are checked against the local bytes (their SHA-256
  checksum, or their ETag, the MD5 of the part for SSE-S3 objects) and only the missing parts are
  sent. s3transfer has no resume API, so this path calls UploadPart/CompleteMultipartUpload itself.
  An unfinished upload whose parts do not match the local file (another file version, another part
  size) is aborted, so it stops costing storage, and the file is uploaded afresh.

s3transfer aborts the multipart upload of a transfer that fails or is cancelled (its failure
cleanup; a KeyboardInterrupt cancels every transfer), which would throw away the parts already sent.
While the transfer manager runs, :class:`KeepUnfinishedUploads` refuses those AbortMultipartUpload
calls, so Ctrl-C and failures leave the upload for the next run. Uploads nobody resumes are removed
by the next run when they do not match the file, or by the bucket's lifecycle rule
(AbortIncompleteMultipartUpload; the project's model bucket has one, 7 days).

Staging the same prefix from two processes at once is not supported: each may abort the other's
unfinished upload.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.exceptions import ClientError
from s3transfer.utils import ChunksizeAdjuster

from contracts.model import S3Prefix

from .constants import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_PART_SIZE,
    MIN_PART_SIZE,
    SHA256_METADATA_KEY,
)
from .files import LocalFile
from .progress import Progress

#: Checksum S3 computes and checks for every part and small object we send.
CHECKSUM_ALGORITHM = "SHA256"


@dataclass(frozen=True)
class TransferSettings:
    """How to upload.

    Attributes:
        part_size: multipart part size and multipart threshold, bytes (>= 5 MiB, S3's minimum part
            size).
        max_concurrency: parts in flight at once (>= 1).
        max_bandwidth: upper bound on the upload rate, bytes per second; None for no bound. Applies
            to fresh uploads (s3transfer's bandwidth limiter), not to the parts sent when resuming.
    """

    part_size: int = DEFAULT_PART_SIZE
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_bandwidth: int | None = None

    def __post_init__(self) -> None:
        if self.part_size < MIN_PART_SIZE:
            raise ValueError(
                f"part size must be at least {MIN_PART_SIZE} bytes (5 MiB, S3's minimum); got "
                f"{self.part_size}"
            )
        if self.max_concurrency < 1:
            raise ValueError(f"max concurrency must be at least 1; got {self.max_concurrency}")
        if self.max_bandwidth is not None and self.max_bandwidth <= 0:
            raise ValueError(
                "max bandwidth must be a positive number of bytes per second; got "
                f"{self.max_bandwidth}"
            )

    def transfer_config(self) -> TransferConfig:
        """boto3's transfer configuration: multipart from ``part_size`` up, ``part_size`` parts,
        threads on.

        ``preferred_transfer_client="classic"`` keeps the Python transfer manager on every host
        (boto3 switches to the CRT one on some EC2 instance types), so the bandwidth cap, the
        progress subscribers and the part layout the resume path relies on are the same everywhere.
        """
        return TransferConfig(
            multipart_threshold=self.part_size,
            multipart_chunksize=self.part_size,
            max_concurrency=self.max_concurrency,
            max_bandwidth=self.max_bandwidth,
            preferred_transfer_client="classic",
        )

    def part_size_for(self, file_size: int) -> int:
        """The part size s3transfer uses for a file of ``file_size`` bytes (grown to stay within
        10,000 parts)."""
        return ChunksizeAdjuster().adjust_chunksize(self.part_size, file_size)

    def is_multipart(self, file_size: int) -> bool:
        """True when a file of ``file_size`` bytes is uploaded in parts (s3transfer's threshold
        test)."""
        return file_size >= self.part_size


@dataclass
class UploadReport:
    """What a run did. Byte counts are file bytes, excluding HTTP overhead.

    Attributes:
        sent_bytes: bytes sent to S3 by this run.
        reused_part_bytes: bytes of parts left by an interrupted run and reused instead of being
            sent again.
        skipped: names of files already in S3 with the same size and SHA-256.
        uploaded: names of files uploaded afresh.
        resumed: names of files completed from an unfinished multipart upload.
    """

    sent_bytes: int = 0
    reused_part_bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)


def list_objects(s3: Any, destination: S3Prefix) -> dict[str, int]:
    """``{key: size in bytes}`` of every object under ``destination`` (all depths), from
    ListObjectsV2 with ``Prefix`` (allowed by a role whose s3:ListBucket is conditioned on
    ``s3:prefix``)."""
    objects: dict[str, int] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=destination.bucket, Prefix=destination.prefix
    ):
        objects.update((item["Key"], item["Size"]) for item in page.get("Contents", []))
    return objects


def head_listed(s3: Any, bucket: str, key: str, listing: dict[str, int]) -> dict | None:
    """HeadObject ``key`` when ``listing`` (from :func:`list_objects`) shows it; None without a
    request otherwise.

    A key missing from the listing is not HEADed, because S3 answers that with 403, not 404, unless
    the caller may list the whole bucket (see the module docstring).
    """
    if key not in listing:
        return None
    return head(s3, bucket, key)


def head(s3: Any, bucket: str, key: str) -> dict | None:
    """HeadObject ``key``; None on 404. Call it only for keys known to exist (a listed key removed
    since, or a key just written): for a missing key a caller without unconditional s3:ListBucket
    gets 403, which propagates as ClientError like any other error."""
    try:
        return s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def is_current(head_response: dict | None, file: LocalFile) -> bool:
    """True when the object described by ``head_response`` holds ``file``: same size and same
    SHA-256 metadata."""
    return (
        head_response is not None
        and head_response.get("ContentLength") == file.size
        and head_response.get("Metadata", {}).get(SHA256_METADATA_KEY) == file.sha256
    )


def upload_files(
    s3: Any,
    files: Sequence[LocalFile],
    destination: S3Prefix,
    settings: TransferSettings = TransferSettings(),
    progress: Progress | None = None,
) -> UploadReport:
    """Make every file of ``files`` present under ``destination``, sending as few bytes as possible.

    Args:
        s3: a boto3 S3 client.
        files: the files to stage; ``LocalFile.name`` becomes the key suffix.
        destination: the prefix.
        settings: part size, concurrency and bandwidth.
        progress: progress counter; one is created on stderr when None.

    Returns:
        An :class:`UploadReport`.

    Raises:
        botocore.exceptions.BotoCoreError, ClientError, OSError: a transfer failed. Objects are only
            created whole,
        so a failed run leaves complete objects and at most one unfinished multipart upload per
        file, which the next run resumes.
    """
    report = UploadReport()
    pending: list[LocalFile] = []
    listing = list_objects(s3, destination)
    for file in files:
        if is_current(
            head_listed(s3, destination.bucket, destination.key(file.name), listing), file
        ):
            report.skipped.append(file.name)
        else:
            pending.append(file)
    if not pending:
        return report

    progress = (
        progress if progress is not None else Progress(total=sum(file.size for file in pending))
    )
    fresh: list[LocalFile] = []
    for file in pending:
        if settings.is_multipart(file.size) and _resume(
            s3, file, destination, settings, progress, report
        ):
            report.resumed.append(file.name)
        else:
            fresh.append(file)
    _upload_fresh(s3, fresh, destination, settings, progress)
    report.uploaded.extend(file.name for file in fresh)
    report.sent_bytes = progress.sent
    progress.finish()
    return report


class UnfinishedUploadKept(Exception):
    """Raised in place of an AbortMultipartUpload request that :class:`KeepUnfinishedUploads`
    refused."""


class KeepUnfinishedUploads:
    """Context manager: while it is active, AbortMultipartUpload calls of the S3 client ``s3`` are
    not sent.

    Used around boto3's transfer manager, whose only AbortMultipartUpload calls are the failure
    cleanups of its multipart uploads. They raise :class:`UnfinishedUploadKept` instead, which
    s3transfer catches and logs (at debug level) like any failed cleanup. Written here because
    s3transfer has no option to keep a failed upload: a botocore ``before-call`` handler on this
    client alone (each client has its own copy of the event hooks).
    """

    _EVENT = "before-call.s3.AbortMultipartUpload"

    def __init__(self, s3: Any) -> None:
        self._events = s3.meta.events
        self._unique_id = f"voicectl-keep-unfinished-uploads-{id(self)}"

    def __enter__(self) -> KeepUnfinishedUploads:
        self._events.register(self._EVENT, self._refuse, unique_id=self._unique_id)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._events.unregister(self._EVENT, unique_id=self._unique_id)

    @staticmethod
    def _refuse(params: dict, **kwargs: Any) -> None:
        raise UnfinishedUploadKept(
            f"kept unfinished upload {params.get('UploadId')} of {params.get('Key')} to resume"
        )


def _upload_fresh(
    s3: Any,
    files: Iterable[LocalFile],
    destination: S3Prefix,
    settings: TransferSettings,
    progress: Progress,
) -> None:
    """Upload ``files`` with boto3's transfer manager; raise the first failure after all transfers
    ended.

    A failed or interrupted (KeyboardInterrupt) multipart upload is left in S3 for the next run to
    resume.
    """
    with (
        KeepUnfinishedUploads(s3),
        create_transfer_manager(s3, settings.transfer_config()) as manager,
    ):
        futures = [
            manager.upload(
                str(file.path),
                destination.bucket,
                destination.key(file.name),
                extra_args={
                    "Metadata": {SHA256_METADATA_KEY: file.sha256},
                    "ChecksumAlgorithm": CHECKSUM_ALGORITHM,
                },
                subscribers=[progress.subscriber()],
            )
            for file in files
        ]
        errors = []
        for future in futures:
            try:
                future.result()
            except (
                Exception
            ) as error:  # collect, so every transfer finishes or fails before we raise
                errors.append(error)
    if errors:
        raise errors[0]


def _resume(
    s3: Any,
    file: LocalFile,
    destination: S3Prefix,
    settings: TransferSettings,
    progress: Progress,
    report: UploadReport,
) -> bool:
    """Complete ``file`` from an unfinished multipart upload of its key; True when that succeeded.

    Unfinished uploads of the key that do not hold this file's bytes are aborted.
    """
    key = destination.key(file.name)
    part_size = settings.part_size_for(file.size)
    completed = False
    for upload in _unfinished_uploads(s3, destination.bucket, key):
        upload_id = upload["UploadId"]
        parts = None
        if not completed and upload.get("ChecksumAlgorithm") == CHECKSUM_ALGORITHM:
            parts = _matching_parts(s3, file, destination.bucket, key, upload_id, part_size)
        if parts is None:
            s3.abort_multipart_upload(Bucket=destination.bucket, Key=key, UploadId=upload_id)
            continue
        report.reused_part_bytes += sum(
            _part_length(file.size, part_size, number) for number in parts
        )
        progress.total -= sum(_part_length(file.size, part_size, number) for number in parts)
        _send_missing_parts(
            s3, file, destination.bucket, key, upload_id, part_size, parts, settings, progress
        )
        s3.complete_multipart_upload(
            Bucket=destination.bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={
                "Parts": [{"PartNumber": number, **parts[number]} for number in sorted(parts)]
            },
        )
        if is_current(head(s3, destination.bucket, key), file):
            completed = True
        else:
            # The upload was started for another version of the file (its metadata holds another
            # SHA-256) even though the parts present matched: replace the object.
            s3.delete_object(Bucket=destination.bucket, Key=key)
    return completed


def _unfinished_uploads(s3: Any, bucket: str, key: str) -> list[dict]:
    """Unfinished multipart uploads of exactly ``key``, newest first."""
    uploads = []
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=key):
        uploads.extend(upload for upload in page.get("Uploads", []) if upload["Key"] == key)
    return sorted(uploads, key=lambda upload: upload["Initiated"], reverse=True)


def _part_count(file_size: int, part_size: int) -> int:
    return max(1, math.ceil(file_size / part_size))


def _part_length(file_size: int, part_size: int, number: int) -> int:
    """Bytes in part ``number`` (1-based) of a file split into ``part_size`` parts."""
    return min(part_size, file_size - (number - 1) * part_size)


def _read_part(file: LocalFile, part_size: int, number: int) -> bytes:
    with file.path.open("rb") as handle:
        handle.seek((number - 1) * part_size)
        return handle.read(_part_length(file.size, part_size, number))


def _sha256_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def _matching_parts(
    s3: Any, file: LocalFile, bucket: str, key: str, upload_id: str, part_size: int
) -> dict[int, dict[str, str]] | None:
    """The parts of ``upload_id`` as ``{number: {"ETag", "ChecksumSHA256"}}`` when every one of them
    holds the matching bytes of ``file``; None as soon as one does not (wrong number, size or
    content)."""
    parts: dict[int, dict[str, str]] = {}
    count = _part_count(file.size, part_size)
    for page in s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload_id):
        for part in page.get("Parts", []):
            number = part["PartNumber"]
            if not 1 <= number <= count or part["Size"] != _part_length(
                file.size, part_size, number
            ):
                return None
            data = _read_part(file, part_size, number)
            checksum = _sha256_b64(data)
            if "ChecksumSHA256" in part:
                matches = part["ChecksumSHA256"] == checksum
            else:
                # Without a listed checksum, the ETag of a part is the MD5 of its bytes for SSE-S3
                # and unencrypted objects
                # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_Object.html, ETag). For
                # SSE-KMS it is not, and the part is treated as not matching: the upload starts over
                # rather than guess.
                matches = (
                    part["ETag"].strip('"') == hashlib.md5(data, usedforsecurity=False).hexdigest()
                )
            if not matches:
                return None
            parts[number] = {"ETag": part["ETag"], "ChecksumSHA256": checksum}
    return parts


def _send_missing_parts(
    s3: Any,
    file: LocalFile,
    bucket: str,
    key: str,
    upload_id: str,
    part_size: int,
    parts: dict[int, dict[str, str]],
    settings: TransferSettings,
    progress: Progress,
) -> None:
    """UploadPart every part of ``file`` not in ``parts`` (in parallel) and add them to
    ``parts``."""
    missing = [
        number for number in range(1, _part_count(file.size, part_size) + 1) if number not in parts
    ]

    def send(number: int) -> tuple[int, dict[str, str]]:
        data = _read_part(file, part_size, number)
        checksum = _sha256_b64(data)
        response = s3.upload_part(
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=data,
            ChecksumSHA256=checksum,
        )
        progress.add(len(data))
        return number, {"ETag": response["ETag"], "ChecksumSHA256": checksum}

    with ThreadPoolExecutor(max_workers=settings.max_concurrency) as pool:
        for number, part in pool.map(send, missing):
            parts[number] = part
