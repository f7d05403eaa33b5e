"""Delivers run logs to S3 while the job runs, so that a killed job still leaves its log.

A background thread uploads every log that changed since its last upload, every ``period_s`` seconds;
:meth:`LogUploader.flush` uploads once more (at exit, on failure, on SIGTERM). The S3 client is created
lazily on first use (boto3 honours ``AWS_ENDPOINT_URL``: local mode points it at its moto server) and
can be injected. Each upload is one ``PutObject`` with the log's SHA-256 checksum, which S3 keeps as the
whole object's (ParseRun's resumed parse relies on it). Upload errors are reported and retried at the
next period; they never stop training.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsweep import layout


def log_object_key(prefix: str, run_name: str) -> str:
    """``<prefix><run-name>.log``: the prefix is ``layout.logs_prefix(sweep_id)`` for sweep jobs."""
    return f"{prefix}{run_name}{layout.TRIGGER_SUFFIX_LOG}"


def _default_client() -> Any:
    import boto3  # the container's only AWS call; imported lazily so that the core stays boto3-free

    return boto3.client("s3")


class LogUploader:
    """Uploads the log files in ``logs_dir`` (``<run-name>.log``) to ``s3://bucket/<prefix><run-name>.log``."""

    def __init__(
        self,
        *,
        bucket: str | None,
        prefix: str,
        logs_dir: Path,
        period_s: float = 30.0,
        client_factory: Callable[[], Any] = _default_client,
    ):
        self.bucket = bucket
        self.prefix = prefix
        self.logs_dir = Path(logs_dir)
        self.period_s = period_s
        self._client_factory = client_factory
        self._client: Any = None
        self._sent: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.uploads = 0
        self.errors: list[str] = []

    @property
    def enabled(self) -> bool:
        return bool(self.bucket)

    def start(self) -> None:
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="log-uploader", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.flush()

    def stop(self) -> None:
        """Stop the thread and upload what changed one last time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.period_s + 30)
            self._thread = None
        self.flush()

    def flush(self) -> int:
        """Upload every log that changed since its last upload; returns how many were uploaded."""
        if not self.enabled:
            return 0
        done = 0
        with self._lock:
            for path in sorted(self.logs_dir.glob(f"*{layout.TRIGGER_SUFFIX_LOG}")):
                try:
                    st = path.stat()
                    stamp = (st.st_size, st.st_mtime_ns)
                    if self._sent.get(path.name) == stamp:
                        continue
                    body = path.read_bytes()
                    if self._client is None:
                        self._client = self._client_factory()
                    key = log_object_key(self.prefix, path.name[: -len(layout.TRIGGER_SUFFIX_LOG)])
                    self._client.put_object(
                        Bucket=self.bucket,
                        Key=key,
                        Body=body,
                        ContentType="text/plain",
                        Tagging=layout.RAW_LOG_TAGGING,  # lets the bucket's raw-log lifecycle rule expire it
                        # S3 checks and keeps the log's SHA-256: ParseRun reads only a new version's
                        # new bytes and takes the whole log's hash from S3 (trainsweep.aws.growing).
                        ChecksumAlgorithm=layout.RAW_LOG_CHECKSUM,
                    )
                    self._sent[path.name] = (len(body), st.st_mtime_ns) if len(body) == st.st_size else stamp
                    self.uploads += 1
                    done += 1
                except Exception as e:  # keep training; retry at the next period
                    msg = f"log upload of {path.name} to s3://{self.bucket}/{self.prefix} failed: {e}"
                    self.errors.append(msg)
                    print(msg, file=sys.stderr, flush=True)
        return done
