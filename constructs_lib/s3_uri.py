"""S3Location: an ``s3://bucket/key`` URI split into its parts (works with CDK tokens for the bucket name)."""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import S3_URI_PATTERN


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key (or key prefix, ending with ``/``)."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> "S3Location":
        """Split ``s3://bucket/key``. Raises ValueError when ``uri`` is not of that form (settings check it first)."""
        match = S3_URI_PATTERN.match(uri)
        if not match:
            raise ValueError(f"not an s3://bucket/prefix URI: {uri!r}")
        return cls(match[1], match[2])

    @property
    def uri(self) -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{self.key}"
