"""A sweep's S3 prefix copied to its folder as it changes, so that a process killed at any moment leaves
on disk every result that existed a moment before (local mode, whose bucket dies with the process).

Each pass lists ``sweeps/<id>/`` and fetches the objects whose ETag changed since the last pass, each
written atomically (:mod:`trainsweep.atomicio`), ``jobs.json`` last: a folder whose ``jobs.json`` holds
final cells also holds the run records they were made from. During a resume, PlanSweep and
AggregateSweep rewrite the sweep's plan and report for each reduced spec: only the runs' own files
(raw logs, run records, per-run timings) are copied then; the rest comes with the final download.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from trainsweep import atomicio, layout
from trainsweep.aws import s3 as s3io

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

LOG = logging.getLogger(__name__)
BUSY_FACTOR = 4.0
RUN_FILES = (
    f"{layout.LOGS_DIR}/",
    f"{layout.RESULTS_DIR}/{layout.RUNS_DIR}/",
    f"{layout.RESULTS_DIR}/{layout.EXECUTION_TIMES_DIR}/",
)
"""What a resume copies as it goes (relative to the sweep's prefix): each run's own files."""
LAST = (layout.JOBS_JSON,)
"""Written after everything else of a pass: its final cells name run records that must be there."""


def is_durable(rel: str) -> bool:
    """The files whose loss after a power cut would mislead a resume: fsynced as they are written."""
    runs = f"{layout.RESULTS_DIR}/{layout.RUNS_DIR}/"
    return rel in (layout.JOBS_JSON, layout.SPEC_JSON) or rel.startswith(runs)


def fetch_keys(
    s3: S3Client, bucket: str, prefix: str, keys: list[str], dest: Path, workers: int = 8
) -> list[Path]:
    """Download ``keys`` (below ``prefix``) to ``dest`` with the same relative layout, each file
    atomically, :data:`LAST` after all others; a key deleted since it was listed is skipped."""
    from trainsweep.errors import TrainsweepError

    root = dest.resolve()

    def one(key: str) -> Path:
        rel = key[len(prefix) :]
        target = dest / rel
        if not target.resolve().is_relative_to(root):
            raise TrainsweepError(f"refusing to write outside {dest}: {key}")
        opened = s3io.open_chunks(s3, bucket, key)  # streamed: a model archive can be gigabytes
        if opened is not None:
            atomicio.write_chunks(target, opened[0], durable=is_durable(rel))
        return target

    dest.mkdir(parents=True, exist_ok=True)
    first = [k for k in keys if k[len(prefix) :] not in LAST]
    last = [k for k in keys if k[len(prefix) :] in LAST]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        written = list(pool.map(one, first))
    return written + [one(k) for k in last]


class SweepMirror:
    """Copies a sweep's prefix to ``dest`` every ``interval_s`` in a background thread.

    Args:
        s3, bucket, sweep_id: where the sweep lives.
        dest: the sweep's folder.
        accept: which relative names to copy (default: all but models and checkpoints).
    """

    def __init__(
        self,
        s3: S3Client,
        bucket: str,
        sweep_id: str,
        dest: Path,
        *,
        interval_s: float = 1.0,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        self.s3, self.bucket, self.sweep_id, self.dest = s3, bucket, sweep_id, dest
        self.prefix = layout.sweep_prefix(sweep_id)
        self.interval_s = interval_s
        self.accept = accept or (lambda rel: True)
        self._seen: dict[str, str] = {}  # key -> ETag copied
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _listing(self) -> dict[str, str]:
        found: dict[str, str] = {}
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix)
        for page in pages:
            for o in page.get("Contents", []):
                key = o["Key"]
                rel = key[len(self.prefix) :]
                if key.endswith("/") or layout.is_model_key(self.sweep_id, key) or not self.accept(rel):
                    continue
                found[key] = str(o.get("ETag", ""))
        return found

    def mark_current(self) -> None:
        """Take what the prefix holds now as copied (a resume's upload of the folder itself)."""
        with self._lock:
            self._seen.update(self._listing())

    def sync(self) -> int:
        """One pass; returns how many files were written."""
        with self._lock:
            listing = self._listing()
            changed = [k for k, tag in listing.items() if self._seen.get(k) != tag]
            if changed:
                fetch_keys(self.s3, self.bucket, self.prefix, changed, self.dest, workers=4)
                self._seen.update({k: listing[k] for k in changed})
            return len(changed)

    def start(self) -> SweepMirror:
        self._thread = threading.Thread(target=self._loop, name=f"mirror-{self.sweep_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (its pass in progress ends first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        pause = self.interval_s
        while not self._stop.wait(pause):
            t0 = time.monotonic()
            try:
                self.sync()
            except Exception as exc:  # the embedded AWS stopping, a full disk: the next pass tries again
                LOG.debug("mirror pass failed: %s", exc)
            # A large sweep's listing takes a while: passes take at most a fifth of the time.
            pause = max(self.interval_s, BUSY_FACTOR * (time.monotonic() - t0))


def run_files_only(rel: str) -> bool:
    """The ``accept`` of a resume's mirror (:data:`RUN_FILES`)."""
    return rel.startswith(RUN_FILES)
