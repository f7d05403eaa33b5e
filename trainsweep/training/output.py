"""A cell's output: passed through to the job's own stdout and stderr, kept whole in a file, and read.

The cell's process (and every process it starts: a launcher's ranks, a loader's workers) writes to two
pipes. A reader thread per pipe copies each line to the supervisor's own stream (CloudWatch in the
cloud), appends it to the cell's output file (:func:`trainsweep.training.contract.cell_output_path`),
keeps the last lines of stderr, and hands the line to a listener (the metric definitions' matcher).

When the cell fails, :func:`script_words` turns the last lines of its stderr into what the script said,
as SageMaker's ``ExecuteUserScriptError`` does: the exception and its last frame when there is a Python
traceback, else the last lines (argparse's ``error:`` line, a shell's ``command not found``).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO

from trainsweep.logs import mllog

READ_BYTES = 64 * 1024
LINE_CHARS = 2000
LINE_BYTES = 4 * LINE_CHARS
"""A longer line reaches the file and the stream whole, but the listener and the tail get its first
:data:`LINE_CHARS` characters only."""
TAIL_LINES = 40
REASON_LINES = 5
REASON_CHARS = 900
OWN_PREFIX = "trainsweep: "
"""Lines trainsweep writes itself (the bootstrap's and the supervisor's): never the script's words."""

LineListener = Callable[[str, str], None]
"""(stream name ``stdout`` | ``stderr``, the line without its end) -> None; called from a reader thread."""

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+)$')
_TRACEBACK = "Traceback (most recent call last):"


