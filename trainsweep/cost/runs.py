"""The figures of one run (one repetition of one configuration): :class:`RunMetrics` and
:func:`run_metrics`. The definitions of the figures are in :mod:`trainsweep.cost.metrics`, which groups
runs into configurations.

:func:`run_metrics` is a sequence of named steps, each filling some fields of :class:`RunMetrics` from the
run's log and job record: what the run is, its epochs, its time to train, its bill, the figures measured
beside the timings (:func:`_measured_figures`: a new per-run figure is computed in a module of its own
and set there), its quality.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from trainsweep import axes as axis
from trainsweep import honoured, instances
from trainsweep.cost import billing, throughput
from trainsweep.cost.prices import EC2, LOCAL, SAGEMAKER
from trainsweep.logs import mllog
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.stalls import run_stall_stats
from trainsweep.training.metric_lines import TargetRule

OK, FAILED, INFEASIBLE, SKIPPED = "ok", "failed", "infeasible", "skipped"
"""A run's or a configuration's status; SKIPPED: the batch-size search did not run it (throughput plateau)."""


def steady_steps(epochs: Sequence[Epoch], *, partial_at: int | None = None) -> list[float]:
    """Step times without the first step of each epoch, nor, in an epoch of ``partial_at`` steps, its last
    (:func:`partial_batch_steps`: a partial batch, whose new shape a GPU may tune for seconds)."""
    out: list[float] = []
    for e in epochs:
        steps = list(e.step_s)
        out.extend(steps[1:-1] if partial_at is not None and len(steps) == partial_at else steps[1:])
    return out


def run_steady_steps(run: RunTimings, m: RunMetrics, epochs: Sequence[Epoch] | None = None) -> list[float]:
    """The steady steps of ``run`` (:func:`steady_steps` of ``epochs``, by default its own), each epoch's
    partial last batch left out for the samples a step of it trains (``m``: its figures)."""
    eps = run.epochs if epochs is None else epochs
    return steady_steps(eps, partial_at=partial_batch_steps(run, samples_per_step(m)))


def partial_batch_steps(run: RunTimings, batch_size: float | None) -> int | None:
    """The steps of an epoch that ends with a partial batch (the run's training set does not divide by
    its batch size; the last step trains the rest); None when every batch is full or either is unknown.
    An epoch cut short, or a loader that drops the last batch, has another number of steps."""
    samples = run.header.train_samples
    if not samples or not batch_size or batch_size <= 0 or samples % batch_size == 0:
        return None
    return math.ceil(samples / batch_size)


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
    cpu_wait_share: float | None = None
    """Share of its runnable time the training process waited for a CPU (:mod:`trainsweep.training.cpu_wait`;
    :func:`~trainsweep.training.cpu_wait.contended` says when that is contention)."""
    cpu_wait_s: float | None = None
    """Seconds the training process waited for a CPU (with :attr:`cpu_wait_share`)."""
    batches_per_step: float | None = None
    """Set when a step of the script trained several batches (gradient accumulation: its log's
    ``trainsweep.batches_per_step``): throughput, MFU and the partial-batch rule count them."""
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
    """The precision the run really trained in (a built-in's or an instrumented script's log says; None
    for other runs)."""
    not_honoured: list[str] = field(default_factory=list)
    """What of its setting the run did not do (:func:`trainsweep.honoured.not_honoured`): a setting it
    ignored, its figures those of another setting."""
    tokens_per_sample: float | None = None
    tokens_per_s: float | None = None
    flops_per_sample: float | None = None
    mfu: float | None = None
    mfu_note: str | None = None
    """Token and MFU figures: :mod:`trainsweep.cost.throughput`."""

    def to_dict(self) -> dict[str, Any]:
        return without_empty_axes(asdict(self))


def without_empty_axes(d: dict[str, Any]) -> dict[str, Any]:
    """A record without the axes' keys when the sweep has none: its JSON is as it was before axes."""
    if not d.get("axes"):
        d.pop("axes", None)
        d.pop("precision", None)
        d.pop("not_honoured", None)
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
    m = _identify(run, job)
    if m.platform == EC2:
        overhead_s = 0.0  # no SageMaker job to start: the instance bills the training itself
    eps = [e for e in run.epochs if e.steps or e.epoch_s]
    _measure_epochs(m, run, eps)
    target = _time_to_train(m, run, eps, _target_epochs(run, epochs, m.epochs_measured))
    per_step = samples_per_step(m)
    if per_step and m.step_s:
        m.samples_per_s = per_step / m.step_s
    billed_s = _bill(m, job, target, overhead_s)
    _measured_figures(m, run, tokens_per_sample)
    goal = None if target_value is None else TargetRule.of(target_metric, target_value, minimize=minimize)
    _quality(m, run, eps, goal, billed_s, overhead_s)
    if m.status == OK and m.step_s is None:
        m.status = FAILED
        m.reason = m.reason or "the log has no training steps"
    return m


