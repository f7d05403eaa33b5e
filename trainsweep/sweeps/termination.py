"""SIGTERM and SIGHUP stop a local sweep as Ctrl-C does.

``timeout``, a closed terminal and a CI runner's cancel send SIGTERM or SIGHUP: without a handler the
process dies at once, its training processes and results with it. Inside
:func:`interrupt_on_termination` the first such signal raises :class:`KeyboardInterrupt` in the main
thread, so the sweep stops its jobs, keeps its results and exits as after Ctrl-C; later ones are
ignored while it does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into Ctrl-C for the block (a no-op outside the main thread, where Python
    cannot install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired.is_set():
            return  # already stopping
        fired.set()
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    saved = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)
