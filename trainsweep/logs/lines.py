"""Building blocks of the dialect readers: one alternation regex per dialect, line numbers on demand."""

from __future__ import annotations

import re
from collections.abc import Sequence


class Alternation:
    """Several named patterns compiled into ONE bytes regex, dispatched by the alternative that matched.

    Scanning a whole chunk with one compiled regex (``finditer``) keeps the work per byte in C; only the
    matches reach Python. ``kind_of[m.lastindex]`` names the alternative, ``first_group[kind]`` is the
    number of its first inner group.
    """

    def __init__(self, prefix: bytes, alternatives: Sequence[tuple[str, bytes]]):
        parts = [b"(?P<" + name.encode() + b">" + body + b")" for name, body in alternatives]
        self.regex = re.compile(prefix + b"(?:" + b"|".join(parts) + b")")
        self.kind_of: dict[int, str] = {}
        self.first_group: dict[str, int] = {}
        for name, _ in alternatives:
            idx = self.regex.groupindex[name]
            self.kind_of[idx] = name
            self.first_group[name] = idx + 1


class LineCounter:
    """1-based line numbers of positions in a region, counted forward incrementally (linear overall).

    A region starts at a newline of the virtual stream ``b"\\n" + log``; ``newlines_before`` is how many
    newlines of that stream precede it.
    """

    __slots__ = ("_count", "_pos", "_region")

    def __init__(self, region: bytes, newlines_before: int):
        self._region = region
        self._pos = 0
        self._count = newlines_before

    def at(self, pos: int) -> int:
        """Line number of the line that holds ``region[pos]`` (a line's leading newline counts as its own)."""
        if pos + 1 >= self._pos:
            self._count += self._region.count(b"\n", self._pos, pos + 1)
            self._pos = pos + 1
            return self._count
        return self._count - self._region.count(b"\n", pos + 1, self._pos)
