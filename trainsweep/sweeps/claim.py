"""One run per sweep folder: a new sweep claims a folder no other start has (its id gets a random suffix
when another start took the same one), and every run, new or resumed, holds ``<out>/<sweep-id>.lock``
while it runs.

The lock is an ``flock`` on that file: the kernel releases it when the process dies, however it dies, so
a lock file nobody holds is the mark of a run that was killed (a run that ends removes its file), and
``status`` can tell a running sweep from an interrupted one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from trainsweep.errors import LocalModeError

LOCK_SUFFIX = ".lock"
SUFFIX_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
SUFFIX_LENGTH = 4
SWEEP_ID_MAX = 80  # trainsweep.spec's limit on a sweep id
LOCK_RETRY_S = 0.5  # a `status` probing the lock holds it for an instant


def lock_path(out: Path, sweep_id: str) -> Path:
    """``<out>/<sweep-id>.lock``: beside the sweep's folder, so a resume does not upload it."""
    return Path(out) / f"{sweep_id}{LOCK_SUFFIX}"


def with_suffix(sweep_id: str) -> str:
    """``sweep_id`` with a random ``-xxxx`` (within the sweep id's length limit)."""
    tail = "-" + "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(SUFFIX_LENGTH))
    return sweep_id[: SWEEP_ID_MAX - len(tail)].rstrip("-") + tail


def claim_new(out: Path, sweep_id: str, attempts: int = 20) -> str:
    """Create ``out/<id>/`` for a new sweep and return the id: ``sweep_id`` if no other start has its
    folder (or lock, or log), else ``sweep_id`` with a random suffix. ``mkdir`` decides: of two starts
    racing for one folder, exactly one gets it."""
    Path(out).mkdir(parents=True, exist_ok=True)
    candidate = sweep_id
    for _ in range(attempts):
        taken = lock_path(out, candidate).exists() or (Path(out) / f"{candidate}.log").exists()
        if not taken:
            try:
                (Path(out) / candidate).mkdir()
                return candidate
            except FileExistsError:
                pass
        candidate = with_suffix(sweep_id)
    raise LocalModeError(
        f"cannot claim a folder for sweep {sweep_id!r} under {out}: every name tried is taken"
    )


@dataclass
class SweepLock:
    """The held lock of one run; :meth:`release` when the run ends."""

    path: Path
    handle: IO[str]

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        self.handle.close()  # closing releases the flock


def _holder(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def acquire(out: Path, sweep_id: str) -> SweepLock:
    """Hold ``<out>/<sweep-id>.lock`` for this process.

    Raises:
        LocalModeError: another process runs this sweep (its pid and start time are said).
    """
    import fcntl

    path = lock_path(out, sweep_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_RETRY_S
    while True:
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            who = _holder(path)
            raise LocalModeError(
                f"sweep {sweep_id!r} is being run by another trainsweep process (pid {who.get('pid', '?')}, "
                f"started {who.get('started', '?')}); wait for it to end, or resume it afterwards"
            ) from None
        # The file may have been removed (its run ended) between open and flock: lock the one on disk.
        try:
            same = path.stat().st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    handle.seek(0)
    handle.truncate()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    handle.write(json.dumps({"pid": os.getpid(), "started": started}) + "\n")
    handle.flush()
    return SweepLock(path, handle)


def run_state(out: Path, sweep_id: str) -> str | None:
    """``RUNNING`` while a process holds the sweep's lock, ``INTERRUPTED`` when its lock file is there
    but nobody holds it (the run was killed), None without a lock file."""
    import fcntl

    path = lock_path(out, sweep_id)
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return "RUNNING"
        return "INTERRUPTED"