def _identify(run: RunTimings, job: Mapping[str, Any] | None) -> RunMetrics:
    """What the run is: its name, instance type, platform, batch size, setting and status."""
    status = job_status(job) or (
        SKIPPED if run.extra.get("failure_kind") == SKIPPED else _RUN_STATUS.get(run.status, FAILED)
    )
    bs = run.batch_size or run.header.batch_size or (job or {}).get("batch_size")
    itype = resolve_instance_type(run, job)
    m = RunMetrics(
        name=run.name,
        instance_type=itype,
        batch_size=int(bs) if bs is not None else None,
        run_index=run.run_index,
        status=status,
        platform=run_platform(run, job, itype),
        reason=(job or {}).get("reason") or run.failure_reason or _stopped_early(job),
        problems=[p.code for p in run.problems],
        instance_count=run_instance_count(run, job),
        axes=run_setting(run, job),
        precision=_text_or_none(run.extra.get(axis.PRECISION_KEY)),
    )
    m.not_honoured = honoured.not_honoured(m.axes, run.extra)
    trained = run.header.batch_size
    # trainsweep's own logs (the container, the instrumentation of a script) record the batch size the run
    # really trained with; a seed log's header is not trusted over its name.
    if run.dialect == "mllog" and trained and m.batch_size and trained != m.batch_size:
        m.batch_size_trained = int(trained)
    _how_it_ran(m, run)
    return m


def _how_it_ran(m: RunMetrics, run: RunTimings) -> None:
    """What the log says of how the run trained: its wait for a CPU, the batches a step trains."""
    waited = run.extra.get(mllog.CPU_WAIT)
    waited = waited if isinstance(waited, Mapping) else {}
    share, wait_s = _number_or_none(waited.get("wait_share")), _number_or_none(waited.get("wait_s"))
    if share is not None and 0 <= share <= 1:
        m.cpu_wait_share = share
        m.cpu_wait_s = wait_s if wait_s is not None and wait_s >= 0 else None
    k = _number_or_none(run.extra.get(mllog.BATCHES_PER_STEP))
    if k is not None and k > 1:
        m.batches_per_step = k


def _number_or_none(value: Any) -> float | None:
    """A finite number of a log's value (not a boolean), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def samples_per_step(m: RunMetrics) -> float | None:
    """The samples one step of the run trains: its batch size (the one it trained with) times the batches
    a step accumulates; None without a batch size."""
    batch = m.batch_size_trained or m.batch_size
    return batch * (m.batches_per_step or 1.0) if batch else None


def _measure_epochs(m: RunMetrics, run: RunTimings, eps: Sequence[Epoch]) -> None:
    """The steady step time, the first and the later epochs' times and the training measured."""
    m.epochs_measured = len(eps)
    steps = run_steady_steps(run, m, eps)
    if steps:
        m.step_s = statistics.fmean(steps)
        m.steps_per_epoch = max(e.steps for e in eps)
    if not eps:
        return
    m.first_epoch_s = _epoch_time(eps[0])
    later = [t for t in (_epoch_time(e) for e in eps[1:]) if t is not None]
    if later:
        m.epoch_s = statistics.fmean(later)
    elif m.step_s is not None and m.steps_per_epoch:
        m.epoch_s = m.step_s * m.steps_per_epoch + (eps[0].validation_s or 0.0)
    measured = [t for t in (_epoch_time(e) for e in eps) if t is not None]
    m.training_s = run.fit_s if run.fit_s and math.isfinite(run.fit_s) else (sum(measured) or None)


def _time_to_train(m: RunMetrics, run: RunTimings, eps: Sequence[Epoch], target: int | None) -> int | None:
    """The time to train ``target`` epochs: the run's early-stop prediction, its measured training, or
    epoch 1 + the later epochs extrapolated. Returns the epochs it is for (an early-stopped run without
    ``target`` says its own)."""
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
    return target


def _bill(
    m: RunMetrics, job: Mapping[str, Any] | None, target: int | None, overhead_s: float
) -> float | None:
    """The billable time: DescribeTrainingJob's when the run trained all ``target`` epochs itself, else
    the model's. Returns DescribeTrainingJob's billable seconds (None: the job record has none)."""
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
    return known["billable_s"]


def _measured_figures(m: RunMetrics, run: RunTimings, tokens_per_sample: float | None) -> None:
    """Figures the run measured beside its timings: the data-wait share and utilisation
    (:mod:`trainsweep.stalls`) and the GPU memory held. A new per-run figure is set here, computed by the
    module that owns it."""
    stall = run_stall_stats(run)
    if stall is not None:
        m.data_wait_share = stall.data_wait_share
        m.utilisation = stall.utilisation
        m.aligned_step_s = stall.aligned_step_s
        m.free_step_s = stall.free_step_s
    m.gpu_memory_share = gpu_memory_share(run)
    throughput.run_figures(m, run, tokens_per_sample)


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
