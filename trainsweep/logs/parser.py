"""``parse()``: one log, any dialect, streamed, into one :class:`RunTimings` plus its problems.

The log is read in chunks; each chunk is cut at its last newline so that every dialect reader sees whole
lines. Readers scan a region with one compiled bytes regex each and decode only what matched. Every
reader of the dialect table (:mod:`trainsweep.logs.dialects`) sees every region; the dialect is chosen at
the end (the most steps, then MLLOG > MO833 > cloud-ML), so a log that carries MLLOG events next to the
seeds' human-readable lines is read once, from the structured events. A user's ``log_format`` pattern
(:mod:`trainsweep.logs.pattern`) replaces the table: only it reads the log.
"""

from __future__ import annotations

import codecs
import hashlib
import queue
import re
import threading
from pathlib import Path
from typing import Any

from trainsweep.logs import checks, dialects, mllog, native
from trainsweep.logs.dialects import DialectReader
from trainsweep.logs.model import Problem, RunTimings
from trainsweep.logs.pattern import PatternReader, compile_log_format
from trainsweep.logs.source import iter_chunks, source_name, source_path

MAX_LINE = 1 << 22
"""A line longer than this (4 MiB, no newline) is cut: it cannot be a log line worth reading whole."""

_TEXT_SAMPLE = 1 << 16
_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\t\n\r\x08\x0c\x1b"
_LOG_SUFFIXES = (".txt", ".out", ".log")


