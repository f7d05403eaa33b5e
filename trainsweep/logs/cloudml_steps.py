"""The cloud-ML reader's step numbers and values held compactly: a ``range`` for consecutive step numbers,
``array('d')`` for values, a finished epoch's arrays cut to size or spilled to disk."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator

from trainsweep.logs.model import Epoch
from trainsweep.logs.spill import SpillBudget

_UNSIGNED = b"0123456789.eE+- "
"""Bytes of unsigned decimals and exponents (a sign only after the ``e``), joined by spaces."""

_COUNTING_MAX = 1 << 17
"""Step numbers up to this are checked against the cached sequence (about 1 MB); larger ones are parsed."""


class _Counting:
    """``b"1 2 3 ... n"`` and where each number starts in it, built once and grown on demand."""

    text = b""
    starts: array = array("l", [0, 0])

    @classmethod
    def span(cls, first: int, count: int) -> bytes | None:
        last = first + count - 1
        if first < 1 or count < 1 or last > _COUNTING_MAX:
            return None
        if last + 1 >= len(cls.starts):
            top = max(last + 1, 2 * len(cls.starts), 4096)
            cls.text = b" ".join(b"%d" % i for i in range(1, top + 1)) + b" "
            cls.starts = array("l", [0, 0])
            pos = 0
            for i in range(1, top + 1):
                pos += len(b"%d" % i) + 1
                cls.starts.append(pos)
        return cls.text[cls.starts[first] : cls.starts[last + 1] - 1]


def step_numbers(numbers: list[bytes]) -> range | array:
    """The logged step numbers: a ``range`` when they are consecutive (the usual case; checked byte for
    byte against ``first .. first + n - 1`` instead of converting each number), else an ``array('l')``.
    Which of the two depends only on the values, never on how the log was cut into regions."""
    first = int(numbers[0])
    consecutive = range(first, first + len(numbers))
    expected = _Counting.span(first, len(numbers))
    if expected is not None and b" ".join(numbers) == expected:
        return consecutive
    values = array("l", map(int, numbers))
    return consecutive if values == array("l", consecutive) else values


def add_step_numbers(ep: Epoch, numbers: range | array) -> None:
    """Append ``numbers`` to the epoch's step numbers, which stay a ``range`` (48 bytes instead of 8 a
    step) for as long as the epoch's numbers are consecutive."""
    have = ep.step_numbers
    if not have:
        ep.step_numbers = numbers
    elif type(have) is range and type(numbers) is range and have.stop == numbers.start:
        ep.step_numbers = range(have.start, numbers.stop)
    else:
        if type(have) is range:
            have = ep.step_numbers = array("l", have)
        have.extend(numbers)


def plain_values(values: list[bytes]) -> array | None:
    """The values as an ``array('d')`` when all are unsigned decimals or exponents, else None."""
    joined = b" " + b" ".join(values)
    if joined.translate(None, _UNSIGNED) or b" -" in joined or b" +" in joined:
        return None
    return array("d", map(float, values))


def extend_doubles(into: array, values: array | bytes) -> int:
    """Append 8-byte doubles, an ``array('d')`` or its bytes (the C scanner's), to ``into`` in one copy;
    how many were appended."""
    held = len(into)
    into.frombytes(memoryview(values).cast("B"))
    return len(into) - held


def lines_with(literal: re.Pattern[bytes], region: bytes, start: int, end: int) -> Iterator[int]:
    """Where each line of ``region[start:end]`` that holds ``literal`` starts, once per line: at its
    newline, or at ``start`` for the stretch's first line (the rest of a rare line)."""
    pos = start
    while (m := literal.search(region, pos, end)) is not None:
        line_start = max(region.rfind(b"\n", start, m.start()), start)
        line_end = region.find(b"\n", m.end(), end)
        line_end = end if line_end < 0 else line_end
        yield line_start
        pos = line_end


def compact(ep: Epoch, ranges: dict[range, range], budget: SpillBudget) -> None:
    """Copy a finished epoch's arrays to their exact size (growing arrays keep spare room), or move them
    to disk once the run's values exceed the memory budget; epochs with the same consecutive step numbers
    (every full epoch of a run) share one immutable ``range``."""
    ep.step_s = budget.keep(array("d", ep.step_s))
    if len(ep.real_time):
        ep.real_time = budget.keep(array("d", ep.real_time))
    if type(ep.step_numbers) is range:
        ep.step_numbers = ranges.setdefault(ep.step_numbers, ep.step_numbers)
    else:
        ep.step_numbers = array("l", ep.step_numbers)
