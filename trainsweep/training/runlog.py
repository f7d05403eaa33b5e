"""One run's log file: ``:::MLLOG`` events next to the seeds' human-readable lines, flushed as written.

Every line is one ``os.write`` on a file opened with ``O_APPEND``, so several ranks (and the supervisor)
can append to the same log without tearing lines.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from trainsweep.logs import mllog


class RunLog:
    """Appends lines to ``path``; rank 0 also echoes them to stdout (CloudWatch)."""

    def __init__(self, path: Path, *, rank: int = 0, echo: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.echo = echo and rank == 0
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        """A raw line (the seeds' format); no trailing newline needed."""
        data = (text.rstrip("\n") + "\n").encode()
        if self._fd is not None:
            os.write(self._fd, data)
        if self.echo:
            sys.stdout.write(data.decode())
            sys.stdout.flush()

    def event(
        self,
        key: str,
        value: Any = None,
        *,
        event_type: str = mllog.POINT,
        time_ms: float | None = None,
        **metadata: Any,
    ) -> None:
        """An ``:::MLLOG`` line; ``rank`` is added to the metadata."""
        meta = {"rank": self.rank, **metadata}
        self.line(mllog.format_line(key, value, event_type=event_type, metadata=meta, time_ms=time_ms))

    def real_time(self) -> None:
        self.line(f"Real time: {time.time()}")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def has_event(path: Path, key: str) -> bool:
    """True when the log at ``path`` already holds an MLLOG event with this key."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    return f'"key": "{key}"'.encode() in data