class _Sha256:
    """The log's SHA-256, taken on a second thread from the second chunk on, while the readers parse
    (hashlib lets go of the GIL for large buffers): on a machine with a spare core the hash costs the
    parse no wall time. Chunks are handed over in order through a small bounded queue (memory stays
    bounded); one that is not ``bytes`` (a view of the caller's buffer) is copied first."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] | None = None
        self._thread: threading.Thread | None = None
        self._chunks = 0

    def _run(self) -> None:
        assert self._queue is not None
        take, update = self._queue.get, self._sha.update
        while (chunk := take()) is not None:
            update(chunk)

    def update(self, chunk: bytes | memoryview) -> None:
        self._chunks += 1
        if self._chunks == 1:
            self._sha.update(chunk)  # a one-chunk log (most of them) starts no thread
            return
        if self._queue is None:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._run, name="trainsweep-sha256", daemon=True)
            self._thread.start()
        self._queue.put(chunk if type(chunk) is bytes else bytes(chunk))

    def close(self) -> None:
        """Hash what is queued and end the thread (if one started)."""
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None

    def hexdigest(self) -> str:
        self.close()
        return self._sha.hexdigest()


def parse(
    source: Any,
    *,
    name: str | None = None,
    computing_system: str | None = None,
    batch_size: int | None = None,
    run_index: int | None = None,
    train_samples: int | None = None,
    log_format: str | re.Pattern[str] | None = None,
) -> RunTimings:
    """Parse one training log of any supported dialect into a :class:`RunTimings`.

    Args:
        source: a path, ``bytes``, a binary file object or an iterable of byte chunks.
        name: the run's name; default: the source's file name without its extension.
        computing_system: the seed VMTYPE (``p3-1``); default: from a ``result-VMTYPE-BS-eN`` or
            trainsweep job name.
        batch_size: default: from the name.
        run_index: the repetition ``N``; default: from the name.
        train_samples: training-set size used to check steps per epoch; default: what the log says.
        log_format: a spec's ``workload.log_format`` (text or compiled): read the log with this pattern
            only (:mod:`trainsweep.logs.pattern`) instead of sniffing the built-in dialects.

    Returns:
        The run. Problems with the content are in ``run.problems`` and ``run.status``; this function
        does not raise on content. A source that cannot be read at all gives status ``unreadable``.

    Raises:
        ValueError: ``log_format`` is not a usable pattern (the spec's validation refuses such a text).
    """
    path = source_path(source)
    session = LogParse(
        name if name is not None else source_name(source),
        naming_path=path if name is None else None,
        path=path,
        computing_system=computing_system,
        batch_size=batch_size,
        run_index=run_index,
        train_samples=train_samples,
        log_format=log_format,
    )
    try:
        for chunk in iter_chunks(source):
            session.feed(chunk)
    except (OSError, TypeError, ValueError) as exc:
        return session.unreadable(exc)
    except BaseException:
        session.close()  # a reader's crash: the hashing thread ends with it
        raise
    return session.finish()


class LogParse:
    """One log being read, chunk after chunk: :func:`parse` is a session fed every chunk, then finished.

    A session that does not hash the log (``hash_bytes=False``; :attr:`run` ``.sha256`` is given to
    :meth:`finish` instead) pickles between two chunks: :mod:`trainsweep.logs.resume` keeps it to
    read a growing log's new bytes only. Everything a later chunk or :meth:`finish` needs is an
    attribute of the session or of its readers, so a session unpickled and fed the rest of a log
    gives the run that one session fed the whole log gives.
    """

    def __init__(
        self,
        file_name: str | None,
        *,
        naming_path: Path | None = None,
        path: Path | None = None,
        computing_system: str | None = None,
        batch_size: int | None = None,
        run_index: int | None = None,
        train_samples: int | None = None,
        log_format: str | re.Pattern[str] | None = None,
        hash_bytes: bool = True,
    ) -> None:
        compiled = compile_log_format(log_format) if isinstance(log_format, str) else log_format
        run = self.run = RunTimings(name=_run_name(file_name))
        naming = self.naming = checks.NameFacts.infer(file_name, naming_path)
        run.computing_system = computing_system if computing_system is not None else naming.vmtype
        run.batch_size = batch_size if batch_size is not None else naming.batch_size
        run.run_index = run_index if run_index is not None else naming.run
        if naming.platform is not None:
            run.extra[mllog.PLATFORM] = naming.platform
        self.path = path
        self.train_samples = train_samples
        self.pattern = PatternReader(compiled) if compiled is not None else None
        self.readers: tuple[DialectReader, ...] = (
            (self.pattern,) if self.pattern is not None else dialects.readers()
        )
        self._sha = _Sha256() if hash_bytes else None
        self.text = _TextCheck()
        self.carry = b"\n"  # the virtual newline before the first line
        self.newlines_before = 0
        self.newlines = 0
        self.last_byte = b""

    def __getstate__(self) -> dict[str, Any]:
        if self._sha is not None:
            raise TypeError("a session that hashes the log cannot be pickled (hash_bytes=False)")
        return self.__dict__

    def feed(self, chunk: bytes) -> None:
        """Read the next chunk of the log (raises what a reader raises on a chunk it cannot take)."""
        run, text, carry = self.run, self.text, self.carry
        if self._sha is not None:
            self._sha.update(chunk)
        run.bytes_read += len(chunk)
        self.newlines += (native.count_newlines or _count_newlines)(chunk)
        self.last_byte = chunk[-1:]
        text.feed(chunk, self.newlines_before + carry.count(b"\n"))
        # The carry holds one newline, its first byte: the region ends at the chunk's last newline.
        cut = chunk.rfind(b"\n")
        cut_long_line = cut < 0 and len(carry) + len(chunk) > MAX_LINE
        if cut < 0 and not cut_long_line:
            self.carry = carry + chunk
            return
        # The region keeps the newline that ends its last line (the carry starts with it too): a value
        # must be followed by its line end, and the last line of a log cut short has none. It is
        # made with one copy (join of a view); the carry is the rest, from that newline on.
        if cut_long_line:
            text.long_line = True
            region, self.carry = carry + chunk, b"\n"
        else:
            region, self.carry = b"".join((carry, memoryview(chunk)[: cut + 1])), bytes(chunk[cut:])
        for r in self.readers:
            r.feed(region, self.newlines_before)
        # Newlines before the next region: all read so far (plus the virtual first one) but the carry's.
        self.newlines_before = self.newlines + 1 - self.carry.count(b"\n")
        if cut_long_line:
            self.newlines_before -= 1  # the b"\n" put in front of the rest is not in the log

    def close(self) -> None:
        """End the hashing thread, if any (a session given up on)."""
        if self._sha is not None:
            self._sha.close()

    def unreadable(self, exc: Exception) -> RunTimings:
        """The run of a source whose bytes could not all be read (``exc``: why)."""
        run = self.run
        run.add_problem("read-error", f"the log could not be read: {exc}", None, "error")
        run.status = "unreadable"
        run.sha256 = self._sha.hexdigest() if self._sha is not None else None
        run.lines_read = self.newlines
        return run

    def finish(self, sha256: str | None = None) -> RunTimings:
        """The run of every byte fed (the session is spent). ``sha256``: the log's SHA-256 (hex) when
        the session does not hash (``hash_bytes=False``)."""
        run = self.run
        # every byte is read: the hashing thread, if any, ends here
        run.sha256 = self._sha.hexdigest() if self._sha is not None else sha256
        if len(self.carry) > 1:
            for r in self.readers:
                r.feed(self.carry, self.newlines_before)
        self.text.finish()
        run.lines_read = self.newlines + (1 if self.last_byte not in (b"", b"\n") else 0)
        for r in self.readers:
            r.finish()

        run.problems.extend(self.text.problems)
        chosen = self.pattern if self.pattern is not None else dialects.choose(self.readers)
        if chosen is not None:
            chosen.to_run(run, self.path)
        for r in self.readers:
            run.problems.extend(r.problems)
        train_samples = self.train_samples
        if train_samples is not None:
            run.header.train_samples = run.header.train_samples or train_samples
        checks.check_run(
            run,
            self.naming,
            self.text,
            chosen,
            train_samples,
            pattern_lines=self.pattern.matched_lines if self.pattern is not None else None,
        )
        run.problems.sort(key=lambda p: (p.line is not None, p.line or 0))
        return run


def _count_newlines(chunk: bytes) -> int:
    return chunk.count(b"\n")


def _run_name(file_name: str | None) -> str:
    if not file_name:
        return "run"
    base = Path(file_name).name
    for suffix in _LOG_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)] or "run"
    return base


class _TextCheck:
    """Is the log text? Binary garbage, undecodable bytes, over-long lines, empty content."""

    def __init__(self) -> None:
        self.sampled = 0
        self.other = 0
        self.nonblank = False
        self.long_line = False
        self.undecodable_line: int | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._decoding = True
        self.problems: list[Problem] = []

    def feed(self, chunk: bytes, newlines_before: int) -> None:
        if not self.nonblank and chunk.strip():
            self.nonblank = True
        if self.sampled < _TEXT_SAMPLE:
            sample = chunk[: _TEXT_SAMPLE - self.sampled]
            self.sampled += len(sample)
            self.other += len(sample.translate(None, _TEXT_BYTES))
        if self._decoding and not (chunk.isascii() and not self._pending()):
            # the decoder's offsets count the bytes it kept from the previous chunk (a character cut in two)
            carried = len(self._decoder.getstate()[0])
            try:
                self._decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                self._decoding = False
                self.undecodable_line = newlines_before + chunk.count(b"\n", 0, max(0, exc.start - carried))

    def _pending(self) -> bool:
        return bool(self._decoder.getstate()[0])

    def finish(self) -> None:
        if self._decoding:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self._decoding = False
                self.undecodable_line = None
        if self.undecodable_line is not None or not self._decoding:
            self.problems.append(
                Problem(
                    "undecodable-bytes",
                    "the log has bytes that are not UTF-8 text (the first on this line); they are read as "
                    "they are: a line that holds one is still read when its literal and numbers are whole, "
                    "else it is listed as a bad line",
                    self.undecodable_line,
                )
            )
        if self.long_line:
            self.problems.append(
                Problem("long-line", f"a line is longer than {MAX_LINE} bytes; read in pieces")
            )

    @property
    def binary(self) -> bool:
        return self.sampled > 0 and self.other > max(8, self.sampled // 10)