class OutputCapture:
    """Reads a process's stdout and stderr pipes until both close (every writer has exited)."""

    def __init__(self, keep: Path | None, *, listener: LineListener | None = None,
                 passthrough: bool = True) -> None:  # fmt: skip
        self.keep = keep
        self.listener = listener
        self.passthrough = passthrough
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.listener_error: str | None = None
        self._file: BinaryIO | None = None
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        if keep is not None:
            keep.parent.mkdir(parents=True, exist_ok=True)
            self._file = keep.open("ab")

    def start(self, stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        for name, pipe, sink in (("stdout", stdout, sys.stdout), ("stderr", stderr, sys.stderr)):
            if pipe is None:
                continue
            t = threading.Thread(target=self._read, args=(name, pipe, sink), name=f"cell-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def _read(self, name: str, pipe: IO[bytes], sink: IO[str]) -> None:
        """Pass the pipe's bytes on as they come (a chunk at a time); split lines only where they are read:
        stderr (its tail) and, with a listener, both streams."""
        by_line = name == "stderr" or self.listener is not None
        pending = b""
        skipping = False  # inside a line longer than LINE_BYTES, whose start was read already
        with pipe:
            fd = pipe.fileno()
            while chunk := os.read(fd, READ_BYTES):
                self._pass(chunk, sink)
                if not by_line:
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    if not skipping:
                        self._line(name, raw)
                    skipping = False
                if len(pending) > LINE_BYTES and not skipping:
                    self._line(name, pending)
                    skipping, pending = True, b""
                elif skipping:
                    pending = b""
        if pending and not skipping:
            self._line(name, pending)

    def _pass(self, chunk: bytes, sink: IO[str]) -> None:
        if self.passthrough:
            try:
                sink.buffer.write(chunk)  # type: ignore[attr-defined]
                sink.flush()
            except (AttributeError, OSError, ValueError):
                pass  # a closed or replaced stream must not stop the reading (the pipe would fill)
        with self._lock:
            if self._file is not None:
                self._file.write(chunk)
                self._file.flush()

    def _line(self, name: str, raw: bytes) -> None:
        line = raw[:LINE_BYTES].decode(errors="replace").rstrip("\r")[:LINE_CHARS]
        if name == "stderr":
            self.stderr_tail.append(line)
        if self.listener is not None and self.listener_error is None:
            try:
                self.listener(name, line)
            except Exception as e:  # a bug in a listener must not stop the reading
                self.listener_error = f"{type(e).__name__}: {e}"

    def join(self, timeout: float) -> bool:
        """Wait for both pipes to close; False when a writer still holds one (a process that left the
        cell's process group)."""
        for t in self._threads:
            t.join(timeout)
        alive = any(t.is_alive() for t in self._threads)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        return not alive


def _own(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith(OWN_PREFIX) or s.startswith(mllog.TOKEN)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _frames(lines: list[str]) -> tuple[list[str], str | None]:
    """The frames of the traceback that starts at ``lines[0]`` (``file:line in func[: source]``) and its
    exception line (None when the traceback is cut short)."""
    frames: list[str] = []
    i = 1
    while i < len(lines):
        m = _FRAME.match(lines[i])
        if m:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            source = nxt.strip() if nxt[:1] in (" ", "\t") and not _FRAME.match(nxt) else ""
            if source and not source.strip("^~ "):
                source = ""  # Python 3.11's markers under the source, not the source
            where = f"{Path(m['file']).name}:{m['line']} in {m['func'].strip()}"
            frames.append(f"{where}: {source}" if source else where)
            i += 2 if source else 1
        elif lines[i][:1] in (" ", "\t") or not lines[i].strip():
            i += 1
        else:
            return frames, lines[i].strip()
    return frames, None


def last_frame(lines: list[str]) -> tuple[str, str | None] | None:
    """The last Python traceback in ``lines``: (its exception line, where it was raised: the last frame,
    and the one that called it when the last has no source, like code run by ``exec``; None when it has
    no frame); None when there is no traceback."""
    start = max((i for i, ln in enumerate(lines) if ln.strip() == _TRACEBACK), default=None)
    if start is None:
        return None
    frames, exception = _frames(lines[start:])
    if exception is None:
        return None
    if not frames:
        return exception, None
    where = frames[-1]
    if ": " not in where and len(frames) > 1:
        where += f", called from {frames[-2]}"
    return exception, where


def script_words(stderr_tail: list[str]) -> str | None:
    """What the script said last on stderr, for a failure reason; None when it said nothing.

    A Python traceback gives its exception and last frame; otherwise the last :data:`REASON_LINES`
    lines, joined by `` | `` (trainsweep's own lines and ``:::MLLOG`` events left out).
    """
    lines = [ln for ln in stderr_tail if not _own(ln)]
    if not lines:
        return None
    tb = last_frame(lines)
    if tb is not None:
        exception, frame = tb
        return _clip(f"{exception} (at {frame})" if frame else exception, REASON_CHARS)
    kept: list[str] = []
    size = 0
    for ln in reversed(lines[-REASON_LINES:]):
        ln = _clip(ln.strip(), 300)
        if kept and size + len(ln) > REASON_CHARS:
            break
        kept.insert(0, ln)
        size += len(ln) + 3
    return " | ".join(kept)


def _same_exception(reason: str, exception: str) -> bool:
    """Whether ``reason`` (``Type: message``) is the traceback's ``exception`` line (``pkg.Type: ...``)."""
    said, raised = reason.split(":", 1)[0].strip(), exception.split(":", 1)[0].strip()
    return bool(said) and (said == raised or raised.endswith("." + said))


def with_script_words(reason: str, stderr_tail: list[str]) -> str:
    """``reason`` with what the script said (:func:`script_words`): the exception's last frame when the
    reason is that exception, else ``; the script said: ...`` (unless the reason says it already)."""
    tb = last_frame([ln for ln in stderr_tail if not _own(ln)])
    if tb is not None and _same_exception(reason, tb[0]):
        exception = tb[0] if len(tb[0]) > len(reason.strip()) else reason.strip()
        return _clip(f"{exception} (at {tb[1]})" if tb[1] else exception, 2 * REASON_CHARS)
    words = script_words(stderr_tail)
    if not words or words in reason:
        return reason
    return f"{reason}; the script said: {words}"
