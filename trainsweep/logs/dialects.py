"""The log dialects as plug-ins: one signature, chosen by a table.

A dialect is a reader class in a module of its own (:mod:`.cloudml`, :mod:`.mo833`, :mod:`.mlperf`) that
implements :class:`DialectReader`. :data:`DIALECTS` lists the built-in ones: a log's session
(:class:`~trainsweep.logs.parser.LogParse`) makes one reader of each, feeds every reader every region of
the log (a log is read once, whatever its dialect), finishes them, and :func:`choose` picks the run's
dialect: the reader that read the most steps, a tie going to the lower ``precedence``. Only that reader
writes the run (``to_run``) and checks its shape (``check``); every reader's problems are the run's.

A spec's ``log_format`` (:class:`~trainsweep.logs.pattern.PatternReader`) is a reader of the same
signature that is not in the table: given, it replaces the table and is the run's dialect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from trainsweep.logs.cloudml import CloudMLReader
from trainsweep.logs.mlperf import MllogReader
from trainsweep.logs.mo833 import Mo833Reader
from trainsweep.logs.model import Problem, RunTimings


class DialectReader(Protocol):
    """What a dialect's reader implements (its constructor takes no argument)."""

    name: ClassVar[str]
    """The run's ``dialect`` when this reader is chosen (``cloud-ml``, ``mo833``, ``mllog``)."""
    precedence: ClassVar[int]
    """Who wins a tie of steps read: the lower number (MLLOG 0, MO833 1, cloud-ML 2)."""

    @property
    def problems(self) -> Iterable[Problem]:
        """What the reader found wrong, with 1-based line numbers (a :class:`~.limits.ProblemLog`
        bounds them per code)."""
        ...

    def feed(self, region: bytes, newlines_before: int) -> None:
        """Read a region: whole lines, starting at a newline (the first region's is virtual) and ending
        with its last line's newline (but for a log cut short); ``newlines_before`` is the number of
        newlines before the region in ``b"\\n" + log``, so the region's n-th line is that plus n. Never
        raises on content: a bad line is a problem."""
        ...

    def finish(self) -> None:
        """Settle what needs the whole log, once, after the last region."""
        ...

    def steps_read(self) -> int | None:
        """How many steps were read (all ranks together): 0 when lines of this dialect were recognised
        but no step, None when the log holds nothing of this dialect."""
        ...

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        """Write what was read into ``run``, ``run.dialect`` included (``path``: the log's, when it has
        one: an MLPerf result log's system description lies beside it)."""
        ...

    def check(self, run: RunTimings) -> bool:
        """Add the problems of the run's shape that are particular to this dialect (a log that starts
        mid-run, an epoch never closed, an early end); True when they make the run partial."""
        ...


DIALECTS: tuple[type[DialectReader], ...] = (CloudMLReader, Mo833Reader, MllogReader)
"""The built-in dialects, in the order they read each region and list their problems. A new dialect is a
module with its reader class, added here with its ``precedence`` (docs/log-formats.md, "Adding a
dialect")."""


def readers() -> tuple[DialectReader, ...]:
    """A fresh reader of every dialect of :data:`DIALECTS`, in its order."""
    return tuple(dialect() for dialect in DIALECTS)


def choose(finished: Sequence[DialectReader]) -> DialectReader | None:
    """The reader whose reading is the run: the most steps read, then the lowest ``precedence``; None
    when no reader recognised anything."""
    best: DialectReader | None = None
    best_key = (-1, 0)
    for reader in finished:
        steps = reader.steps_read()
        if steps is not None and (steps, -reader.precedence) > best_key:
            best, best_key = reader, (steps, -reader.precedence)
    return best
