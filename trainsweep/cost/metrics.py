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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainsweep import axes as axis
from trainsweep import instances
from trainsweep.cost import accuracy, billing, throughput
from trainsweep.cost.prices import EC2, LOCAL, SAGEMAKER, hourly_usd
from trainsweep.logs import mllog
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.stalls import run_stall_stats
from trainsweep.training.metric_lines import TargetRule

OK, FAILED, INFEASIBLE, SKIPPED = "ok", "failed", "infeasible", "skipped"
"""A configuration's status; SKIPPED: the batch-size search did not run it (throughput plateau)."""

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


def steady_steps(epochs: Sequence[Epoch]) -> list[float]:
    """Step times without the first step of each epoch."""
    out: list[float] = []
    for e in epochs:
        out.extend(list(e.step_s)[1:])
    return out


def gpu_memory_share(run: RunTimings) -> float | None:
    """Peak reserved GPU memory / the GPU's total, from the container's ``trainsweep.gpu_memory`` event."""
    value = run.extra.get(mllog.GPU_MEMORY)
    if not isinstance(value, dict):
        return None
    peak, total = value.get("peak_reserved_bytes"), value.get("total_bytes")
    if not isinstance(peak, (int, float)) or not isinstance(total, (int, float)) or total <= 0 or peak < 0:
        return None
    return float(peak) / float(total)


def _epoch_time(e: Epoch) -> float | None:
    if e.epoch_s is not None and math.isfinite(e.epoch_s) and e.epoch_s > 0:
        return e.epoch_s
    if e.steps:
        return sum(e.step_s) + (e.validation_s or 0.0)
    return None


def resolve_instance_type(run: RunTimings, job: Mapping[str, Any] | None = None) -> str | None:
    """The ``ml.*`` type of a run: job record, then the log header, then the seed VMTYPE of its name."""
    if job and job.get("instance_type"):
        return str(job["instance_type"])
    if run.header.instance_type and run.header.instance_type in instances.CATALOGUE:
        return run.header.instance_type
    if run.computing_system:
        t = instances.from_vmtype(run.computing_system)
        if t is not None:
            return t.name
    # Unknown to the catalogue: keep what the log or its name says, so the row is still identifiable.
    return run.header.instance_type or run.computing_system


def run_instance_count(run: RunTimings, job: Mapping[str, Any] | None = None) -> int | None:
    """Instances the run's job had: the job record's ``instance_count``, else what its name says
    (``p3-1x2``: 2); None when neither says (a seed log: one instance, or the caller's default)."""
    if job and job.get("instance_count"):
        return int(job["instance_count"])
    if run.computing_system:
        spelled = instances.read_spelling(run.computing_system)
        if spelled is not None and spelled.nodes > 1:
            return spelled.nodes
    return None


def run_platform(run: RunTimings, job: Mapping[str, Any] | None = None, itype: str | None = None) -> str:
    """Where a run ran: the job record's ``platform``, else what its name or folder said (the parser's
    ``trainsweep.platform``), else ``local`` for the local types, else ``sagemaker``."""
    said = (job or {}).get("platform") or run.extra.get(mllog.PLATFORM)
    if said in (SAGEMAKER, EC2, LOCAL):
        return str(said)
    return LOCAL if itype in (instances.LOCAL_CPU, instances.LOCAL_GPU) else SAGEMAKER


