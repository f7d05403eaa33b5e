"""What a reader of a configuration's row should know of how its runs trained: a batch size other than
the one asked for, several batches a step (gradient accumulation), a wait for a CPU (contention)."""

from __future__ import annotations

from collections.abc import Sequence

from trainsweep.cost.runs import RunMetrics
from trainsweep.training import cpu_wait


def how_runs_trained(ok: Sequence[RunMetrics], batch_size: int | None) -> list[str]:
    """A note per run and fact, in run order; ``batch_size`` is the row's (the one the runs were asked)."""
    notes = [
        f"{r.name} trained with batch size {r.batch_size_trained}, not {batch_size}: the script ignored "
        f"its batch-size argument (samples/s use {r.batch_size_trained})"
        for r in ok
        if r.batch_size_trained
    ]
    for r in ok:
        if r.cpu_wait_share is not None and cpu_wait.contended(r.cpu_wait_share, r.cpu_wait_s):
            notes.append(f"{r.name} {cpu_wait.said(r.cpu_wait_share)}")
        if r.batches_per_step:
            b = r.batch_size_trained or batch_size
            notes.append(
                f"{r.name}: a step trains {r.batches_per_step:g} batches of batch size {b} (gradient "
                f"accumulation): samples/s count {r.batches_per_step * (b or 0):g} samples a step"
            )
    return notes
