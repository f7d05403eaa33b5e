"""Upload a script's packed source dir under its sweep's prefix, where every job of the sweep fetches it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainsweep import layout
from trainsweep.aws import s3 as s3io
from trainsweep.sourcedir import StagedSource, spec_with_source

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def upload_source(
    s3: S3Client, bucket: str, sweep_id: str, spec: dict[str, Any], staged: StagedSource
) -> dict[str, Any]:
    """Put ``sourcedir-<digest>.tar.gz`` in the bucket; returns the spec that points at it."""
    key = layout.code_key(sweep_id, staged.packed.digest)
    s3io.put_bytes(s3, bucket, key, staged.packed.data)
    return spec_with_source(spec, staged, f"s3://{bucket}/{key}")
