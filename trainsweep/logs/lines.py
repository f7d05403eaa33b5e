"""Line numbers on demand for the dialect readers, which scan regions of whole lines."""

from __future__ import annotations


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
