"""Billable time of a SageMaker training job: measured when known, else modelled.

SageMaker bills from the end of instance provisioning (``TrainingStartTime``) to the end of the upload
(``TrainingEndTime``): container start, data download, the script's initialisation, the training loop,
model save and upload. The training loop a log reports (the ``fit()`` time) is only part of it, so
the model is::

    billable_s = FIXED_OVERHEAD_S + training_s

``FIXED_OVERHEAD_S`` is fitted from the real SageMaker jobs in the shared fixtures
(``cloud-ML/resnet50-cifar/.../sagemaker-logs``: four ml.p3.2xlarge jobs whose DescribeTrainingJob
dumps give ``BillableTimeInSeconds`` and whose logs give the ``fit()`` time) as the median of
``billable - fit`` (129.5 to 140.2 s; median 133.4 s), see :func:`fit_overhead` and
``docs/analysis.md``. When DescribeTrainingJob is known (the sweep's ``jobs.json`` records carry
``billable_s``), that number is used instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FIXED_OVERHEAD_S = 133.4
"""Per-job seconds billed besides the training loop (median of the fitted sample; see module doc)."""

WARM_START_OVERHEAD_S = 0.0
"""Start-up seconds billed to a job that reuses a warm pool (SageMaker managed warm pools). Not measured:
no warm-pool job is in the fixtures, so the model takes the whole fitted overhead as saved (the upper
bound of the saving; the script's own initialisation and the model upload are still run)."""


@dataclass(frozen=True)
class OverheadFit:
    """The per-job overhead fitted from (billable, training) pairs of real jobs."""

    overhead_s: float
    """Median of billable - training seconds: robust to one slow container start."""
    min_s: float
    max_s: float
    jobs: int
    training_share_min: float
    """Smallest training / billable share seen (how much of the bill the log's time explains)."""
    training_share_max: float


def fit_overhead(pairs: Iterable[tuple[float, float]]) -> OverheadFit:
    """Fit the fixed per-job overhead from ``(billable_s, training_s)`` pairs of real jobs."""
    pairs = [(float(b), float(t)) for b, t in pairs]
    if not pairs:
        raise ValueError("fit_overhead needs at least one (billable_s, training_s) pair")
    gaps = [b - t for b, t in pairs]
    shares = [t / b for b, t in pairs if b > 0]
    return OverheadFit(
        overhead_s=statistics.median(gaps),
        min_s=min(gaps),
        max_s=max(gaps),
        jobs=len(pairs),
        training_share_min=min(shares),
        training_share_max=max(shares),
    )


def describe_training_job_times(desc: Mapping[str, Any]) -> dict[str, float | None]:
    """Billable and training seconds (and spot savings share) from a DescribeTrainingJob response."""
    billable = desc.get("BillableTimeInSeconds")
    training = desc.get("TrainingTimeInSeconds")
    savings = None
    if billable is not None and training:
        # Managed spot: billed seconds below run seconds; AWS states savings = 1 - billable / training.
        savings = max(0.0, 1.0 - float(billable) / float(training))
    return {
        "billable_s": float(billable) if billable is not None else None,
        "training_s": float(training) if training is not None else None,
        "spot_savings_share": savings,
    }


def modelled_billable_s(training_s: float, overhead_s: float = FIXED_OVERHEAD_S) -> float:
    """Billable seconds of a job whose training loop takes ``training_s``."""
    return overhead_s + training_s


def cost_usd(seconds: float, usd_per_hour: float, instance_count: int = 1) -> float:
    """Dollars for ``seconds`` of ``instance_count`` instances at ``usd_per_hour`` each."""
    return seconds * usd_per_hour * instance_count / 3600.0


@dataclass(frozen=True)
class SweepBill:
    """What a sweep's jobs are billed (:func:`sweep_billable_s`)."""

    billable_s: dict[str, float]
    """Billable seconds per instance type: jobs and warm-pool retention."""
    retained_s: dict[str, float]
    """Of which warm-pool retention (idle pools, ``ResourceRetainedBillableTimeInSeconds``)."""
    warm_starts: int
    wall_s: float
    """From the first job's start to the last job's end (retention after it not counted)."""


def sweep_billable_s(
    jobs: Sequence[tuple[str, float]],
    *,
    slots: int,
    keep_alive_s: float = 0.0,
    overhead_s: float = FIXED_OVERHEAD_S,
    warm_overhead_s: float = WARM_START_OVERHEAD_S,
) -> SweepBill:
    """Billable seconds of ``(instance type, training seconds)`` jobs run in order, ``slots`` at a time.

    Each job starts as soon as a slot is free (the Map's MaxConcurrency). With ``keep_alive_s`` > 0 a job
    that ends leaves a warm pool of its instance type for that long; a later job of the same type that
    starts within it reuses it and pays ``warm_overhead_s`` instead of ``overhead_s``. A warm pool is a
    billable resource (``WarmPoolStatus.ResourceRetainedBillableTimeInSeconds``): its idle time until it
    is reused, or ``keep_alive_s`` when it never is, is billed too.
    """
    free = [0.0] * max(1, slots)
    pools: dict[str, list[float]] = {}  # instance type -> release times of its idle pools
    billed: dict[str, float] = {}
    retained: dict[str, float] = {}
    warm = 0
    end = 0.0
    for itype, training in jobs:
        slot = free.index(min(free))
        start = free[slot]
        idle = pools.setdefault(itype, [])
        for t in list(idle):  # pools that expired before this start are billed their whole keep-alive
            if start - t > keep_alive_s:
                idle.remove(t)
                retained[itype] = retained.get(itype, 0.0) + keep_alive_s
        ready = [t for t in idle if t <= start]
        if ready:
            idle.remove(max(ready))
            retained[itype] = retained.get(itype, 0.0) + start - max(ready)
            duration = warm_overhead_s + training
            warm += 1
        else:
            duration = overhead_s + training
        billed[itype] = billed.get(itype, 0.0) + duration
        free[slot] = start + duration
        end = max(end, free[slot])
        if keep_alive_s > 0:
            idle.append(free[slot])
    for itype, idle in pools.items():
        retained[itype] = retained.get(itype, 0.0) + keep_alive_s * len(idle)
    for itype, r in retained.items():
        billed[itype] = billed.get(itype, 0.0) + r
    return SweepBill(billed, retained, warm, end)
