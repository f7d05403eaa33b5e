"""The ``log_format`` dialect: a user's regular expression for a log no built-in dialect reads.

A spec's ``workload.log_format`` is a Python regular expression searched in each line of the log (like
``re.search``: anywhere in the line; anchor it with ``^`` to start at the line's beginning). Its named
groups say what a matching line carries:

``step_s``
    the duration of one training step, in seconds;
``timestamp``
    the time a step ended, in seconds (a Unix time or seconds since any start): step times are the
    differences between consecutive stamps of an epoch, so the first stamp of each epoch gives none;
``epoch`` (optional)
    any text: a change of value starts the next epoch (epochs are numbered 1, 2, ... in log order);
    without it the whole log is one epoch;
``step`` (optional)
    the step number as logged (an integer); without it steps are numbered 1, 2, ... in each epoch.

A pattern needs ``step_s`` or ``timestamp``; with both, ``step_s`` is the step time and ``timestamp``
a wall-clock stamp. When given, the pattern replaces dialect sniffing for that log (``run.dialect`` is
``log-format``). Lines the pattern does not match are skipped; a matched value that is not a number is a
``bad-value`` problem, an impossible one an ``absurd-value`` problem (the step is dropped), and a log the
pattern never matches a ``no-match`` problem (see :mod:`trainsweep.logs.checks`).
"""

from __future__ import annotations

import re
from array import array
from itertools import pairwise
from pathlib import Path
from typing import ClassVar

from trainsweep.logs.limits import MAX_EPOCHS
from trainsweep.logs.model import Epoch, Problem, RunTimings
from trainsweep.logs.numbers import NUM, duration_problem, step_number_problem, timestamp_problem

DIALECT = "log-format"
STEP_S = "step_s"
TIMESTAMP = "timestamp"
EPOCH = "epoch"
STEP = "step"
GROUPS = (STEP_S, TIMESTAMP, EPOCH, STEP)
"""Every named group a ``log_format`` may have; at least one of the first two."""

_NUMBER = re.compile(NUM.decode())
"""The number forms a matched value may take (:data:`trainsweep.logs.numbers.NUM`)."""

MAX_PROBLEMS_PER_CODE = 100
"""A pattern that misreads every line of a long log reports this many lines per problem code, then a count."""


def compile_log_format(text: str) -> re.Pattern[str]:
    """Compile a spec's ``log_format``.

    Raises:
        ValueError: the text is not a regular expression, has neither a ``step_s`` nor a ``timestamp``
            group, or names a group trainsweep does not read (a typo would silently read nothing).
    """
    if not isinstance(text, str) or not text:
        raise ValueError("log_format must be a non-empty regular expression")
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"log_format is not a valid regular expression: {exc}") from None
    names = set(pattern.groupindex)
    if not names & {STEP_S, TIMESTAMP}:
        raise ValueError(
            "log_format needs a named group step_s (a step time in seconds) or timestamp (a step's end "
            r"time in seconds), e.g. 'step (?P<step>\d+) took (?P<step_s>[0-9.]+)s'"
        )
    unknown = sorted(names - set(GROUPS))
    if unknown:
        raise ValueError(
            f"log_format has named group(s) {', '.join(unknown)} that trainsweep does not read: "
            f"use only {', '.join(GROUPS)} (and (?:...) for other groups)"
        )
    return pattern


