"""Loader workers: the data wait a sweep over DataLoader worker counts measured, next to what the data-stall
analysis predicts for each count from the run with the fewest workers.

A sweep closes the data-stall loop with an axis of loader workers (``num_workers`` for a built-in; for a
script, its own hyperparameter under one of :data:`AXIS_NAMES`). For each configuration that differs only
in that axis, the configuration with the fewest workers is the baseline. Its per-step compute ``C`` (the
what-if's "data free" step) and data wait ``W`` give the time one batch takes to load, ``L``: ``W`` when it
loaded in the training process (0 workers: every second of loading is waited for), else
``w0 x (W + C)`` (``w0`` workers, each delivering a batch every ``L`` seconds, keep pace with one step). The
prediction for ``N`` workers loading in parallel with the step is then a wait of ``max(0, L / N - C)`` per
step: a data-wait share of that over ``C`` plus it. The model leaves out what stays in the training
process (collation, the copy to the device) and contention for the host's cores, which is what the
measured column shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainsweep.cost.metrics import ConfigMetrics

AXIS_NAMES = (
    "num_workers",
    "num-workers",
    "workers",
    "dataloader_num_workers",
    "dataloader-num-workers",
    "loader_workers",
    "data_workers",
)
"""Axis names read as a DataLoader's worker count (the built-ins' own is the first)."""


@dataclass(frozen=True)
class WorkersRow:
    """One configuration of a loader-workers comparison."""

    config: ConfigMetrics
    workers: int
    measured_share: float
    predicted_share: float | None
    """None for the baseline itself."""
    predicted_step_s: float | None
    baseline: ConfigMetrics


def workers_axis(rows: Sequence[ConfigMetrics]) -> str | None:
    """The sweep's loader-workers axis (None: it has none)."""
    names = {n for r in rows for n in r.axes}
    return next((n for n in AXIS_NAMES if n in names), None)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def predict_share(baseline: ConfigMetrics, base_workers: int, workers: int) -> tuple[float, float] | None:
    """(data-wait share, step seconds) predicted for ``workers`` from ``baseline``; None when the baseline
    lacks its split of the step."""
    share, compute = baseline.data_wait_share, baseline.free_step_s
    if share is None or compute is None or compute <= 0 or share >= 1:
        return None
    wait = share * compute / (1.0 - share)
    load = wait if base_workers == 0 else base_workers * (wait + compute)
    new_wait = load if workers == 0 else max(0.0, load / workers - compute)
    step = compute + new_wait
    return new_wait / step, step


def comparisons(rows: Sequence[ConfigMetrics]) -> list[list[WorkersRow]]:
    """Per group of configurations that differ only in their loader workers (two or more, measured), the
    rows in order of workers, each with its measured and predicted data-wait share."""
    axis = workers_axis(rows)
    if axis is None:
        return []
    groups: dict[tuple[Any, ...], list[tuple[int, ConfigMetrics]]] = {}
    for r in rows:
        n = _count(r.axes.get(axis))
        if r.status != "ok" or r.data_wait_share is None or n is None:
            continue
        rest = tuple((k, str(v)) for k, v in r.axes.items() if k != axis)
        key = (r.instance_type, r.platform, r.instance_count, r.batch_size, rest)
        groups.setdefault(key, []).append((n, r))
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0])
        w0, base = members[0]
        table = []
        for n, r in members:
            predicted = None if r is base else predict_share(base, w0, n)
            share, step = predicted if predicted is not None else (None, None)
            table.append(WorkersRow(r, n, r.data_wait_share or 0.0, share, step, base))
        out.append(table)
    return out
