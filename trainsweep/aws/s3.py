"""Small S3 helpers the handlers share. Clients are passed in (moto in tests, boto3 in Lambda)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

PART_SIZE = 8 << 20
"""Bytes :func:`put_stream` holds before it sends them as one part of a multipart upload (S3's minimum
part is 5 MiB; at most 10,000 parts: objects up to 80 GB)."""

CONTENT_TYPES = {
    ".json": "application/json",
    ".csv": "text/csv",
    ".html": "text/html; charset=utf-8",
    ".png": "image/png",
    ".summary": "text/plain; charset=utf-8",
    ".log": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}


def content_type(key: str) -> str:
    for ext, ctype in CONTENT_TYPES.items():
        if key.endswith(ext):
            return ctype
    return "application/octet-stream"


def is_missing(exc: Any) -> bool:
    """Whether a botocore ClientError says the object does not exist."""
    return exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


def exists(s3: S3Client, bucket: str, key: str) -> bool:
    """True if the object exists; other errors (access denied) propagate."""
    return etag(s3, bucket, key) is not None


def get_bytes(s3: S3Client, bucket: str, key: str) -> bytes | None:
    """The object's bytes, or None if it does not exist."""
    from botocore.exceptions import ClientError

    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise


def open_chunks(
    s3: S3Client, bucket: str, key: str, chunk_size: int = 1 << 20
) -> tuple[Iterator[bytes], str] | None:
    """Stream an object in chunks (logs can be large), with the ETag of the version being read; None if it
    does not exist."""
    from botocore.exceptions import ClientError

    try:
        response = s3.get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise
    body = response["Body"]
    return iter(lambda: body.read(chunk_size), b""), str(response.get("ETag", ""))


def etag(s3: S3Client, bucket: str, key: str) -> str | None:
    """The object's current ETag; None if it does not exist."""
    from botocore.exceptions import ClientError

    try:
        return str(s3.head_object(Bucket=bucket, Key=key).get("ETag", ""))
    except ClientError as exc:
        if is_missing(exc):
            return None
        raise


def get_json(s3: S3Client, bucket: str, key: str) -> Any | None:
    data = get_bytes(s3, bucket, key)
    return None if data is None else json.loads(data)


def put_bytes(s3: S3Client, bucket: str, key: str, data: bytes, *, tagging: str | None = None) -> None:
    extra: dict[str, Any] = {"Tagging": tagging} if tagging else {}
    s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type(key), **extra)


def put_stream(
    s3: S3Client, bucket: str, key: str, chunks: Iterable[bytes], *, tagging: str | None = None
) -> int:
    """Write the concatenation of ``chunks`` to ``key`` holding at most about :data:`PART_SIZE` bytes of
    it at a time; returns its size. What fits in one part is one ``put_object``; more is a multipart
    upload, aborted (nothing written) when reading the chunks or sending a part fails."""
    part_size = PART_SIZE
    buf = bytearray()
    pieces = iter(chunks)
    for piece in pieces:
        buf += piece
        if len(buf) >= part_size:
            break
    else:
        put_bytes(s3, bucket, key, bytes(buf), tagging=tagging)
        return len(buf)
    extra: dict[str, Any] = {"Tagging": tagging} if tagging else {}
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, ContentType=content_type(key), **extra)
    upload_id = upload["UploadId"]
    parts: list[CompletedPartTypeDef] = []
    size = 0
    try:
        while buf:
            while len(buf) < part_size and (more := next(pieces, None)) is not None:
                buf += more
            body = bytes(memoryview(buf)[:part_size])  # one copy of the part, not three
            del buf[:part_size]
            number = len(parts) + 1
            sent = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body)
            parts.append({"ETag": sent["ETag"], "PartNumber": number})
            size += len(body)
        s3.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    except BaseException:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise
    return size


def put_json(s3: S3Client, bucket: str, key: str, value: Any) -> None:
    """Deterministic JSON (sorted keys) so a replayed event rewrites the same bytes."""
    put_bytes(s3, bucket, key, json.dumps(value, indent=1, sort_keys=True, default=str).encode())


def put_all(s3: S3Client, bucket: str, prefix: str, files: Mapping[str, bytes]) -> list[str]:
    """Write ``prefix + relative path`` for each file; returns the keys written, in a stable order."""
    keys = []
    for rel in sorted(files):
        key = f"{prefix}{rel}"
        put_bytes(s3, bucket, key, files[rel])
        keys.append(key)
    return keys


def put_all_streamed(
    s3: S3Client, bucket: str, prefix: str, files: Iterable[tuple[str, Iterable[bytes]]]
) -> list[str]:
    """:func:`put_all` for files given as ``(relative path, blocks of bytes)`` made while they are sent
    (:func:`trainsweep.artefacts.iter_run_artefacts`): each goes through :func:`put_stream`, so at most
    about one upload part is held at a time, whatever the files' sizes. Returns the keys, sorted."""
    keys = []
    for rel, blocks in files:
        key = f"{prefix}{rel}"
        put_stream(s3, bucket, key, blocks)
        keys.append(key)
    return sorted(keys)


def list_keys(s3: S3Client, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys
