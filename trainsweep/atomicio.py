"""Files that are either whole or absent: every file trainsweep writes goes through here.

A write goes to a temporary file in the target's folder, is flushed to disk, then renamed over the target
(``os.replace`` is atomic on one file system), and the folder is synced so the rename itself survives a
power cut. A process killed at any moment leaves the old file or the new one, never a truncated one; at
worst a ``.<name>.*.part`` file, which readers never look at and the next write of that name ignores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

PART_SUFFIX = ".part"


def _sync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_atomic(path: Path, *, durable: bool = True) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the block ends without an error (discarded otherwise).

    ``durable``: fsync the file and its folder (skip for files that are cheap to make again).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PART_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
    if durable:
        _sync_dir(path.parent)


def write_bytes(path: Path, data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically; returns ``path``."""
    with open_atomic(path, durable=durable) as f:
        f.write(data)
    return Path(path)


def write_text(path: Path, text: str, *, durable: bool = True) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return write_bytes(path, text.encode("utf-8"), durable=durable)


def write_json(path: Path, doc: Any, *, durable: bool = True) -> Path:
    """Write ``doc`` as indented JSON (with a final newline) atomically."""
    return write_text(path, json.dumps(doc, indent=2) + "\n", durable=durable)


def write_chunks(path: Path, chunks: Iterable[bytes], *, durable: bool = True) -> Path:
    """Write a stream of byte chunks (e.g. an S3 download) atomically."""
    with open_atomic(path, durable=durable) as f:
        for chunk in chunks:
            f.write(chunk)
    return Path(path)


def copy_file(src: Path, dest: Path, *, durable: bool = True) -> Path:
    """Copy ``src`` to ``dest`` atomically."""
    with Path(src).open("rb") as source, open_atomic(dest, durable=durable) as f:
        shutil.copyfileobj(source, f)
    return Path(dest)


def read_json(path: Path) -> Any:
    """The JSON document in ``path``; None when the file is missing, empty, truncated or not JSON
    (a file a killed writer left is treated as absent, never as done)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if not data.strip():
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None