class PatternReader:
    """Collects the epochs of one log from the lines a ``log_format`` pattern matches.

    Fed like the other dialect readers: regions of whole lines that begin with a newline, with the number
    of newlines before them in the virtual stream ``b"\\n" + log`` (so the region's n-th line is line
    ``newlines_before + n``).
    """

    name: ClassVar[str] = DIALECT
    precedence: ClassVar[int] = 0
    """Not in the dialect table: a given pattern is the only reader, it never competes."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.epochs: list[Epoch] = []
        self.real_time = array("d")
        self.problems: list[Problem] = []
        self.matched_lines = 0
        self._has_step_s = STEP_S in pattern.groupindex
        self._has_stamp = TIMESTAMP in pattern.groupindex
        self._epoch_value: str | None = None
        self._last_stamp: float | None = None
        self._numbered = STEP in pattern.groupindex
        self._problem_counts: dict[str, int] = {}
        self._dropped: Epoch | None = None
        """Where the steps of epochs beyond :data:`MAX_EPOCHS` go (replaced each epoch, never kept)."""

    def feed(self, region: bytes, newlines_before: int) -> None:
        search = self.pattern.search
        lines = region.decode("utf-8", "replace").split("\n")
        # lines[0] precedes the region's leading newline (always empty); lines[i] is line newlines_before + i.
        last = len(lines) - 1  # a region ends with its last line's newline, but for a log cut short
        for i, line in enumerate(lines):
            if not line:
                continue
            m = search(line[:-1] if line.endswith("\r") else line)
            if m is not None:
                self.matched_lines += 1
                if i == last and self._value_ends(m):
                    msg = (
                        "the log ends inside this line (no line end after its value: it may be cut); ignored"
                    )
                    self._problem("bad-value", msg, newlines_before + i)
                    continue
                self._line(m, newlines_before + i)

    def _value_ends(self, m: re.Match[str]) -> bool:
        """Whether a ``step_s`` or ``timestamp`` the pattern matched runs to the end of the text."""
        return any(
            m.group(g) is not None and m.end(g) == len(m.string)
            for g in (STEP_S, TIMESTAMP)
            if g in m.re.groupindex
        )

    def _line(self, m: re.Match[str], line: int) -> None:
        groups = m.groupdict()
        epoch_value = groups.get(EPOCH)
        if epoch_value is not None and epoch_value != self._epoch_value:
            self._epoch_value = epoch_value
            self._new_epoch()
        ep = self._epoch()
        stamp = self._number(groups.get(TIMESTAMP), TIMESTAMP, line) if self._has_stamp else None
        if stamp is not None and (why := timestamp_problem(stamp)) is not None:
            self._problem("absurd-value", f"timestamp {stamp!r} {why}; ignored", line)
            stamp = None
        step_s = self._number(groups.get(STEP_S), STEP_S, line) if self._has_step_s else None
        if step_s is None and stamp is not None and groups.get(STEP_S) is None:
            step_s = self._from_stamp(stamp, line)
        if stamp is not None:
            ep.real_time.append(stamp)
            self.real_time.append(stamp)
        if step_s is None:
            return
        if (why := duration_problem(step_s)) is not None:
            self._problem("absurd-value", f"step time {step_s!r} {why}; the step is dropped", line)
            return
        number = len(ep.step_numbers) + 1
        if self._numbered and (text := groups.get(STEP)) is not None:
            try:
                number = int(text)
            except ValueError:
                self._problem("bad-value", f"step {text!r} is not an integer; numbered by position", line)
                number = (ep.step_numbers[-1] + 1) if len(ep.step_numbers) else 1
            else:
                if (why := step_number_problem(number)) is not None:
                    self._problem("absurd-value", f"step {text} {why}; the step is dropped", line)
                    return
        ep.step_s.append(step_s)
        ep.step_numbers.append(number)  # type: ignore[union-attr]

    def _from_stamp(self, stamp: float, line: int) -> float | None:
        """The step time a stamp closes: since the previous stamp of the epoch (None for the first)."""
        last, self._last_stamp = self._last_stamp, stamp
        if last is None:
            return None
        if stamp < last:
            self._problem(
                "absurd-value",
                f"timestamp {stamp!r} is earlier than the one before ({last!r}); the step is dropped",
                line,
            )
            return None
        return stamp - last

    def _number(self, text: str | None, group: str, line: int) -> float | None:
        if text is None:
            return None
        if _NUMBER.fullmatch(text) is None:  # float() alone would take 1_000 and " 1 "
            self._problem("bad-value", f"{group} {text[:80]!r} is not a number; the line is ignored", line)
            return None
        return float(text)

    def _new_epoch(self) -> None:
        self._last_stamp = None  # each epoch's first stamp starts its clock
        if len(self.epochs) >= MAX_EPOCHS:  # not a real run: this epoch is read but not kept
            msg = f"more than {MAX_EPOCHS} epochs: not a real run; the epochs after them are ignored"
            self._problem("absurd-structure", msg, None)
            self._dropped = Epoch(index=MAX_EPOCHS + 1)
            return
        self.epochs.append(Epoch(index=len(self.epochs) + 1))

    def _epoch(self) -> Epoch:
        if not self.epochs:
            self._new_epoch()
        return self._dropped if self._dropped is not None else self.epochs[-1]

    def _problem(self, code: str, message: str, line: int | None) -> None:
        n = self._problem_counts[code] = self._problem_counts.get(code, 0) + 1
        if n <= MAX_PROBLEMS_PER_CODE:
            self.problems.append(Problem(code, message, line))

    def finish(self) -> None:
        """Hold consecutive step numbers as a ``range``; count the problems not listed."""
        for ep in self.epochs:
            numbers = ep.step_numbers
            if len(numbers) and all(b - a == 1 for a, b in pairwise(numbers)):
                ep.step_numbers = range(numbers[0], numbers[0] + len(numbers))
        for code, n in self._problem_counts.items():
            if n > MAX_PROBLEMS_PER_CODE:
                more = n - MAX_PROBLEMS_PER_CODE
                self.problems.append(Problem(code, f"{more} more lines with {code} problems are not listed"))

    # ---- the plug-in's answers (:mod:`trainsweep.logs.dialects`) ------------------------------------

    def steps_read(self) -> int | None:
        """The steps read; None when the pattern matched no line."""
        return sum(e.steps for e in self.epochs) if self.matched_lines else None

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        """Write what was read into ``run`` (the pattern and how many lines it matched in ``run.extra``)."""
        run.dialect = DIALECT
        run.epochs = self.epochs
        run.real_time = self.real_time
        run.extra["log_format"] = {"pattern": self.pattern.pattern, "matched_lines": self.matched_lines}

    def check(self, run: RunTimings) -> bool:
        """No check of the run's shape beyond the common ones (``no-match`` is one of them)."""
        return False
