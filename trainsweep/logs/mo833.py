"""The MO833 per-rank dialect (seed 002, high-res-distributed / CLAP)::

    [MO833] Rank,0,Initialization Time: 28.8954
    [MO833] Rank,0,Epoch,0,Iteration,3,It. time,4.3528,Elapsed time,54.2524
    [MO833] Rank,0,Epoch,0,Epoch time,29.7503,Elapsed time,58.6458

Epochs and iterations count from 0 in the log; the model numbers them from 1 (epoch 0 -> index 1,
iteration 0 -> step 1), like the seed layout. ``Elapsed time`` is seconds since the process started:
its largest value is the run's total time.

A line must be exactly one of these forms up to its line end (a trailing ``\r`` aside): anything after
the last number, or a last line the log ends inside (its final number may be cut), is a ``bad-line``.
Ranks and epochs beyond :mod:`trainsweep.logs.limits` are not built (``absurd-structure``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

from trainsweep.logs import native
from trainsweep.logs.limits import MAX_EPOCHS, MAX_RANKS, ProblemLog
from trainsweep.logs.lines import LineCounter
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.logs.numbers import NUM, duration_problem, small_int, step_number_problem
from trainsweep.logs.ranks import primary_rank, ranks_to_run

DIALECT = "mo833"
TOKEN = b"[MO833]"

_LINE = re.compile(
    rb"\[MO833\] Rank,(\d+),(?:Initialization Time: "
    + NUM
    + rb"|Epoch,(\d+),(?:Iteration,(\d+),It\. time,"
    + NUM
    + rb",Elapsed time,"
    + NUM
    + rb"|Epoch time,"
    + NUM
    + rb",Elapsed time,"
    + NUM
    + rb"))\r?"
)
_ANY = re.compile(rb"\[MO833\][^\n]*")


class Mo833Reader:
    """Collects per-rank epochs from ``[MO833]`` lines."""

    name: ClassVar[str] = DIALECT
    precedence: ClassVar[int] = 1

    def __init__(self) -> None:
        self.ranks: dict[int, dict[int, Epoch]] = {}
        self.init_s: dict[int, float] = {}
        self.elapsed_s: dict[int, float] = {}
        self.problems = ProblemLog()
        self.records = 0
        self._epochs = 0
        self._known: set[int] = set()

    def feed(self, region: bytes, newlines_before: int) -> None:
        if not native.has(region, TOKEN):
            return
        lc = LineCounter(region, newlines_before)
        for m in native.finditer_at(_ANY, region, TOKEN):
            full = _LINE.fullmatch(region, m.start(), m.end())
            if full is None or m.end() == len(region):  # no newline after it: the log ends inside it
                what = "in an unknown form" if full is None else "the log ends inside (no line end)"
                self.problems.add("bad-line", f"[MO833] line {what}; ignored", lc.at(m.start()))
                continue
            rank = small_int(full.group(1), 9)
            epoch = small_int(full.group(3), 9) if full.group(3) is not None else 0
            if rank is None or epoch is None or not self._room_for(rank):
                self._absurd(lc.at(m.start()))
                continue
            self.records += 1
            if full.group(2) is not None:
                v = float(full.group(2))
                if self._ok("Initialization Time", v, lc, m.start()):
                    self.init_s[rank] = v
                continue
            epoch_index = epoch + 1
            eps = self.ranks.setdefault(rank, {})
            ep = eps.get(epoch_index)
            if ep is None:
                if self._epochs >= MAX_EPOCHS:
                    self._absurd(lc.at(m.start()))
                    continue
                self._epochs += 1
                ep = eps[epoch_index] = Epoch(index=epoch_index)
            if full.group(4) is not None:
                it, elapsed = float(full.group(5)), float(full.group(6))
                step = small_int(full.group(4))
                if step is None or (why := step_number_problem(step + 1)) is not None:
                    why = why if step is not None else "has too many digits"
                    msg = f"Iteration {full.group(4)[:30].decode()} {why}; the step is ignored"
                    self.problems.add("absurd-value", msg, lc.at(m.start()))
                elif self._ok("It. time", it, lc, m.start()):
                    ep.step_s.append(it)
                    # An epoch this parser made holds an array (only cloudml and pattern store ranges).
                    ep.step_numbers.append(step + 1)  # type: ignore[union-attr]
                self._elapsed(rank, elapsed, lc, m.start())
            else:
                et, elapsed = float(full.group(7)), float(full.group(8))
                if self._ok("Epoch time", et, lc, m.start()):
                    ep.epoch_s = et
                self._elapsed(rank, elapsed, lc, m.start())

    def _room_for(self, rank: int) -> bool:
        """Whether ``rank`` is known or one more rank fits in :data:`MAX_RANKS`."""
        if rank in self._known:
            return True
        if len(self._known) >= MAX_RANKS:
            return False
        self._known.add(rank)
        return True

    def _absurd(self, line: int) -> None:
        msg = (
            f"more than {MAX_RANKS} ranks or {MAX_EPOCHS} epochs, or a rank or epoch number of more than 9 "
            "digits: not a real run; the line is ignored"
        )
        self.problems.add("absurd-structure", msg, line)

    def _ok(self, what: str, v: float, lc: LineCounter, pos: int) -> bool:
        why = duration_problem(v)
        if why is None:
            return True
        self.problems.add("absurd-value", f"{what} {v!r} {why}; ignored", lc.at(pos))
        return False

    def _elapsed(self, rank: int, v: float, lc: LineCounter, pos: int) -> None:
        if self._ok("Elapsed time", v, lc, pos):
            self.elapsed_s[rank] = max(v, self.elapsed_s.get(rank, 0.0))

    # ---- the plug-in's answers (:mod:`trainsweep.logs.dialects`) ------------------------------------

    def finish(self) -> None:
        """Nothing to settle: every line is read whole."""

    def steps_read(self) -> int | None:
        """The steps read, all ranks together; None when no ``[MO833]`` line was read."""
        if not self.ranks and not self.init_s:
            return None
        return sum(e.steps for eps in self.ranks.values() for e in eps.values())

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        """Write what was read into ``run``: the ranks (the primary rank's epochs, initialisation time and
        largest elapsed time are the run's) and the world size when more than one rank logged."""
        run.dialect = DIALECT
        ranks_to_run(run, self.ranks)
        primary = primary_rank(self.ranks) if self.ranks else (0 if 0 in self.init_s else min(self.init_s))
        run.init_s = self.init_s.get(primary)
        run.total_s = self.elapsed_s.get(primary)
        seen = set(self.ranks) | set(self.init_s)
        run.header.world_size = len(seen) if len(seen) > 1 else None

    def check(self, run: RunTimings) -> bool:
        """No check of the run's shape beyond the common ones."""
        return False