@dataclass
class RunMetrics:
    """The figures of one run (one repetition of one configuration)."""

    name: str
    instance_type: str | None
    batch_size: int | None
    run_index: int | None
    status: str
    platform: str = SAGEMAKER
    """``sagemaker``, ``ec2`` or ``local``: an EC2 run has EC2 prices and no SageMaker start-up overhead."""
    reason: str | None = None
    epochs_measured: int = 0
    steps_per_epoch: int | None = None
    prediction_used: bool = False
    """The figures come from the run's early-stop prediction, not from complete epochs."""
    step_s: float | None = None
    first_epoch_s: float | None = None
    epoch_s: float | None = None
    training_s: float | None = None
    time_to_train_s: float | None = None
    billable_s: float | None = None
    billable_source: str | None = None
    spot_savings_share: float | None = None
    samples_per_s: float | None = None
    data_wait_share: float | None = None
    utilisation: float | None = None
    aligned_step_s: float | None = None
    free_step_s: float | None = None
    gpu_memory_share: float | None = None
    """Peak GPU memory the run's process held (PyTorch reserved) / the GPU's memory; None without a GPU."""
    problems: list[str] = field(default_factory=list)
    batch_size_trained: int | None = None
    """Set when the run trained with another batch size than its name asks for (a script that ignored its
    batch-size argument): throughput uses this one."""
    instance_count: int | None = None
    """Instances of the run's job (None: not said; :func:`aggregate` then uses its default)."""
    eval_accuracy: float | None = None
    """The last evaluation's accuracy (None: the run never evaluated, e.g. early-stopped)."""
    eval_samples: int | None = None
    """Samples each evaluation scored (the log's ``eval_samples``; None: not logged)."""
    optimizer_steps: int | None = None
    """Training steps (optimizer updates) over the epochs measured (None: the log has no steps)."""
    accuracy_curve: list[tuple[int, float]] = field(default_factory=list)
    """(optimizer steps done, eval_accuracy) at each evaluation."""
    target_epoch: int | None = None
    """The first epoch whose evaluation reached the target (None: no target, or not reached)."""
    time_to_target_s: float | None = None
    """Training from its start to the end of :attr:`target_epoch` (evaluations included)."""
    billable_to_target_s: float | None = None
    target_metric_value: float | None = None
    """The last evaluation of the target's metric (None: no target, or never evaluated)."""
    unmatched_metrics: list[str] = field(default_factory=list)
    """Metric definitions no line of the run's output matched (``workload.metric_definitions``)."""
    axes: dict[str, Any] = field(default_factory=dict)
    """The run's setting of the spec's axes (empty without axes)."""
    precision: str | None = None
    """The precision a built-in really trained in (its log says; None for other runs)."""
    tokens_per_sample: float | None = None
    tokens_per_s: float | None = None
    flops_per_sample: float | None = None
    mfu: float | None = None
    mfu_note: str | None = None
    """Token and MFU figures: :mod:`trainsweep.cost.throughput`."""

    def to_dict(self) -> dict[str, Any]:
        return _without_empty_axes(asdict(self))


def _without_empty_axes(d: dict[str, Any]) -> dict[str, Any]:
    """A record without the axes' keys when the sweep has none: its JSON is as it was before axes."""
    if not d.get("axes"):
        d.pop("axes", None)
        d.pop("precision", None)
    return d


