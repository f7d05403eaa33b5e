"""Reading a small input file of any kind with a bound on its size and on the wait for its data.

A path the user gives may name a regular file, a pipe (``<(...)``, ``/dev/stdin``), a device
(``/dev/zero``) or a FIFO that nobody writes to. :func:`read_bounded` reads each of them the same way: at
most ``limit + 1`` bytes, so that an endless source is refused after reading at most a little more than
the limit, and never waits longer than ``timeout_s`` for data that does not come.
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

_CHUNK = 64 * 1024


class TooLargeError(Exception):
    """The source holds more than the limit."""

    def __init__(self, path: Path, limit: int) -> None:
        super().__init__(f"more than {limit:,} bytes")
        self.path = path
        self.limit = limit


class ReadTimeoutError(OSError):
    """No data (nor the end of it) came within the timeout, e.g. a FIFO that nobody writes to."""


def read_bounded(path: Path, limit: int, *, timeout_s: float) -> bytes:
    """Read all of ``path``, whatever kind of file it is, when it holds at most ``limit`` bytes.

    Raises:
        TooLargeError: more than ``limit`` bytes (at most ``limit + 1`` of them were read).
        ReadTimeoutError: nothing came for ``timeout_s`` seconds before the end of the data.
        OSError: the path cannot be opened or read (the system's words).
    """
    # Non-blocking open: opening a FIFO for reading would otherwise wait for a writer without end.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        return _read_fd(fd, path, limit, deadline=time.monotonic() + timeout_s, timeout_s=timeout_s)
    finally:
        os.close(fd)


def _read_fd(fd: int, path: Path, limit: int, *, deadline: float, timeout_s: float) -> bytes:
    import stat

    chunks: list[bytes] = []
    size = 0
    # A FIFO read in non-blocking mode reads as ended while no writer has opened it yet: wait for one
    # (poll says POLLHUP once a writer has come and gone) instead of taking it as empty.
    waiting_for_writer = stat.S_ISFIFO(os.fstat(fd).st_mode)
    while size <= limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        except BlockingIOError:  # a writer is there, no data yet
            _wait(fd, deadline, timeout_s)
            continue
        if not chunk and waiting_for_writer and size == 0:
            waiting_for_writer = not _wait(fd, deadline, timeout_s)
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    raise TooLargeError(path, limit)


def _wait(fd: int, deadline: float, timeout_s: float) -> bool:
    """Wait for data on ``fd`` until the deadline; True when the writer has hung up."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    left = deadline - time.monotonic()
    events = poller.poll(max(0.0, left) * 1000) if left > 0 else []
    if not events:
        raise ReadTimeoutError(f"no data came within {timeout_s:g} s (a FIFO or pipe that nobody writes to?)")
    return any(mask & select.POLLHUP for _, mask in events)
