"""How long the training process waited for a CPU while it could run: the sign of CPU contention.

Linux's scheduler statistics (``/proc/<pid>/task/<tid>/schedstat``: nanoseconds on a CPU, nanoseconds
waiting on a run queue, time slices) are read for every thread of this process at the start and at the end
of the training, and compared thread by thread. A process that had the CPUs it asked for waits a few per
cent of its running time at most. One that shares the CPUs with other programs, or with more of its own
threads and loader workers than there are cores, waits much longer, and its steps, epochs and predictions
measure that sharing (on a 2-core machine under another process's load, a script's 4 ms steps took 0.6 s). A
thread started during the run counts from its start; one that ended before the end of the run, and other
processes (loader workers), are not counted. Elsewhere than Linux, nothing is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TASKS = Path("/proc/self/task")
BUSY_SHARE = 0.10
BUSY_MIN_WAIT_S = 0.5
"""A run whose training process waited for a CPU BUSY_SHARE of its runnable time or more, and at least
BUSY_MIN_WAIT_S seconds in all (a short run's share is a few scheduler ticks), ran with its CPUs contended:
its figures carry a note."""
FINDING = "cpu-contention"
"""The code of the report's data-quality finding for a run whose CPUs were contended."""
CAUSES = "other programs, or its own loader workers and threads, wanted the CPUs too"
"""What contends for a run's CPUs, as the notes, findings and the CLI say it."""


@dataclass(frozen=True)
class SchedTimes:
    """Nanoseconds this process's threads ran on a CPU, and waited for one (summed; ``threads``: each
    thread's, by its id, where a snapshot read them)."""

    run_ns: int
    wait_ns: int
    threads: Mapping[int, tuple[int, int]] = field(default_factory=dict, compare=False)


def snapshot(tasks: Path = TASKS) -> SchedTimes | None:
    """The sums over the process's threads now; None where the statistics cannot be read."""
    try:
        listed = list(tasks.iterdir())
    except OSError:
        return None
    threads: dict[int, tuple[int, int]] = {}
    for thread in listed:
        try:
            fields = (thread / "schedstat").read_text().split()
            threads[int(thread.name)] = (int(fields[0]), int(fields[1]))
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended since the listing
    if not threads:
        return None
    return SchedTimes(sum(r for r, _ in threads.values()), sum(w for _, w in threads.values()), threads)


def waited(start: SchedTimes | None, end: SchedTimes | None) -> dict[str, float] | None:
    """``{"run_s", "wait_s", "wait_share"}`` between two snapshots (share of the runnable time spent
    waiting); None when either is missing or nothing ran."""
    if start is None or end is None:
        return None
    if end.threads:  # thread by thread: one that ended since the start takes nothing from the others
        run = wait = 0
        for tid, (r, w) in end.threads.items():
            r0, w0 = start.threads.get(tid, (0, 0))  # one started since counts from its start
            run, wait = run + max(0, r - r0), wait + max(0, w - w0)
    else:
        run, wait = max(0, end.run_ns - start.run_ns), max(0, end.wait_ns - start.wait_ns)
    if run + wait <= 0:
        return None
    return {"run_s": run / 1e9, "wait_s": wait / 1e9, "wait_share": wait / (run + wait)}


def said(share: float) -> str:
    """A contended run's wait in words: ``waited for a CPU 45% of the time it could run (...)...``."""
    return f"waited for a CPU {share:.0%} of the time it could run ({CAUSES}): its times include that wait"


def contended(wait_share: float | None, wait_s: float | None) -> bool:
    """Whether a run's wait for a CPU is contention (:data:`BUSY_SHARE`, :data:`BUSY_MIN_WAIT_S`)."""
    if wait_share is None or wait_s is None:
        return False
    return wait_share >= BUSY_SHARE and wait_s >= BUSY_MIN_WAIT_S
