"""The model's identity, the rules of its revisions, and where its weights live in S3
(:class:`S3Prefix`).

The staging build writes the weights under an :class:`S3Prefix` at a pinned revision of
:data:`DEFAULT_REPO_ID`, the stacks serve them under that name (vLLM ``--served-model-name``), and
the clients name it in ``session.update``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

#: Hugging Face Hub repository of the speech-to-text model
#: (https://huggingface.co/mistralai/Voxtral-Mini-4B-Realtime-2602); also the name the stacks serve
#: it under, which vLLM requires in ``session.update`` (error ``model_not_found``).
DEFAULT_REPO_ID: Final = "mistralai/Voxtral-Mini-4B-Realtime-2602"

#: A pinned revision is a full git commit hash (40 lowercase hex digits); branches and tags can
#: move.
PINNED_REVISION_RE: Final = re.compile(r"[0-9a-f]{40}")
#: A model hub repository id, ``<owner>/<name>`` (Hugging Face Hub repository naming: letters,
#: digits, '.', '_', '-').
REPOSITORY_ID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
#: Longest model hub repository id, characters (huggingface_hub ``validate_repo_id``: "between 1
#: and 96 characters"); a longer one can name no repository.
MAX_REPOSITORY_ID_CHARS: Final = 96

# Bucket naming rules: https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class S3Prefix:
    """An S3 "folder": ``bucket`` and a non-empty ``prefix`` ending with "/"; the project's one
    parser of ``s3://bucket/prefix`` URIs.

    A whole bucket is never a model prefix: SageMaker copies everything under the prefix to
    /opt/ml/model, and ``stage-model --delete-extra`` removes objects under it that are not part of
    the model.
    """

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> S3Prefix:
        """Parse ``s3://bucket/some/prefix`` (trailing "/" optional) into an :class:`S3Prefix`.

        Raises:
            ValueError: not an ``s3://`` URI, the bucket name breaks S3's naming rules, or there is
                no prefix (``s3://bucket``, ``s3://bucket/``). The message shows the expected form.
        """
        if not uri.startswith("s3://"):
            raise ValueError(f"expected an S3 URI like s3://my-bucket/models/voxtral/, got {uri!r}")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not _BUCKET_RE.fullmatch(bucket):
            raise ValueError(
                f"{bucket!r} in {uri!r} is not a valid S3 bucket name (3-63 of a-z 0-9 . -)"
            )
        prefix = prefix.strip("/")
        if not prefix:
            raise ValueError(
                f"{uri!r} names no prefix, only the bucket; stage into a prefix of its own, e.g. "
                f"s3://{bucket}/models/voxtral/ (SageMaker copies everything under it)"
            )
        return cls(bucket=bucket, prefix=f"{prefix}/")

    def key(self, name: str) -> str:
        """The object key of the file ``name`` under this prefix."""
        return f"{self.prefix}{name}"

    def uri(self, name: str = "") -> str:
        """``s3://bucket/prefix/name``."""
        return f"s3://{self.bucket}/{self.prefix}{name}"

    def __str__(self) -> str:
        return self.uri()
