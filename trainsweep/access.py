"""What the stack's training role may read, checked against a spec's ``s3://`` inputs before any job starts.

The role reads the results bucket's ``data/`` prefix and the packed sources below ``sweeps/*/code/``,
and every object of the buckets the deployment names in ``data_bucket_names`` (``infra/training.py``).
A spec whose ``data`` or ``workload.source_dir`` lies elsewhere would have every job fail at start with
AccessDenied; PlanSweep refuses it instead, naming what the role may read and the setting that widens it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainsweep import layout
from trainsweep.errors import SpecError

DATA_BUCKETS_SETTING = "data_bucket_names"
ANY_BUCKET = "*"
"""In place of the data buckets: the jobs run as a role the stack did not make, whose reads it cannot know."""


@dataclass(frozen=True)
class RoleReads:
    """The S3 locations the training role may read: the results bucket's prefixes, the data buckets."""

    bucket: str
    data_buckets: tuple[str, ...] = ()

    def allows(self, uri: str) -> bool:
        """Whether the role may read ``s3://bucket/key`` (for a prefix: the objects below it)."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if ANY_BUCKET in self.data_buckets or bucket in self.data_buckets:
            return True
        if bucket != self.bucket:
            return False
        if key.startswith(layout.DATA_PREFIX):
            return True
        parts = key.split("/")
        return (
            key.startswith(layout.SWEEPS_PREFIX)
            and len(parts) >= 4
            and parts[2] == layout.CODE_DIR
            and bool(parts[3])
        )

    def describe(self) -> str:
        own = f"s3://{self.bucket}/{layout.DATA_PREFIX}..., s3://{self.bucket}/{layout.SWEEPS_PREFIX}<id>/"
        own += f"{layout.CODE_DIR}/..."
        others = ", ".join(f"s3://{b}/..." for b in self.data_buckets) or "none"
        return f"{own}, and the buckets of the stack's {DATA_BUCKETS_SETTING} setting ({others})"


def s3_inputs(spec: Any) -> Iterable[tuple[str, str]]:
    """``(field, s3 URI)`` of each input a job reads from S3: the data channel, a packed source dir."""
    if spec.data and str(spec.data).startswith("s3://"):
        yield "data", str(spec.data)
    source = getattr(spec.workload, "source_dir", None)
    if source and str(source).startswith("s3://"):
        yield "workload.source_dir", str(source)


def check_role_can_read(spec: Any, reads: RoleReads) -> None:
    """Raise :class:`SpecError` naming every ``s3://`` input of ``spec`` the training role cannot read."""
    errors = []
    for field, uri in s3_inputs(spec):
        if not reads.allows(uri):
            bucket = uri.removeprefix("s3://").partition("/")[0]
            errors.append(
                (
                    field,
                    f"{uri}: the training role cannot read it (every job would fail with AccessDenied); "
                    f"it may read {reads.describe()}. "
                    f"Copy it below s3://{reads.bucket}/{layout.DATA_PREFIX}, "
                    f"or add {bucket} to {DATA_BUCKETS_SETTING} and redeploy "
                    f"(`npx cdk deploy -c {DATA_BUCKETS_SETTING}=...,{bucket}`)",
                )
            )
    if errors:
        raise SpecError(
            "invalid sweep spec: " + "; ".join(f"{field}: {problem}" for field, problem in errors), errors
        )
