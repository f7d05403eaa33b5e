"""Per-run and per-configuration metrics: the numbers in ``sweep.csv`` and the report's table.

Definitions (written once here; ``docs/analysis.md`` repeats them for users):

* **steady step time**: mean step time of the primary rank, leaving out the first step of every epoch
  (warm-up: 15-2,300x a normal step in the seed data, and the data pipeline restarts each epoch).
* **epoch time**: mean measured time of epochs 2..n (epoch 1 carries the warm-up); with a single epoch,
  its steady steps plus its validation.
* **time to train**: the training loop for the requested epochs: measured when the run did them all,
  else epoch 1 + (E - 1) x epoch time.
* **billable time**: DescribeTrainingJob's when the job record has it, else the fitted fixed per-job
  overhead + time to train (:mod:`trainsweep.cost.billing`).
* **samples/s** = batch size / steady step time (the batch size is what one step of the instance consumes);
  per configuration, batch size / mean step time over the repetitions.
* **cost per epoch** = epoch time x instance price; **cost to train** = billable time x price;
  **samples per dollar** = samples/s x 3600 / price.
* **iterations per dollar** (:func:`iterations_per_usd`) = (3600 / price - one-off seconds) x
  ranks / step time: the iterations (one per rank per step) that one dollar of one instance buys.
  Dollar-seconds are *not* multiplied by the number of ranks: the ranks share the instance.
* **data-wait share**, **utilisation**, **dollars waiting**: :mod:`trainsweep.stalls`.

Per-run figures are computed by :mod:`trainsweep.cost.runs` (:func:`run_metrics`); this module groups
them into configurations (:func:`aggregate`) and writes ``sweep.csv``'s columns.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainsweep import axes as axis
from trainsweep import instances
from trainsweep.cost import accuracy, billing, run_notes, throughput
from trainsweep.cost.prices import EC2, LOCAL, SAGEMAKER, hourly_usd
from trainsweep.cost.runs import (
    FAILED,
    INFEASIBLE,
    OK,
    SKIPPED,
    RunMetrics,
    job_status,
    resolve_instance_type,
    run_metrics,
    run_steady_steps,
    samples_per_step,
    steady_steps,
    unmatched_metrics,
    without_empty_axes,
)
from trainsweep.logs import mllog
from trainsweep.training.metric_lines import TargetRule

__all__ = [
    "CSV_COLUMNS",
    "FAILED",
    "INFEASIBLE",
    "OK",
    "SAGEMAKER",
    "SKIPPED",
    "ConfigMetrics",
    "RunMetrics",
    "aggregate",
    "csv_columns",
    "csv_record",
    "iterations_per_usd",
    "job_status",
    "not_judged_reason",
    "resolve_instance_type",
    "run_metrics",
    "run_steady_steps",
    "samples_per_step",
    "set_scaling_efficiency",
    "steady_steps",
    "unmatched_metrics",
]

CSV_COLUMNS = (
    "instance_type",
    "platform",
    "instance_count",
    "gpus",
    "batch_size",
    "runs",
    "step_time_s",
    "step_time_std_s",
    "samples_per_s",
    "samples_per_s_std",
    "epoch_time_s",
    "epoch_time_std_s",
    "time_to_train_s",
    "time_to_train_std_s",
    "billable_s",
    "billable_source",
    "usd_per_hour",
    "cost_per_epoch_usd",
    "cost_to_train_usd",
    "samples_per_usd",
    "iterations_per_usd",
    "scaling_efficiency",
    "data_wait_share",
    "utilisation",
    "usd_waiting",
    "spot_savings_share",
    "gpu_memory_share",
    "eval_accuracy",
    "eval_accuracy_se",
    "eval_samples",
    "optimizer_steps",
    "time_to_target_s",
    "cost_to_target_usd",
    "quality",
    "accuracy_note",
    "status",
    "notes",
    "not_judged",
)


def csv_columns(rows: Sequence[ConfigMetrics]) -> tuple[str, ...]:
    """``sweep.csv``'s columns: :data:`CSV_COLUMNS`, with one per axis after ``batch_size`` when the rows
    have a setting of the spec's axes, and the token and MFU columns rows have
    (:func:`trainsweep.cost.throughput.csv_columns`) at the end."""
    names = [_axis_column(n) for n in axis.names_of([r.axes for r in rows])]
    at = CSV_COLUMNS.index("batch_size") + 1
    return (*CSV_COLUMNS[:at], *names, *CSV_COLUMNS[at:], *throughput.csv_columns(rows))


def _axis_column(name: str) -> str:
    """An axis's ``sweep.csv`` column: its name, or ``axis.<name>`` where a figure has that name."""
    return f"axis.{name}" if name in CSV_COLUMNS or name in throughput.OPTIONAL_COLUMNS else name


