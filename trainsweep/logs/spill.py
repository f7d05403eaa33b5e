"""Bounded memory for very long logs: finished epochs' values beyond a budget move to a temporary file.

A 1 GB log holds millions of step times and stamps (8 bytes each). The cloud-ML reader keeps the first
:data:`MEMORY_BUDGET_BYTES` of them in memory and writes the rest, epoch by epoch as each one finishes,
to one anonymous temporary file (deleted by the operating system when the last epoch that refers to it
is gone). An epoch reads its values back on demand (:class:`Spilled`), so every consumer still sees plain
``array``s; logs below the budget (all real ones seen so far) never touch the disk.
"""

from __future__ import annotations

import os
import threading
from array import array

MEMORY_BUDGET_BYTES = 16 << 20
"""Values of finished epochs kept in memory before the rest goes to disk (about 2 M steps or stamps)."""


class SpillFile:
    """One anonymous temporary file that values are appended to and read back from by offset."""

    def __init__(self) -> None:
        # Open for the life of the epochs that refer to it; closed (and so deleted) with this object.
        import tempfile  # here: most runs never spill, and the import costs every command's start-up

        self._file = tempfile.TemporaryFile(prefix="trainsweep-spill-")  # noqa: SIM115
        self._end = 0
        self._lock = threading.Lock()

    def put(self, values: array) -> Spilled:
        data = memoryview(values.tobytes())
        with self._lock:
            offset = self._end
            fd, pos = self._file.fileno(), offset
            while pos < offset + len(data):
                pos += os.pwrite(fd, data[pos - offset :], pos)
            self._end = pos
        return Spilled(self, offset, len(values), values.typecode)

    def read(self, offset: int, size: int) -> bytes:
        fd = self._file.fileno()
        parts = []
        while size > 0:
            piece = os.pread(fd, size, offset)
            if not piece:
                raise OSError("the spill file is shorter than what was written to it")
            parts.append(piece)
            offset += len(piece)
            size -= len(piece)
        return b"".join(parts)

    @property
    def size(self) -> int:
        return self._end


class Spilled:
    """Where one array's values lie in a :class:`SpillFile`; :meth:`load` gives a fresh ``array``."""

    __slots__ = ("count", "file", "offset", "typecode")

    def __init__(self, file: SpillFile, offset: int, count: int, typecode: str) -> None:
        self.file, self.offset, self.count, self.typecode = file, offset, count, typecode

    def load(self) -> array:
        out = array(self.typecode)
        out.frombytes(self.file.read(self.offset, self.count * out.itemsize))
        return out

    def __len__(self) -> int:
        return self.count


class SpillBudget:
    """Decides, epoch by epoch, which finished arrays stay in memory and which go to the spill file."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = MEMORY_BUDGET_BYTES if budget is None else budget
        self.held = 0
        self.file: SpillFile | None = None

    def __getstate__(self) -> dict[str, object]:
        # A pickled epoch carries its values (Epoch.__reduce__), not the file they were spilled to.
        return {"budget": self.budget, "held": self.held, "file": None}

    def keep(self, values: array) -> array | Spilled:
        """``values`` itself while the budget lasts, else where it now lies on disk."""
        size = len(values) * values.itemsize
        if self.held + size <= self.budget or not values:
            self.held += size
            return values
        if self.file is None:
            self.file = SpillFile()
        return self.file.put(values)
