"""Child processes that die with their parent: a killed sweep leaves no training process behind.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is delivered when the *thread* that started
the child ends, or its whole process dies, however it dies (SIGKILL included): start the child from a
thread that lives as long as the child (one that waits for it).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that has the child sent ``sig`` when its parent
    dies; None where there is no ``prctl`` (not Linux)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm
