"""Data stalls: how much of a step waits for data, and what if data loading were aligned or free.

Two levels:

* Per run, from the container's per-step ``data_wait_s`` / ``compute_s`` (new logs only): the data-wait
  share of the step, the accelerator utilisation ``compute / (compute + wait)`` (MLPerf Storage counts
  >= 90 % as not stalled) and a what-if: the steady step if every rank waited only the mean wait of
  the ranks (aligned loading), and if data were free (compute only).
* Per iteration and GPU of a DDP trace (the FusionFlow / DS-Analyzer simulation input): re-simulate the
  iterations with the batch-fetch start and/or fetch duration aligned across GPUs (``min`` or ``avg``),
  and summarise iteration, stall and delay times the way the FusionFlow simulator does.

Definitions of the trace simulation (as in FusionFlow's ``no_deps`` simulator, re-derived here):

* fetch done = fetch start + fetch duration, per GPU; aligned start: ``min`` = earliest start of the
  iteration, ``avg`` = midpoint of earliest and latest; aligned duration: ``min`` / ``avg`` over GPUs.
* pure training of GPU g = its iteration time - the largest stall of the iteration.
* when anything is aligned, each GPU's stall shrinks by how much earlier its batch is ready (never below
  2 us), or grows by how much later it is ready if it was stalled (> 10 ms) at all; the iteration then
  takes max(new stalls) + the longest pure training.
* delay = max - min stall over GPUs; the summary keeps iterations with index > 10 and reports mean and
  sample standard deviation, and the *effective delay* share: iterations with delay > 0.030 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from trainsweep.logs.model import Epoch, RunTimings

NOT_STALLED_UTILISATION = 0.90
"""MLPerf Storage: an accelerator busy >= 90 % of the time is not data-stalled."""

Align = Literal[False, "min", "avg"]
ALIGN_CHOICES: tuple[Align, ...] = (False, "avg", "min")
SUMMARY_MIN_INDEX = 10
EFFECTIVE_DELAY_S = 0.030
_MIN_STALL_S = 0.000002
_STALLED_S = 0.01


# ---- per run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StallStats:
    """Data-wait figures of one run (all ranks that report them, warm-up step excluded)."""

    steps: int
    data_wait_s: float
    compute_s: float
    observed_step_s: float
    aligned_step_s: float
    free_step_s: float

    @property
    def data_wait_share(self) -> float:
        total = self.data_wait_s + self.compute_s
        return self.data_wait_s / total if total > 0 else 0.0

    @property
    def utilisation(self) -> float:
        total = self.data_wait_s + self.compute_s
        return self.compute_s / total if total > 0 else 0.0

    @property
    def stalled(self) -> bool:
        return self.utilisation < NOT_STALLED_UTILISATION


def _rank_epochs(run: RunTimings) -> list[list[Epoch]]:
    if run.ranks:
        return [run.ranks[r] for r in sorted(run.ranks)]
    return [run.epochs]


def _wait_compute(epochs: list[Epoch]) -> tuple[np.ndarray, np.ndarray] | None:
    waits: list[float] = []
    comps: list[float] = []
    for e in epochs:
        if e.data_wait_s is None or e.compute_s is None:
            return None
        n = min(len(e.data_wait_s), len(e.compute_s))
        waits.extend(e.data_wait_s[:n])
        comps.extend(e.compute_s[:n])
    if len(waits) < 2:
        return None
    # The first step carries warm-up (graph build, cuDNN autotune, first batch): leave it out.
    return np.asarray(waits[1:]), np.asarray(comps[1:])


def run_stall_stats(run: RunTimings) -> StallStats | None:
    """Data-wait figures of a run; None when its log has no per-step data-wait/compute split."""
    per_rank = [wc for wc in (_wait_compute(eps) for eps in _rank_epochs(run)) if wc is not None]
    if not per_rank:
        return None
    n = min(len(w) for w, _ in per_rank)
    wait = np.vstack([w[:n] for w, _ in per_rank])  # ranks x steps
    comp = np.vstack([c[:n] for _, c in per_rank])
    # In data-parallel training every step ends when the slowest rank is done.
    observed = (wait + comp).max(axis=0)
    aligned = (wait.mean(axis=0, keepdims=True) + comp).max(axis=0)
    free = comp.max(axis=0)
    return StallStats(
        steps=n,
        data_wait_s=float(wait.sum() / wait.shape[0]),
        compute_s=float(comp.sum() / comp.shape[0]),
        observed_step_s=float(observed.mean()),
        aligned_step_s=float(aligned.mean()),
        free_step_s=float(free.mean()),
    )


# ---- per-iteration DDP trace simulation ----------------------------------------------------------


@dataclass
class IterationTrace:
    """Per iteration (rows) and GPU (columns): when each GPU's batch fetch started and what followed."""

    index: np.ndarray
    """Iteration index within the epoch, shape (n,)."""
    fetch_start_ns: np.ndarray
    """Fetch start, integer nanoseconds since the Unix epoch, shape (n, gpus)."""
    fetch_s: np.ndarray
    """Fetch (load + preprocess) duration in seconds, shape (n, gpus)."""
    iteration_s: np.ndarray
    """Measured iteration time, shape (n, gpus)."""
    stall_s: np.ndarray
    """Measured training stall (waiting for the batch), shape (n, gpus)."""

    @property
    def gpus(self) -> int:
        return int(self.fetch_s.shape[1])


def _to_ns(seconds: np.ndarray) -> np.ndarray:
    return np.rint(seconds * 1e9).astype(np.int64)


def read_sim_info(source: str | Path | IO[Any]) -> IterationTrace:
    """Read a DS-Analyzer/FusionFlow ``sim_info.csv`` (columns ``Fetch time (sec)_gpu<i>``,
    ``Start time_gpu<i>``, ``Iteration time (sec)_gpu<i>``, ``Training Stall time (sec)_gpu<i>``)."""
    import pandas as pd

    df = pd.read_csv(source, index_col=0)
    gpus = sorted(int(c.rsplit("gpu", 1)[1]) for c in df.columns if c.startswith("Fetch time (sec)_gpu"))
    if not gpus:
        raise ValueError("not a sim_info table: no 'Fetch time (sec)_gpu<i>' columns")
    if "Epoch" in df.columns:
        df = df[df["Epoch"] == df["Epoch"].min()]
    df = df.sort_values("Index number")

    def cols(fmt: str) -> list[str]:
        return [fmt.format(g) for g in gpus]

    starts = np.column_stack(
        [
            pd.to_datetime(df[c], format="%Y-%m-%d %H:%M:%S.%f").astype("int64").to_numpy()
            for c in cols("Start time_gpu{}")
        ]
    )
    return IterationTrace(
        index=df["Index number"].to_numpy(),
        fetch_start_ns=starts,
        fetch_s=df[cols("Fetch time (sec)_gpu{}")].to_numpy(dtype=float),
        iteration_s=df[cols("Iteration time (sec)_gpu{}")].to_numpy(dtype=float),
        stall_s=df[cols("Training Stall time (sec)_gpu{}")].to_numpy(dtype=float),
    )


@dataclass
class SimulatedIterations:
    """The outcome of one alignment setting, per iteration."""

    fetch_align: Align
    start_align: Align
    index: np.ndarray
    iteration_s: np.ndarray
    stall_s: np.ndarray
    """Largest stall over GPUs."""
    delay_s: np.ndarray
    """Largest minus smallest stall over GPUs."""
    start_diff_s: np.ndarray
    """Spread of (simulated) fetch start over GPUs."""
    fetch_diff_s: np.ndarray
    """Spread of (simulated) fetch duration over GPUs."""

    @property
    def label(self) -> str:
        return _label(self.fetch_align, self.start_align)


def _label(fetch_align: Align, start_align: Align) -> str:
    """FusionFlow's name of an alignment (its folder and ``Align`` column)."""
    return f"FETCH_ALIGN_{fetch_align}_START_ALIGN_{start_align}"