def csv_record(row: ConfigMetrics) -> dict[str, Any]:
    """A row's values by ``sweep.csv`` column (its setting's values under the axes' names)."""
    return {**row.to_dict(), **{_axis_column(name): axis.text(v) for name, v in row.axes.items()}}


def iterations_per_usd(
    step_s: float | None, usd_per_hour: float | None, *, ranks: int = 1, fixed_s: float = 0.0
) -> float | None:
    """Iterations one dollar of one instance buys.

    Args:
        step_s: seconds per iteration of one rank (steady state).
        usd_per_hour: the instance's price.
        ranks: ranks (processes) training on that one instance; each does one iteration per step.
        fixed_s: one-off seconds a dollar's worth of time spends not iterating (e.g. initialisation).

    Returns:
        ``(3600 / usd_per_hour - fixed_s) * ranks / step_s``; None when price or step time is unknown
        or zero (free local runs have no finite figure).
    """
    if step_s is None or usd_per_hour is None or step_s <= 0 or usd_per_hour <= 0:
        return None
    return (3600.0 / usd_per_hour - fixed_s) * ranks / step_s


def _finite(xs: Sequence[float | None]) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def _mean(xs: Sequence[float | None]) -> float | None:
    v = _finite(xs)
    return statistics.fmean(v) if v else None


def _std(xs: Sequence[float | None]) -> float | None:
    v = _finite(xs)
    return statistics.stdev(v) if len(v) > 1 else (0.0 if v else None)


def _missed_why(goal: TargetRule, missed: Sequence[RunMetrics]) -> str:
    """What the runs that missed the target saw: their best value, a metric that never matched, or none."""
    seen = _finite([r.target_metric_value for r in missed])
    if seen:
        best = min(seen) if goal.minimize else max(seen)
        return f"best {goal.metric} {best:.4g}"
    unmatched = sorted({n for r in missed for n in r.unmatched_metrics if n == goal.metric})
    if unmatched:
        return f"metric {unmatched[0]} never matched the output"
    return "no evaluation"


