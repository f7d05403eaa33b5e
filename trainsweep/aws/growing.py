"""A running job's log, read from S3 where the last parse stopped: a ranged GET of its new bytes.

The training container re-uploads its whole log every 30 s with the log's SHA-256 as the object's
checksum (``PutObject(ChecksumAlgorithm="SHA256")``). ParseRun keeps its parse of the version it read
beside the run's outputs (:func:`trainsweep.layout.parse_state_key`, :mod:`trainsweep.logs.resume`) and
reads the next version from that offset on, so a job's uploads cost its log's length once, not once
per upload. The run it gives is the one a parse of the whole version gives: the same readers fed the
same bytes, and the run's ``sha256`` is the one S3 checked on upload.

The log is read from its first byte instead when the state is missing, unreadable, from another
parser or run, or the log shrank or was replaced (its bytes before the offset differ); a log without a
whole-object SHA-256 checksum (an older container's, a copied CloudWatch stream, a multipart upload) is
parsed as before (:func:`trainsweep.aws.runs.parse_object`) and keeps no state.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainsweep.aws import s3 as s3io
from trainsweep.logs import resume
from trainsweep.logs.source import CHUNK_SIZE

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from trainsweep.logs.model import RunTimings

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogVersion:
    """One version of a log object: its ETag, size and, when S3 keeps one, its whole SHA-256 (hex)."""

    etag: str
    size: int
    sha256: str | None


@dataclass
class GrowingParse:
    """What :func:`parse_growing` read: the run, the state to keep for the next version, and how."""

    run: RunTimings
    state: bytes
    version: LogVersion
    resumed_at: int
    """The offset the parse resumed from (0: the log was read from its first byte)."""
    why_full: str = ""
    """Why a state was not used (empty when the parse resumed, or there was no state)."""


def head_log(s3: S3Client, bucket: str, key: str) -> LogVersion | None:
    """The log's current version; None if it does not exist."""
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as exc:
        if s3io.is_missing(exc):
            return None
        raise
    sha = _whole_object_sha256(head)
    return LogVersion(str(head.get("ETag", "")), int(head.get("ContentLength", 0)), sha)


def _whole_object_sha256(head: Any) -> str | None:
    """The object's SHA-256 as hex when S3's checksum is of the whole object (a single PutObject); None
    for another algorithm or a multipart upload's checksum of its parts (``...-N``)."""
    value = head.get("ChecksumSHA256")
    if not value or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT" or "-" in value:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return digest.hex() if len(digest) == 32 else None


def parse_growing(
    s3: S3Client,
    bucket: str,
    key: str,
    state_key: str,
    run_name: str,
    log_format: str | None,
    version: LogVersion,
) -> GrowingParse | None:
    """Parse ``version`` of the log at ``key`` (it must have a :attr:`LogVersion.sha256`), from the
    state at ``state_key`` when it still applies; None when the log changed or went away meanwhile
    (a newer version's notification parses that one)."""
    if version.sha256 is None:
        raise ValueError(f"s3://{bucket}/{key} has no whole-object SHA-256: parse it whole")
    state, why = _read_state(s3, bucket, state_key, run_name, log_format)
    if state is not None and state.offset > version.size:
        why = f"the log shrank from {state.offset} to {version.size} bytes"
        state = None
    tail = b""
    body: Any = None
    if state is not None:
        body = _ranged_body(s3, bucket, key, version, state.offset - state.tail_len)
        if body is None:
            return None
        tail = _read_exactly(body, state.tail_len)
        if not state.tail_matches(tail):
            LOG.info("%s: its bytes before offset %d changed; reading it from the start", key, state.offset)
            body.close()
            state, why, tail = None, "the log was replaced (its bytes before the offset differ)", b""
    if state is None:
        body = _ranged_body(s3, bucket, key, version, 0)
        if body is None:
            return None
    session = state.session if state is not None else resume.start(run_name, log_format)
    offset = state.offset if state is not None else 0
    for chunk in iter(lambda: body.read(CHUNK_SIZE), b""):
        session.feed(chunk)
        tail = (tail + chunk[-resume.TAIL :])[-resume.TAIL :]
    kept = resume.dump(session, tail, run_name, log_format)
    if offset:
        LOG.info("%s: resumed at byte %d of %d", key, offset, version.size)
    else:
        LOG.info("%s: parsed from its first byte%s", key, f" ({why})" if why else "")
    return GrowingParse(session.finish(sha256=version.sha256), kept, version, offset, why)


class _Empty:
    """The body of an empty range (a version with no bytes after the offset)."""

    def read(self, _size: int = -1) -> bytes:
        return b""

    def close(self) -> None:
        pass


def _ranged_body(s3: S3Client, bucket: str, key: str, version: LogVersion, start: int) -> Any | None:
    """The streaming body of ``version``'s bytes from ``start`` on; None when that version is gone."""
    from botocore.exceptions import ClientError

    if start >= version.size:
        return _Empty()
    try:
        response = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-", IfMatch=version.etag)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if s3io.is_missing(exc) or code in ("PreconditionFailed", "412"):
            return None
        raise
    return response["Body"]


def _read_exactly(body: Any, size: int) -> bytes:
    parts, got = [], 0
    while got < size and (piece := body.read(size - got)):
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def _read_state(
    s3: S3Client, bucket: str, state_key: str, run_name: str, log_format: str | None
) -> tuple[resume.ParseState | None, str]:
    """The kept state, or None and why not (a state that cannot be read is a reason to parse whole)."""
    try:
        data = s3io.get_bytes(s3, bucket, state_key)
    except Exception as exc:  # the parse never depends on its state: read the log whole instead
        LOG.warning("s3://%s/%s cannot be read (%s); the log is read whole", bucket, state_key, exc)
        return None, f"the state cannot be read: {exc}"
    if data is None:
        return None, ""
    state, why = resume.load(data, run_name, log_format)
    if state is None:
        LOG.info("s3://%s/%s not used: %s", bucket, state_key, why)
    return state, why


def keep_state(s3: S3Client, bucket: str, state_key: str, parsed: GrowingParse) -> None:
    """Write the state for the next version; a failure costs the next parse its shortcut, no more."""
    try:
        s3.put_object(Bucket=bucket, Key=state_key, Body=parsed.state, ContentType="application/octet-stream")
    except Exception as exc:
        LOG.warning("s3://%s/%s not written (%s): the next version is read whole", bucket, state_key, exc)