def simulate_alignment(trace: IterationTrace, fetch_align: Align, start_align: Align) -> SimulatedIterations:
    """Re-simulate a DDP trace with fetch durations and/or fetch starts aligned across GPUs."""
    for name, value in (("fetch_align", fetch_align), ("start_align", start_align)):
        if value not in ALIGN_CHOICES:
            raise ValueError(f"{name} must be one of False, 'min', 'avg'; got {value!r}")
    starts = trace.fetch_start_ns
    g = starts.shape[1]
    if start_align == "min":
        sim_start = np.repeat(starts.min(axis=1, keepdims=True), g, axis=1)
    elif start_align == "avg":
        hi, lo = starts.max(axis=1, keepdims=True), starts.min(axis=1, keepdims=True)
        sim_start = np.repeat(hi - (hi - lo) // 2, g, axis=1)
    else:
        sim_start = starts
    if fetch_align == "min":
        sim_fetch = np.repeat(trace.fetch_s.min(axis=1, keepdims=True), g, axis=1)
    elif fetch_align == "avg":
        sim_fetch = np.repeat(trace.fetch_s.mean(axis=1, keepdims=True), g, axis=1)
    else:
        sim_fetch = trace.fetch_s
    measured_done = starts + _to_ns(trace.fetch_s)
    sim_done = sim_start + _to_ns(sim_fetch)

    stall = trace.stall_s
    if fetch_align or start_align:
        pure = trace.iteration_s - stall.max(axis=1, keepdims=True)
        gap = (measured_done - sim_done) / 1e9  # > 0: the batch is ready earlier than it was
        earlier = stall - gap
        earlier = np.where(earlier < 0.0, _MIN_STALL_S, earlier)
        later = np.where(stall > _STALLED_S, stall - gap, stall)
        new_stall = np.where(gap > 0, earlier, np.where(gap < 0, later, stall))
        iteration = (new_stall.max(axis=1, keepdims=True) + pure).max(axis=1)
    else:
        new_stall = stall
        iteration = trace.iteration_s.max(axis=1)
    return SimulatedIterations(
        fetch_align=fetch_align,
        start_align=start_align,
        index=trace.index,
        iteration_s=iteration,
        stall_s=new_stall.max(axis=1),
        delay_s=new_stall.max(axis=1) - new_stall.min(axis=1),
        start_diff_s=(sim_start.max(axis=1) - sim_start.min(axis=1)) / 1e9,
        fetch_diff_s=sim_fetch.max(axis=1) - sim_fetch.min(axis=1),
    )


@dataclass(frozen=True)
class MeanStd:
    mean: float
    std: float

    def format(self, digits: int = 4) -> str:
        return f"{round(self.mean, digits)}±{round(self.std, digits)}"


def _mean_std(x: np.ndarray) -> MeanStd:
    if len(x) == 0:
        return MeanStd(math.nan, math.nan)
    return MeanStd(float(np.mean(x)), float(np.std(x, ddof=1)) if len(x) > 1 else math.nan)


@dataclass(frozen=True)
class AlignmentSummary:
    """One row of the what-if table (FusionFlow's ``total_summary.csv``)."""

    iterations: int
    iteration_s: MeanStd
    stall_s: MeanStd
    delay_s: MeanStd
    effective_delay_pct: float
    start_diff_s: MeanStd
    fetch_diff_s: MeanStd
    fetch_align: Align = False
    start_align: Align = False

    @property
    def label(self) -> str:
        return _label(self.fetch_align, self.start_align)

    @property
    def short_label(self) -> str:
        def word(a: Align) -> str:
            return a if a else "as run"

        return f"fetch {word(self.fetch_align)}, start {word(self.start_align)}"


def summarise(sim: SimulatedIterations, min_index: int = SUMMARY_MIN_INDEX) -> AlignmentSummary:
    """Mean ± sample std over iterations with index > ``min_index``; effective delay share in %."""
    keep = sim.index > min_index
    delay = sim.delay_s[keep]
    return AlignmentSummary(
        iterations=int(keep.sum()),
        iteration_s=_mean_std(sim.iteration_s[keep]),
        stall_s=_mean_std(sim.stall_s[keep]),
        delay_s=_mean_std(delay),
        effective_delay_pct=float((delay > EFFECTIVE_DELAY_S).sum()) / len(delay) * 100.0
        if len(delay)
        else 0.0,
        start_diff_s=_mean_std(sim.start_diff_s[keep]),
        fetch_diff_s=_mean_std(sim.fetch_diff_s[keep]),
        fetch_align=sim.fetch_align,
        start_align=sim.start_align,
    )


def what_if_table(
    trace: IterationTrace, settings: Iterable[tuple[Align, Align]] | None = None
) -> list[AlignmentSummary]:
    """Summaries for every (fetch_align, start_align) combination (default: all nine)."""
    combos = settings or [(f, s) for f in ALIGN_CHOICES for s in ALIGN_CHOICES]
    return [summarise(simulate_alignment(trace, f, s)) for f, s in combos]