@dataclass
class ConfigMetrics:
    """One row of ``sweep.csv``: one instance type x batch size, aggregated over its repetitions."""

    instance_type: str
    gpus: int | None
    batch_size: int | None
    runs: int
    platform: str = SAGEMAKER
    """Where the configuration ran (``sagemaker``, ``ec2``, ``local``): its prices and overhead."""
    step_time_s: float | None = None
    step_time_std_s: float | None = None
    samples_per_s: float | None = None
    samples_per_s_std: float | None = None
    epoch_time_s: float | None = None
    epoch_time_std_s: float | None = None
    time_to_train_s: float | None = None
    time_to_train_std_s: float | None = None
    billable_s: float | None = None
    billable_source: str | None = None
    usd_per_hour: float | None = None
    cost_per_epoch_usd: float | None = None
    cost_to_train_usd: float | None = None
    samples_per_usd: float | None = None
    iterations_per_usd: float | None = None
    data_wait_share: float | None = None
    utilisation: float | None = None
    usd_waiting: float | None = None
    spot_savings_share: float | None = None
    gpu_memory_share: float | None = None
    """The largest share of the GPU's memory a repetition held (None: no GPU or not logged)."""
    eval_accuracy: float | None = None
    """Mean over repetitions of the last evaluation's accuracy (None: no run evaluated)."""
    eval_accuracy_se: float | None = None
    """Its standard error (:func:`trainsweep.cost.accuracy.accuracy_se`; None: one run, size not logged)."""
    eval_samples: int | None = None
    """Samples one evaluation scored (the fewest over repetitions; None: not logged)."""
    optimizer_steps: float | None = None
    """Mean over repetitions of the optimizer steps trained (None: the logs have no steps)."""
    steps_to_learn: int | None = None
    """Optimizer steps its runs took to come within the quality margin of their final accuracy."""
    time_to_target_s: float | None = None
    """Mean time to reach the spec's target (every repetition reached it), else None."""
    cost_to_target_usd: float | None = None
    quality: str = ""
    """Why the configuration learns worse than the others ("" when it does not): it fell more than the
    margin below the best eval_accuracy, or did not reach the target."""
    accuracy_note: str = ""
    """Below the best by more than the margin, but not distinguishably so: it still takes part."""
    status: str = OK
    notes: str = ""
    not_judged: str = ""
    """Why the recommendation could not judge this configuration (``<what is missing>: <detail>``);
    empty when it took part."""
    vmtype: str | None = None
    attempts: int = 0
    aligned_step_s: float | None = None
    free_step_s: float | None = None
    instance_count: int = 1
    """Instances per job: prices and costs are of all of them."""
    scaling_efficiency: float | None = None
    """Throughput per instance against one instance of the same type and batch size (1.0 = linear);
    None for one instance, or when the sweep has no one-instance row to compare with."""

    axes: dict[str, Any] = field(default_factory=dict)
    """The configuration's setting of the spec's axes (empty without axes): one column each in sweep.csv."""
    not_honoured: list[str] = field(default_factory=list)
    """What of the setting its runs did not do (:attr:`RunMetrics.not_honoured`, each once); also in
    :attr:`notes`."""
    tokens_per_sample: float | None = None
    tokens_per_s: float | None = None
    tokens_per_usd: float | None = None
    usd_per_million_tokens: float | None = None
    flops_per_sample: float | None = None
    mfu: float | None = None
    mfu_note: str | None = None
    """Token and MFU figures: :mod:`trainsweep.cost.throughput`."""

    @property
    def machine(self) -> str:
        """The instance type, ``x N`` for N instances per job, marked ``(EC2)`` when it ran on plain EC2."""
        name = (
            self.instance_type if self.instance_count == 1 else f"{self.instance_type} x{self.instance_count}"
        )
        return f"{name} (EC2)" if self.platform == EC2 else name

    @property
    def label(self) -> str:
        setting = f" ({axis.label(self.axes)})" if self.axes else ""
        return f"{self.machine} x {self.batch_size}{setting}"

    def to_dict(self) -> dict[str, Any]:
        return without_empty_axes(asdict(self))


_ConfigKey = tuple[str, int | None, str, int, tuple[tuple[str, Any], ...]]
"""A configuration: instance type, batch size, platform, instance count, setting of the axes."""


