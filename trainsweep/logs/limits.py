"""What a log may build: bounds that keep a parse's memory proportional to what real runs need.

A crafted or broken log can describe millions of epochs or ranks in a few bytes each (``Epoch 7/9``,
``[MO833] Rank,123456,...``), or repeat one bad line millions of times. Each epoch, rank or problem costs
a few hundred bytes of Python objects, so the readers stop building such structure at these bounds and
report it once (``absurd-structure``, ``more-problems``) instead: memory stays bounded by the log's step
values (8 bytes each, spilled to disk beyond a budget, :mod:`trainsweep.logs.spill`) plus these bounds.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainsweep.logs.model import Problem, Severity

MAX_EPOCHS = 100_000
"""Epochs one reader builds, all ranks together (about 600 bytes each; a 1 GB log made of every real
cloud-ML epoch, renumbered into one run, has 86,557; real runs have tens to hundreds)."""

MAX_RANKS = 20_000
"""Distinct ranks one reader keeps (the largest MLPerf training submissions use about 11,600 GPUs)."""

MAX_PROBLEMS_PER_CODE = 100
"""Problems of one code a reader lists with their lines; the rest are counted in one more entry."""


class ProblemLog:
    """A reader's problems: the :data:`MAX_PROBLEMS_PER_CODE` first by line of each code, then a count.

    ``append`` takes a :class:`~trainsweep.logs.model.Problem` (``add`` makes one); iterating gives the
    listed ones followed by one ``Problem(code, "N more ...", None, severity)`` per code that went over
    the bound, so a log of a million bad lines costs a few kilobytes of problems. Which ones
    are listed depends only on the problems, never on the order a reader met them in (it reads a
    stretch's step lines before its stamps, and stretches depend on how the log was chunked).
    """

    __slots__ = ("_counts", "_listed", "_severity")

    def __init__(self) -> None:
        self._listed: dict[str, list[Problem]] = {}
        self._counts: dict[str, int] = {}
        self._severity: dict[str, Severity] = {}

    def add(self, code: str, message: str, line: int | None, severity: Severity = "warning") -> None:
        """List the problem ``code`` (a reader's ``code``, ``message``, 1-based ``line``)."""
        self.append(Problem(code, message, line, severity))

    def append(self, problem: Problem) -> None:
        code = problem.code
        self._counts[code] = self._counts.get(code, 0) + 1
        self._severity.setdefault(code, problem.severity)
        listed = self._listed.setdefault(code, [])
        listed.append(problem)
        if len(listed) >= 2 * MAX_PROBLEMS_PER_CODE:  # keep the first by line, amortised
            listed.sort(key=_order)
            del listed[MAX_PROBLEMS_PER_CODE:]

    def count(self, code: str) -> int:
        """How many problems of ``code`` were reported, listed or not."""
        return self._counts.get(code, 0)

    def __iter__(self) -> Iterator[Problem]:
        for listed in self._listed.values():
            yield from sorted(listed, key=_order)[:MAX_PROBLEMS_PER_CODE]
        for code, n in self._counts.items():
            if n > MAX_PROBLEMS_PER_CODE:
                more = n - MAX_PROBLEMS_PER_CODE
                yield Problem(code, f"{more} more {code} problems are not listed", None, self._severity[code])

    def __len__(self) -> int:
        return sum(min(n, MAX_PROBLEMS_PER_CODE) + (n > MAX_PROBLEMS_PER_CODE) for n in self._counts.values())

    def __bool__(self) -> bool:
        return bool(self._counts)


def _order(problem: Problem) -> tuple[int, str, str]:
    line = problem.line
    return (-1 if line is None else line, problem.message, problem.severity)
