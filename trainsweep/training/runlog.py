"""One run's log file: ``:::MLLOG`` events next to the seeds' human-readable lines, written as they come.

Every line is one ``os.write`` on a file opened with ``O_APPEND``, so several ranks (and the supervisor)
can append to the same log without tearing lines.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainsweep.logs import mllog

STDOUT_ONLY = Path("-")
"""The path of a log that has no file, only its echo (:class:`StdoutLog`)."""
ECHO_HOLD_BYTES = 64 * 1024
ECHO_HOLD_SECONDS = 1.0
"""Per-step lines are echoed to stdout in blocks of about ECHO_HOLD_BYTES, at least every
ECHO_HOLD_SECONDS (a slow loop still shows its progress), and with the next other line."""


class RunLog:
    """Appends lines to ``path``; rank 0 also echoes them to stdout (CloudWatch)."""

    def __init__(self, path: Path, *, rank: int = 0, echo: bool = True):
        self.path = Path(path)
        self.rank = rank
        self.echo = echo and rank == 0
        self._fd: int | None = None
        if self.path != STDOUT_ONLY:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._held: list[str] = []  # per-step lines not echoed yet
        self._held_bytes = 0
        self._echoed_at = time.monotonic()

    def line(self, text: str) -> None:
        """A raw line (the seeds' format); no trailing newline needed."""
        self.lines((text,))

    def lines(self, texts: Sequence[str], *, flush: bool = True) -> None:
        """Several lines in one ``os.write`` (one step's event and its legacy line stay together); the
        echo is flushed unless ``flush`` is False (per-step lines: the next other line, or close, flushes
        them, in order, so a fast loop does not pay a flush to stdout per step)."""
        self._write("".join(t.rstrip("\n") + "\n" for t in texts), flush)

    def _write(self, text: str, flush: bool) -> None:
        if self._fd is not None:
            os.write(self._fd, text.encode())
        if self.echo:
            # held here, not in sys.stdout: with PYTHONUNBUFFERED (as SageMaker's images set it) every
            # write to stdout is a system call
            self._held.append(text)
            self._held_bytes += len(text)
            if (
                flush
                or self._held_bytes >= ECHO_HOLD_BYTES
                or time.monotonic() - self._echoed_at >= ECHO_HOLD_SECONDS
            ):
                self._echo()

    def _echo(self) -> None:
        if self._held:
            sys.stdout.write("".join(self._held))
            self._held.clear()
            self._held_bytes = 0
        sys.stdout.flush()
        self._echoed_at = time.monotonic()

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

    def step(
        self, epoch: int, n: int, step_s: float, wait_s: float, compute_s: float, *, legacy: bool
    ) -> None:
        """One training step: its ``:::MLLOG`` event (:func:`mllog.format_step_line`) and, with ``legacy``,
        the seeds' line, in one write, echoed with the next other line."""
        event = mllog.format_step_line(epoch, n, step_s, wait_s, compute_s, self.rank)
        self._write(f"{event}\n{n} step training time: {step_s}s\n" if legacy else event + "\n", False)

    def real_time(self) -> None:
        self.line(f"Real time: {time.time()}")

    def close(self) -> None:
        if self.echo:
            self._echo()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StdoutLog(RunLog):
    """A run log that only prints, on every rank (outside a job the platform collects stdout)."""

    def __init__(self, *, rank: int = 0) -> None:
        super().__init__(STDOUT_ONLY, rank=rank)
        self.echo = True  # every rank


def has_event(path: Path, key: str) -> bool:
    """True when the log at ``path`` already holds an MLLOG event with this key."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    return f'"key": "{key}"'.encode() in data