def _setting_key(setting: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple((setting or {}).items())


def _vmtype(instance_type: str, count: int = 1) -> str | None:
    try:
        return instances.vmtype_with_nodes(instance_type, count)
    except KeyError:
        return None


_ExtraCell = (
    tuple[str, int | None, str, str | None]
    | tuple[str, int | None, str, str | None, int]
    | tuple[str, int | None, str, str | None, int, Mapping[str, Any] | None]
)
"""A planned job that left no run: (type, batch size, status, reason[, instance count[, setting]])."""


def aggregate(
    runs: Sequence[RunMetrics],
    *,
    region: str = "us-east-1",
    instance_count: int = 1,
    extra_cells: Iterable[_ExtraCell] = (),
    prices: Mapping[str, float] | None = None,
    quality_margin: float | None = None,
    target: float | None = None,
    target_metric: str = mllog.EVAL_ACCURACY,
    minimize: bool = False,
) -> list[ConfigMetrics]:
    """Group run figures by (instance type, instance count, batch size) into sweep rows, sorted by type
    then batch size.

    ``instance_count`` is the count of runs that do not say theirs. ``prices``: USD per hour of SageMaker
    types as the sweep's plan priced them (``jobs.json``'s ``hourly_usd``: the spec's ``prices``, the
    stack's cache, the Pricing API); they win over the catalogue.

    ``extra_cells`` adds ``(instance_type, batch_size, status, reason)`` for planned jobs that left no run,
    or ``(instance_type, batch_size, status, reason, instance_count[, setting of the axes])``.
    A setting of the axes is part of a configuration: runs of two settings are two rows.
    With ``target`` (an eval_accuracy), a configuration some repetition of which never reached it gets a
    ``quality`` flag; without, one whose eval_accuracy is more than ``quality_margin`` below the best does.
    """
    groups, reasons = _group(runs, extra_cells, instance_count)
    goal = None if target is None else TargetRule.of(target_metric, target, minimize=minimize)
    rows = []
    for key, members in groups.items():
        row = _config_row(key, members, reasons.get(key, []), region, prices)
        ok = [r for r in members if r.status == OK]
        notes = (
            _measured_row(row, ok, members, quality_margin, goal, region)
            if ok
            else _unmeasured_row(row, members, reasons.get(key, []))
        )
        row.notes = "; ".join(notes)
        rows.append(row)
    if target is None and quality_margin is not None:
        accuracy.flag_below_best(rows, quality_margin)
    for row in rows:
        row.not_judged = not_judged_reason(row, region, by_target=target is not None)
    order = {name: i for i, name in enumerate(instances.CATALOGUE)}
    rows.sort(
        key=lambda r: (
            order.get(r.instance_type, len(order)),
            r.instance_type,
            r.platform,
            r.instance_count,
            r.batch_size or 0,
        )
    )
    set_scaling_efficiency(rows)
    return rows


def _group(
    runs: Sequence[RunMetrics], extra_cells: Iterable[_ExtraCell], instance_count: int
) -> tuple[dict[_ConfigKey, list[RunMetrics]], dict[_ConfigKey, list[tuple[str, str | None]]]]:
    """The runs of each configuration, and the (status, reason) of each planned job that left no run
    (its configuration is a group too, maybe an empty one)."""
    groups: dict[_ConfigKey, list[RunMetrics]] = {}
    for r in runs:
        count = r.instance_count or instance_count
        key = (r.instance_type or "unknown", r.batch_size, r.platform, count, _setting_key(r.axes))
        groups.setdefault(key, []).append(r)
    reasons: dict[_ConfigKey, list[tuple[str, str | None]]] = {}
    for cell in extra_cells:
        itype, bs, status, reason = cell[:4]
        count = int(cell[4]) if len(cell) > 4 and cell[4] else instance_count  # type: ignore[misc]
        setting = _setting_key(cell[5] if len(cell) > 5 else None)  # type: ignore[misc]
        where = LOCAL if itype in (instances.LOCAL_CPU, instances.LOCAL_GPU) else SAGEMAKER
        reasons.setdefault((itype, bs, where, count, setting), []).append((status, reason))
        groups.setdefault((itype, bs, where, count, setting), [])
    return groups, reasons


def _config_row(
    key: _ConfigKey,
    members: Sequence[RunMetrics],
    cell_reasons: Sequence[tuple[str, str | None]],
    region: str,
    prices: Mapping[str, float] | None,
) -> ConfigMetrics:
    """A configuration's row before its figures: what it is, its runs and its price."""
    itype, bs, platform, count, setting = key
    t = instances.CATALOGUE.get(itype)
    planned = (prices or {}).get(itype) if platform == SAGEMAKER else None
    return ConfigMetrics(
        instance_type=itype,
        gpus=t.gpus if t else None,
        batch_size=bs,
        runs=sum(1 for r in members if r.status == OK),
        platform=platform,
        usd_per_hour=planned if planned is not None else hourly_usd(itype, region, platform),
        vmtype=_vmtype(itype, count) if t else None,
        attempts=len(members) + len(cell_reasons),
        instance_count=count,
        axes=dict(setting),
    )


def _measured_row(
    row: ConfigMetrics,
    ok: Sequence[RunMetrics],
    members: Sequence[RunMetrics],
    quality_margin: float | None,
    goal: TargetRule | None,
    region: str,
) -> list[str]:
    """Fill the row of a configuration some run of which measured it; returns its notes."""
    _timing_means(row, ok)
    _accuracy_evidence(row, ok, quality_margin)
    if goal is not None:
        _target_reached(row, ok, goal)
    row.data_wait_share = _mean([r.data_wait_share for r in ok])
    row.utilisation = _mean([r.utilisation for r in ok])
    row.aligned_step_s = _mean([r.aligned_step_s for r in ok])
    row.free_step_s = _mean([r.free_step_s for r in ok])
    notes = []
    if row.usd_per_hour is None:
        notes.append(f"no {'EC2 ' if row.platform == EC2 else ''}price for {row.instance_type} in {region}")
    else:
        _costs(row, ok, row.usd_per_hour)
    throughput.config_figures(row, ok)
    row.status = OK
    return notes + _run_notes(row, ok, members)


def _timing_means(row: ConfigMetrics, ok: Sequence[RunMetrics]) -> None:
    """Step, epoch, training and billable times over the runs, the throughput, spot savings, GPU memory."""
    row.step_time_s, row.step_time_std_s = _mean([r.step_s for r in ok]), _std([r.step_s for r in ok])
    # Throughput of the configuration = batch / mean step (not the mean of per-run ratios), so
    # that the table's columns agree; the spread is that of the per-run throughputs.
    # (a run that trained with another batch size than asked counts with the one it used, times the
    # batches a step of it trains)
    bs = row.batch_size
    trained = _mean([float(samples_per_step(r) or bs or 0) for r in ok]) if bs else None
    if trained and row.step_time_s:
        row.samples_per_s = trained / row.step_time_s
    row.samples_per_s_std = _std([r.samples_per_s for r in ok])
    eps = [r.epoch_s for r in ok]
    row.epoch_time_s, row.epoch_time_std_s = _mean(eps), _std(eps)
    ttt = [r.time_to_train_s for r in ok]
    row.time_to_train_s, row.time_to_train_std_s = _mean(ttt), _std(ttt)
    row.billable_s = _mean([r.billable_s for r in ok])
    sources = sorted({r.billable_source for r in ok if r.billable_source})
    row.billable_source = "+".join(sources) if sources else None
    row.spot_savings_share = _mean([r.spot_savings_share for r in ok])
    row.gpu_memory_share = max(_finite([r.gpu_memory_share for r in ok]), default=None)


def _target_reached(row: ConfigMetrics, ok: Sequence[RunMetrics], goal: TargetRule) -> None:
    """The mean time to target when every run reached it, else the row's quality flag saying why not."""
    missed = [r for r in ok if r.time_to_target_s is None]
    if missed:
        row.quality = (
            f"did not reach target: {goal.describe()} not reached by {len(missed)} of "
            f"{len(ok)} runs ({_missed_why(goal, missed)})"
        )
    else:
        row.time_to_target_s = _mean([r.time_to_target_s for r in ok])


def _costs(row: ConfigMetrics, ok: Sequence[RunMetrics], price: float) -> None:
    """The row's dollar figures at ``price`` per instance-hour, for all of its instances."""
    count = row.instance_count
    if row.epoch_time_s is not None:
        row.cost_per_epoch_usd = billing.cost_usd(row.epoch_time_s, price, count)
    if row.billable_s is not None:
        row.cost_to_train_usd = billing.cost_usd(row.billable_s, price, count)
    to_target = _mean([r.billable_to_target_s for r in ok])
    if row.time_to_target_s is not None and to_target is not None:
        row.cost_to_target_usd = billing.cost_usd(to_target, price, count)
    if row.samples_per_s is not None and price > 0:
        row.samples_per_usd = row.samples_per_s * 3600.0 / (price * count)
    row.iterations_per_usd = iterations_per_usd(row.step_time_s, price * count)
    if row.data_wait_share is not None and row.time_to_train_s is not None:
        row.usd_waiting = billing.cost_usd(row.data_wait_share * row.time_to_train_s, price, count)


def _run_notes(row: ConfigMetrics, ok: Sequence[RunMetrics], members: Sequence[RunMetrics]) -> list[str]:
    """What a reader of the row should know about its runs: failures, predictions, batch sizes, stops."""
    notes = []
    failed = len(members) - len(ok)
    if failed:
        notes.append(f"{failed} of {len(members)} runs failed")
    predicted = sum(1 for r in ok if r.prediction_used)
    if predicted:
        notes.append(f"{predicted} run(s) early-stopped: epoch and training times are their predictions")
    notes.extend(run_notes.how_runs_trained(ok, row.batch_size))
    notes.extend(_not_honoured(row, ok))
    early = sum(1 for r in ok if r.reason)
    if early:
        notes.append(f"{early} run(s) stopped early ({ok[0].reason if early == 1 else 'see runs'})")
    return notes


def _not_honoured(row: ConfigMetrics, ok: Sequence[RunMetrics]) -> list[str]:
    """The row's :attr:`ConfigMetrics.not_honoured`; its notes say how many of its runs each concerns."""
    said = [text for r in ok for text in r.not_honoured]
    row.not_honoured = list(dict.fromkeys(said))
    if len(ok) == 1:
        return list(row.not_honoured)
    return [f"{text} ({said.count(text)} of {len(ok)} runs)" for text in row.not_honoured]


def _unmeasured_row(
    row: ConfigMetrics, members: Sequence[RunMetrics], cell_reasons: Sequence[tuple[str, str | None]]
) -> list[str]:
    """The status of a configuration no run measured (infeasible, skipped or failed); returns its notes."""
    statuses = [r.status for r in members] + [s for s, _ in cell_reasons]
    row.status = (
        INFEASIBLE
        if INFEASIBLE in statuses
        else SKIPPED
        if statuses and all(s == SKIPPED for s in statuses)
        else FAILED
    )
    why = [r.reason for r in members if r.reason] + [w for _, w in cell_reasons if w]
    return ["; ".join(dict.fromkeys(why))] if why else []


def set_scaling_efficiency(rows: Sequence[ConfigMetrics]) -> None:
    """Each multi-instance row's throughput per instance against the one-instance row of the same type,
    platform and batch size (samples/s: the batch size is global, split over every instance's ranks)."""
    single = {
        (r.instance_type, r.platform, r.batch_size, _setting_key(r.axes)): r.samples_per_s
        for r in rows
        if r.instance_count == 1 and r.samples_per_s
    }
    for r in rows:
        base = single.get((r.instance_type, r.platform, r.batch_size, _setting_key(r.axes)))
        if r.instance_count > 1 and base and r.samples_per_s:
            r.scaling_efficiency = r.samples_per_s / (base * r.instance_count)


def _accuracy_evidence(row: ConfigMetrics, ok: Sequence[RunMetrics], margin: float | None) -> None:
    """The configuration's mean eval_accuracy, its standard error, the optimizer steps its runs made and
    how many they needed to come within ``margin`` of that accuracy."""
    evaluated = [r for r in ok if r.eval_accuracy is not None]
    row.eval_accuracy = _mean([r.eval_accuracy for r in evaluated])
    row.optimizer_steps = _mean([r.optimizer_steps for r in ok if r.optimizer_steps is not None])
    if row.eval_accuracy is None:
        return
    row.eval_accuracy_se = accuracy.accuracy_se(
        [r.eval_accuracy for r in evaluated if r.eval_accuracy is not None],
        [r.eval_samples for r in evaluated],
    )
    sizes = [r.eval_samples for r in evaluated if r.eval_samples]
    row.eval_samples = min(sizes) if sizes else None
    if margin is not None:
        row.steps_to_learn = accuracy.steps_to_learn(
            [r.accuracy_curve for r in evaluated], row.eval_accuracy, margin
        )


def not_judged_reason(row: ConfigMetrics, region: str | None = None, *, by_target: bool = False) -> str:
    """Why a configuration cannot be compared with the others, as ``<what is missing>: <detail>``
    ("" when it can be): the first missing of instance type, timings (or infeasible), price, time to train;
    then its quality flag (it learns worse, or it did not reach the target: never recommended)."""
    if row.instance_type not in instances.CATALOGUE:
        if row.instance_type == "unknown":
            return "no instance type: neither the log's name, its folder nor the log says it"
        return f"no instance type: {row.instance_type!r} is not a spelling trainsweep reads"
    if row.status == INFEASIBLE:
        return f"infeasible: {row.notes or 'the configuration cannot run'}"
    if row.status == SKIPPED:
        return f"skipped: {row.notes.removeprefix('not run: ') or 'not run (batch-size search)'}"
    if row.status != OK:
        return f"no timings: {row.notes or 'no run of it finished'}"
    if row.usd_per_hour is None:
        on = " on EC2" if row.platform == EC2 else ""
        return f"no price: no price for {row.instance_type}{on}" + (f" in {region}" if region else "")
    if row.time_to_train_s is None or row.cost_to_train_usd is None:
        return "no time to train: the runs do not give one for the epochs compared"
    if row.quality:
        return row.quality
    if by_target and (row.time_to_target_s is None or row.cost_to_target_usd is None):
        return "no time to target: the runs do not give one"
    return ""