def run_setting(run: RunTimings, job: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's setting of the axes: its cell record's (the plan's), else what its log says."""
    said = (job or {}).get("axes") or run.extra.get(axis.LOG_KEY)
    return dict(said) if isinstance(said, Mapping) else {}


_RUN_STATUS = {"complete": OK, "partial": OK, "failed": FAILED, "empty": FAILED, "unreadable": FAILED}


def job_status(job: Mapping[str, Any] | None) -> str | None:
    """Normalise a job record's status to ok / failed / infeasible / skipped (None: no record)."""
    if not job:
        return None
    s = str(job.get("status") or "").strip().lower()
    # A job stopped by its time limit, or one that left a partial log, still measured its steps.
    if s in ("ok", "completed", "complete", "succeeded", "partial", "timeout", "stopped"):
        return OK
    if s in (INFEASIBLE, SKIPPED):
        return s
    return FAILED


def _stopped_early(job: Mapping[str, Any] | None) -> str | None:
    s = str((job or {}).get("status") or "").lower()
    return (
        f"job ended {s}: timings are from the steps it ran"
        if s in ("partial", "timeout", "stopped")
        else None
    )


def run_metrics(
    run: RunTimings,
    *,
    epochs: int | None = None,
    job: Mapping[str, Any] | None = None,
    overhead_s: float = billing.FIXED_OVERHEAD_S,
    target_value: float | None = None,
    target_metric: str = mllog.EVAL_ACCURACY,
    minimize: bool = False,
    tokens_per_sample: float | None = None,
) -> RunMetrics:
    """Figures of one run; ``epochs`` is the number of epochs to predict the training time for;
    ``target_value`` the value of ``target_metric`` (eval_accuracy, or a metric the run logged per epoch)
    whose first reaching (at or above it; at or below with ``minimize``) ends the time to target;
    ``tokens_per_sample`` the spec's (a run's log or setting wins)."""
    status = job_status(job) or (
        SKIPPED if run.extra.get("failure_kind") == SKIPPED else _RUN_STATUS.get(run.status, FAILED)
    )
    bs = run.batch_size or run.header.batch_size or (job or {}).get("batch_size")
    itype = resolve_instance_type(run, job)
    platform = run_platform(run, job, itype)
    if platform == EC2:
        overhead_s = 0.0  # no SageMaker job to start: the instance bills the training itself
    m = RunMetrics(
        name=run.name,
        instance_type=itype,
        batch_size=int(bs) if bs is not None else None,
        run_index=run.run_index,
        status=status,
        platform=platform,
        reason=(job or {}).get("reason") or run.failure_reason or _stopped_early(job),
        problems=[p.code for p in run.problems],
        instance_count=run_instance_count(run, job),
        axes=run_setting(run, job),
        precision=_text_or_none(run.extra.get(axis.PRECISION_KEY)),
    )
    trained = run.header.batch_size
    # trainsweep's own logs (the container, the instrumentation of a script) record the batch size the run
    # really trained with; a seed log's header is not trusted over its name.
    if run.dialect == "mllog" and trained and m.batch_size and trained != m.batch_size:
        m.batch_size_trained = int(trained)
    eps = [e for e in run.epochs if e.steps or e.epoch_s]
    m.epochs_measured = len(eps)
    steps = steady_steps(eps)
    if steps:
        m.step_s = statistics.fmean(steps)
        m.steps_per_epoch = max(e.steps for e in eps)
    if eps:
        m.first_epoch_s = _epoch_time(eps[0])
        later = [t for t in (_epoch_time(e) for e in eps[1:]) if t is not None]
        if later:
            m.epoch_s = statistics.fmean(later)
        elif m.step_s is not None and m.steps_per_epoch:
            m.epoch_s = m.step_s * m.steps_per_epoch + (eps[0].validation_s or 0.0)
        measured = [t for t in (_epoch_time(e) for e in eps) if t is not None]
        m.training_s = run.fit_s if run.fit_s and math.isfinite(run.fit_s) else (sum(measured) or None)
    target = _target_epochs(run, epochs, m.epochs_measured)
    pred = _early_stop_prediction(run, target)
    if pred is not None:
        # An early-stopped run measured only the start of its training: its own prediction of the full
        # run (steady step, full epoch of training + validation, warm-up excess) is the figure to compare.
        m.step_s, m.steps_per_epoch, m.epoch_s = pred["step_s"], int(pred["steps_per_epoch"]), pred["epoch_s"]
        target = target or int(pred["epochs"])
        m.time_to_train_s = pred["total_s"] + (target - int(pred["epochs"])) * pred["epoch_s"]
        m.prediction_used = True
    elif target and m.training_s is not None and m.epochs_measured == target:
        m.time_to_train_s = m.training_s
    elif target and m.epochs_measured > target:
        # A longer run than asked for: its first ``target`` epochs as measured.
        firsts = [_epoch_time(e) for e in eps[:target]]
        m.time_to_train_s = sum(t for t in firsts if t is not None) if None not in firsts else None
    if m.time_to_train_s is None and target and m.first_epoch_s is not None and m.epoch_s is not None:
        m.time_to_train_s = m.first_epoch_s + (target - 1) * m.epoch_s
    if (m.batch_size_trained or m.batch_size) and m.step_s:
        m.samples_per_s = (m.batch_size_trained or m.batch_size or 0) / m.step_s

    known = billing.describe_training_job_times(
        {
            "BillableTimeInSeconds": (job or {}).get("billable_s"),
            "TrainingTimeInSeconds": (job or {}).get("training_s"),
        }
    )
    ran_all = (not target or m.epochs_measured == target) and not m.prediction_used
    if known["billable_s"] is not None and ran_all:
        m.billable_s, m.billable_source = known["billable_s"], "DescribeTrainingJob"
        m.spot_savings_share = known["spot_savings_share"]
    elif m.time_to_train_s is not None:
        m.billable_s = billing.modelled_billable_s(m.time_to_train_s, overhead_s)
        m.billable_source = "model"

    stall = run_stall_stats(run)
    if stall is not None:
        m.data_wait_share = stall.data_wait_share
        m.utilisation = stall.utilisation
        m.aligned_step_s = stall.aligned_step_s
        m.free_step_s = stall.free_step_s
    m.gpu_memory_share = gpu_memory_share(run)
    throughput.run_figures(m, run, tokens_per_sample)
    goal = None if target_value is None else TargetRule.of(target_metric, target_value, minimize=minimize)
    _quality(m, run, eps, goal, known["billable_s"], overhead_s)
    if status == OK and m.step_s is None:
        m.status = FAILED
        m.reason = m.reason or "the log has no training steps"
    return m


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def metric_values(run: RunTimings, eps: Sequence[Epoch], metric: str) -> list[tuple[int, float]]:
    """(position in ``eps``, value) of each epoch's evaluation of ``metric``: the epoch's accuracy for an
    accuracy name, else the run's ``trainsweep.metric.<name>`` events (``extra[METRIC_SERIES]``)."""
    if metric.lower() in mllog.ACCURACY_NAMES:
        pairs = [(i, e.validation_accuracy) for i, e in enumerate(eps)]
    else:
        series = (run.extra.get(mllog.METRIC_SERIES) or {}).get(metric) or {}
        pairs = [(i, series.get(str(e.index))) for i, e in enumerate(eps)]
    return [(i, float(v)) for i, v in pairs if isinstance(v, int | float) and math.isfinite(v)]


def unmatched_metrics(run: RunTimings) -> list[str]:
    """The metric definitions of the run that never matched its output."""
    said = run.extra.get(mllog.METRIC_UNMATCHED)
    return [str(d.get("metric")) for d in said if isinstance(d, dict)] if isinstance(said, list) else []


def _target_epochs(run: RunTimings, epochs: int | None, measured: int) -> int | None:
    """The epochs to predict the training time for. A step-based run (``workload.steps``) is one stretch
    of its steps: its time to train is that one "epoch" (steps x the steady step time + its evaluations +
    the one-off time), whatever ``epochs`` says."""
    if run.header.steps:
        return 1
    return epochs or run.header.epochs or measured or None


def _quality(
    m: RunMetrics,
    run: RunTimings,
    eps: Sequence[Epoch],
    goal: TargetRule | None,
    billed_s: float | None,
    overhead_s: float,
) -> None:
    """The run's last evaluation and, with a target, when it first reached it (MLPerf's time-to-train:
    the training from its start to the end of the first evaluation that reached the target)."""
    accuracies = metric_values(run, eps, mllog.EVAL_ACCURACY)
    if accuracies:
        m.eval_accuracy = accuracies[-1][1]
        m.eval_samples = run.header.eval_samples
    done = [sum(e.steps for e in eps[: i + 1]) for i in range(len(eps))]
    if done and done[-1]:
        m.optimizer_steps = done[-1]
        m.accuracy_curve = [(done[i], v) for i, v in accuracies]
    m.unmatched_metrics = unmatched_metrics(run)
    if goal is None:
        return
    values = metric_values(run, eps, goal.metric)
    if not values:
        return
    m.target_metric_value = values[-1][1]
    reached = next((i for i, v in values if goal.reached(v)), None)
    if reached is None:
        return
    m.target_epoch = reached + 1
    times = [_epoch_time(e) for e in eps[: reached + 1]]
    if None in times:
        return
    m.time_to_target_s = float(sum(t for t in times if t is not None))
    if billed_s is not None and reached + 1 == len(eps) and not m.prediction_used:
        m.billable_to_target_s = billed_s  # the job ended at the target: its bill is the cost to target
    else:
        m.billable_to_target_s = billing.modelled_billable_s(m.time_to_target_s, overhead_s)


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
        return _without_empty_axes(asdict(self))


_ConfigKey = tuple[str, int | None, str, int, tuple[tuple[str, Any], ...]]
"""A configuration: instance type, batch size, platform, instance count, setting of the axes."""


def _setting_key(setting: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple((setting or {}).items())


def _vmtype(instance_type: str, count: int = 1) -> str | None:
    try:
        return instances.vmtype_with_nodes(instance_type, count)
    except KeyError:
        return None


def aggregate(
    runs: Sequence[RunMetrics],
    *,
    region: str = "us-east-1",
    instance_count: int = 1,
    extra_cells: Iterable[
        tuple[str, int | None, str, str | None]
        | tuple[str, int | None, str, str | None, int]
        | tuple[str, int | None, str, str | None, int, Mapping[str, Any] | None]
    ] = (),
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

    rows: list[ConfigMetrics] = []
    for key, members in groups.items():
        itype, bs, platform, count, setting = key
        ok = [r for r in members if r.status == OK]
        t = instances.CATALOGUE.get(itype)
        planned = (prices or {}).get(itype) if platform == SAGEMAKER else None
        price = planned if planned is not None else hourly_usd(itype, region, platform)
        row = ConfigMetrics(
            instance_type=itype,
            gpus=t.gpus if t else None,
            batch_size=bs,
            runs=len(ok),
            platform=platform,
            usd_per_hour=price,
            vmtype=_vmtype(itype, count) if t else None,
            attempts=len(members) + len(reasons.get(key, [])),
            instance_count=count,
            axes=dict(setting),
        )
        notes: list[str] = []
        if ok:
            row.step_time_s, row.step_time_std_s = _mean([r.step_s for r in ok]), _std([r.step_s for r in ok])
            # Throughput of the configuration = batch / mean step (not the mean of per-run ratios), so
            # that the table's columns agree; the spread is that of the per-run throughputs.
            # (a run that trained with another batch size than asked counts with the one it used)
            trained = _mean([float(r.batch_size_trained or bs or 0) for r in ok]) if bs else None
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
            _accuracy_evidence(row, ok, quality_margin)
            if target is not None:
                goal = TargetRule.of(target_metric, target, minimize=minimize)
                missed = [r for r in ok if r.time_to_target_s is None]
                if missed:
                    row.quality = (
                        f"did not reach target: {goal.describe()} not reached by {len(missed)} of "
                        f"{len(ok)} runs ({_missed_why(goal, missed)})"
                    )
                else:
                    row.time_to_target_s = _mean([r.time_to_target_s for r in ok])
            row.data_wait_share = _mean([r.data_wait_share for r in ok])
            row.utilisation = _mean([r.utilisation for r in ok])
            row.aligned_step_s = _mean([r.aligned_step_s for r in ok])
            row.free_step_s = _mean([r.free_step_s for r in ok])
            if price is None:
                notes.append(f"no {'EC2 ' if platform == EC2 else ''}price for {itype} in {region}")
            else:
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
                    row.usd_waiting = billing.cost_usd(
                        row.data_wait_share * row.time_to_train_s, price, count
                    )
            throughput.config_figures(row, ok)
            failed = len(members) - len(ok)
            if failed:
                notes.append(f"{failed} of {len(members)} runs failed")
            predicted = sum(1 for r in ok if r.prediction_used)
            if predicted:
                notes.append(
                    f"{predicted} run(s) early-stopped: epoch and training times are their predictions"
                )
            for r in ok:
                if r.batch_size_trained:
                    notes.append(
                        f"{r.name} trained with batch size {r.batch_size_trained}, not {bs}: the script "
                        f"ignored its batch-size argument (samples/s use {r.batch_size_trained})"
                    )
            early = sum(1 for r in ok if r.reason)
            if early:
                notes.append(f"{early} run(s) stopped early ({ok[0].reason if early == 1 else 'see runs'})")
            row.status = OK
        else:
            statuses = [r.status for r in members] + [s for s, _ in reasons.get(key, [])]
            row.status = (
                INFEASIBLE
                if INFEASIBLE in statuses
                else SKIPPED
                if statuses and all(s == SKIPPED for s in statuses)
                else FAILED
            )
            why = [r.reason for r in members if r.reason] + [w for _, w in reasons.get(key, []) if w]
            if why:
                notes.append("; ".join(dict.fromkeys(why)))
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


_PREDICTION_KEYS = ("step_s", "steps_per_epoch", "epoch_s", "total_s", "epochs")


def _early_stop_prediction(run: RunTimings, target: int | None) -> dict[str, float] | None:
    """The container's early-stop prediction when the run stopped before ``target`` epochs, else None."""
    pred = run.prediction
    if not isinstance(pred, Mapping):
        return None
    values = {k: pred.get(k) for k in _PREDICTION_KEYS}
    if not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in values.values()):
        return None
    measured = sum(1 for e in run.epochs if e.epoch_s is not None)
    if target and measured >= target:
        return None  # the run did train every epoch: measured beats predicted
    return {k: float(v) for k, v in values.items()}  # type: ignore[arg-type]
