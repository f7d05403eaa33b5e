"""Turn whatever the caller has (a path, bytes, a binary file, an iterable of chunks) into byte chunks.

The parser never holds a whole log: it reads :data:`CHUNK_SIZE` bytes at a time from files and file
objects, and slices large ``bytes`` into chunks of the same size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

CHUNK_SIZE = 1 << 20

Source = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO | Iterable[bytes]
"""What :func:`trainsweep.logs.parse` accepts."""


def source_name(source: Any) -> str | None:
    """The file name a source carries (a path's name, a file object's ``name``), if any."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:
        return Path(name).name
    return None


def source_path(source: Any) -> Path | None:
    """The full path of a path-like source, or of a file object opened from a path."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source)
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:
        return Path(name)
    return None


def iter_chunks(source: Any, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Yield the source's bytes in chunks; raises OSError/TypeError for sources that cannot be read."""
    if isinstance(source, (str, os.PathLike)):
        with Path(source).open("rb") as f:
            yield from _read_file(f, chunk_size)
        return
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source).cast("B")
        for i in range(0, len(view), chunk_size):
            yield bytes(view[i : i + chunk_size])
        return
    if hasattr(source, "read"):
        yield from _read_file(source, chunk_size)
        return
    if isinstance(source, Iterable):
        for piece in source:
            if isinstance(piece, str):
                raise TypeError("log chunks must be bytes, not str (open the file in binary mode)")
            if piece:
                yield bytes(piece)
        return
    raise TypeError(f"cannot read a log from a {type(source).__name__}")


def _read_file(f: BinaryIO, chunk_size: int) -> Iterator[bytes]:
    while True:
        piece = f.read(chunk_size)
        if not piece:
            return
        if isinstance(piece, str):
            raise TypeError("the log file object must be opened in binary mode")
        yield piece
