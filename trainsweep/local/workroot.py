"""Local mode's temporary folders (``$TMPDIR/trainsweep-jobs-*`` for the jobs, ``trainsweep-synth-*`` for
a synthesis), removed when their run is gone.

A folder is held by its run through an ``flock`` on ``<folder>/.owner``, which the kernel releases when
the run's process dies, however it dies: a new run removes every such folder nobody holds (what a
killed run left).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

PREFIX = "trainsweep-jobs-"
OWNER_FILE = ".owner"


class Workroot:
    """A fresh ``<prefix>*`` folder under ``parent`` (default: the temp dir), held by this process."""

    def __init__(self, parent: Path | None = None, prefix: str = PREFIX) -> None:
        import fcntl

        remove_abandoned(parent, prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        # Locked before it has its name: another run never sees an owner file nobody holds yet.
        staging = self.path / f"{OWNER_FILE}.new"
        self._owner: IO[str] | None = staging.open("w", encoding="utf-8")
        fcntl.flock(self._owner.fileno(), fcntl.LOCK_EX)
        self._owner.write(f"{os.getpid()}\n")
        self._owner.flush()
        staging.rename(self.path / OWNER_FILE)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.disown()

    def disown(self) -> None:
        """Keep the folder (moved elsewhere, or for the caller) and let go of it: no owner file, no lock."""
        (self.path / OWNER_FILE).unlink(missing_ok=True)
        if self._owner is not None:
            self._owner.close()
            self._owner = None


def remove_abandoned(parent: Path | None = None, prefix: str = PREFIX) -> list[Path]:
    """Remove the ``<prefix>*`` folders of this user that no live run holds; returns them.

    A folder without an owner file is left alone: it may be a live run's of a version that wrote none.
    """
    import fcntl

    removed = []
    root = Path(parent or tempfile.gettempdir())
    for folder in root.glob(prefix + "*"):
        try:
            if not folder.is_dir() or folder.is_symlink() or folder.stat().st_uid != os.getuid():
                continue
            with (folder / OWNER_FILE).open("r") as f:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live run's
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
