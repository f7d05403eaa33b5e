"""Early-stop rule and full-run prediction from the first steps of a training run.

The training container feeds step times into :class:`SteadyState` as it trains and stops as soon as the
steady-state step time is known to the stated precision (or at a cap); :func:`predict_run` turns that
estimate plus a few timed validation batches into the predicted time per epoch and for the requested
epochs, with a 90 % interval. :func:`replay` applies the same rule to a complete log (any dialect the
parser reads) so that the rule can be checked against what the rest of the log shows.

Method, in short:

* **Warm-up** is found, not assumed: step 1 and the last step of every epoch (the hand-off to
  validation) are never steady; beyond that, MSER (the marginal standard error rule of steady-state
  simulation) picks the truncation point that minimises the standard error of the remaining mean.
* **Outliers** (a GC pause, a checkpoint write) are kept out of the mean with a 4-MAD filter; they are
  rare, and a mean that includes them predicts later epochs worse.
* **Precision** is a batch-means confidence interval (ten consecutive blocks), so that correlated
  neighbouring steps do not make the interval look narrower than it is.
* **Interval** for an epoch combines the statistical uncertainty of the step mean with an
  epoch-to-epoch jitter (default 1 % relative standard deviation) that no single epoch can show:
  successive epochs of the same run differ by about that much on cloud GPUs.

This module is pure Python (no numpy, no torch) so that the container and the Lambdas share it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from trainsweep.class_calibration import ClassCalibration
    from trainsweep.logs.model import Epoch, RunTimings

PREDICTION_VERSION = 1
BATCH_MEANS_BLOCKS = 10
OUTLIER_MADS = 4.0
# Seeds' estimator: mean of steps 2..11 of the flat step list ("2-11" in training-times-summary.py).
BASELINE_FIRST, BASELINE_LAST = 1, 11
REFERENCE_EPOCHS = 90  # "a 90-epoch training of the same configuration" when reporting the share watched


@dataclass(frozen=True)
class StopRule:
    """When early-stop mode has seen enough.

    Args:
        precision: stop when the relative half-width of the ``confidence`` interval of the steady-state
            step time is at most this.
        confidence: confidence level of that interval.
        min_steady_steps: never trust fewer steady steps than this.
        min_seconds: never trust the precision before this many seconds of steps were watched: a short
            window just after the process started can look steady at a speed the run does not keep
            (on a CPU, 18 steps after start-up predicted an epoch 35 % longer than full runs took).
        max_steps: cap on training steps watched (None: no cap).
        max_seconds: cap on training seconds watched (None: no cap).
        max_epochs: cap on epochs watched (None: no cap); a run whose step time is still uncertain after
            this many epochs stops with the interval it has, which says how uncertain it is.
        epoch_jitter: relative standard deviation between epochs of one run, added to the interval;
            None: the calibrated one for the run's family (:func:`load_calibration`).
        interval: coverage of the prediction interval.
        validation_batches: validation batches the container times (the first is warm-up).
    """

    precision: float = 0.02
    confidence: float = 0.95
    min_steady_steps: int = 10
    min_seconds: float = 10.0
    max_steps: int | None = 2000
    max_seconds: float | None = 900.0
    max_epochs: float | None = 2.0
    epoch_jitter: float | None = None
    interval: float = 0.90
    validation_batches: int = 6

    def __post_init__(self) -> None:
        if not 0 < self.precision < 1:
            raise ValueError(f"precision must be in (0, 1), got {self.precision}")
        if not 0 < self.confidence < 1 or not 0 < self.interval < 1:
            raise ValueError("confidence and interval must be in (0, 1)")
        if self.min_steady_steps < 2:
            raise ValueError("min_steady_steps must be at least 2")
        if not self.min_seconds >= 0:
            raise ValueError(f"min_seconds must be >= 0, got {self.min_seconds}")
        if self.max_epochs is not None and not self.max_epochs > 0:
            raise ValueError(f"max_epochs must be positive, got {self.max_epochs}")


# ---- statistics -----------------------------------------------------------------------------------


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t distribution (Hill 1970 / Cornish-Fisher expansion; exact enough for df>=3)."""
    z = NormalDist().inv_cdf(p)
    if df <= 0:
        raise ValueError("df must be positive")
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mser_truncation(x: Sequence[float]) -> int:
    """Number of leading values to drop as warm-up (MSER; searched over the first half, O(n))."""
    n = len(x)
    if n < 4:
        return 0
    # suffix sums so that each candidate truncation point costs O(1)
    s = [0.0] * (n + 1)
    q = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        s[i] = s[i + 1] + x[i]
        q[i] = q[i + 1] + x[i] * x[i]
    best, best_d = math.inf, 0
    for d in range(n // 2 + 1):
        m = n - d
        ss = q[d] - s[d] * s[d] / m  # sum of squared deviations of x[d:]
        v = max(ss, 0.0) / (m * m)
        if v < best:
            best, best_d = v, d
    return best_d


def _median(x: Sequence[float]) -> float:
    y = sorted(x)
    n = len(y)
    return y[n // 2] if n % 2 else 0.5 * (y[n // 2 - 1] + y[n // 2])


def without_outliers(x: Sequence[float]) -> list[float]:
    """The values within ``OUTLIER_MADS`` median absolute deviations of the median."""
    if len(x) < 5:
        return list(x)
    med = _median(x)
    mad = _median([abs(v - med) for v in x]) * 1.4826
    if mad == 0:
        return list(x)
    return [v for v in x if abs(v - med) <= OUTLIER_MADS * mad]


@dataclass(frozen=True)
class SteadyEstimate:
    """Steady-state time of one repeated operation (a training step, a validation batch)."""

    mean_s: float
    se_s: float
    """Standard error of the mean (batch means)."""
    half_width_rel: float
    """Relative half-width of the rule's confidence interval."""
    used: int
    """Values in the mean."""
    warmup: int
    """Leading values dropped as warm-up."""
    outliers: int
    warmup_excess_s: float
    """Time the warm-up values took beyond the steady mean (a one-off cost per run)."""


def steady_estimate(
    x: Sequence[float], *, confidence: float = 0.95, skip_first: int = 0
) -> SteadyEstimate | None:
    """Steady-state mean of ``x`` after warm-up detection and outlier removal; None if too few values."""
    body = list(x[skip_first:])
    if len(body) < 2:
        return None
    d = mser_truncation(body)
    steady = body[d:]
    kept = without_outliers(steady)
    n = len(kept)
    if n < 2:
        return None
    mean = sum(kept) / n
    blocks = min(BATCH_MEANS_BLOCKS, n // 2) if n >= 4 else 0
    if blocks >= 2:
        size = n / blocks
        means = []
        for b in range(blocks):
            chunk = kept[round(b * size) : round((b + 1) * size)]
            means.append(sum(chunk) / len(chunk))
        mm = sum(means) / blocks
        se = math.sqrt(sum((v - mm) ** 2 for v in means) / (blocks - 1) / blocks)
        df = blocks - 1
    else:
        se = math.sqrt(sum((v - mean) ** 2 for v in kept) / (n - 1) / n)
        df = n - 1
    t = t_quantile(0.5 + confidence / 2, df)
    rel = t * se / mean if mean > 0 else math.inf
    warm = list(x[:skip_first]) + body[:d]
    excess = sum(warm) - len(warm) * mean
    return SteadyEstimate(mean, se, rel, n, len(warm), len(steady) - n, excess)


# ---- the online rule (training container) ---------------------------------------------------------


class SteadyState:
    """Online early-stop decision over training step times, in the order they were measured.

    The first step of the run is always warm-up; ``epoch_boundary()`` marks the steps next to an epoch
    boundary (the step before validation, the first step after it) as non-steady. The precision is
    checked every ``check_every`` steps, and at every step while warm-up detection leaves fewer than
    ``min_steady_steps`` steady steps: a GPU's step times settle within a few steps, and waiting
    ``check_every`` more steps each time would watch a large share of a short epoch for nothing.

    The ``max_epochs`` cap needs the training steps of one epoch: ``steps_per_epoch`` when the caller
    knows it (the worker from its loader, the instrumentation from the first epoch it watched); until
    then, whole epochs are counted at their boundaries.
    """

    def __init__(
        self, rule: StopRule | None = None, *, check_every: int = 10, steps_per_epoch: int | None = None
    ):
        self.rule = rule or StopRule()
        self.steps_per_epoch = steps_per_epoch
        self.epochs_done = 0
        self.check_every = max(1, check_every)
        self.values: list[float] = []
        self.excluded: list[float] = []  # boundary steps, kept out of the steady stream
        self.seconds = 0.0
        self._exclude_next = True  # step 1
        self._since_check = 0
        self._too_few = False  # the last check kept fewer than min_steady_steps: check again next step
        self._reason: str | None = None

    def epoch_boundary(self) -> None:
        """Call at an epoch end: the last step just added and the next one are not steady."""
        if self.values:
            self.excluded.append(self.values.pop())
        self._exclude_next = True
        self.epochs_done += 1

    def add(self, step_s: float) -> None:
        self.seconds += step_s
        if self._exclude_next:
            self.excluded.append(step_s)
            self._exclude_next = False
        else:
            self.values.append(step_s)
        self._since_check += 1

    @property
    def steps(self) -> int:
        return len(self.values) + len(self.excluded)

    def estimate(self) -> SteadyEstimate | None:
        est = steady_estimate(self.values, confidence=self.rule.confidence)
        if est is None:
            return None
        boundary = sum(self.excluded) - len(self.excluded) * est.mean_s
        return SteadyEstimate(
            est.mean_s,
            est.se_s,
            est.half_width_rel,
            est.used,
            est.warmup + len(self.excluded),
            est.outliers,
            est.warmup_excess_s + boundary,
        )

    def stop_reason(self) -> str | None:
        """ "precision", "max_steps", "max_seconds" or "max_epochs" once the rule says stop, else None."""
        if self._reason:
            return self._reason
        r = self.rule
        if r.max_steps is not None and self.steps >= r.max_steps:
            self._reason = "max_steps"
        elif r.max_seconds is not None and self.seconds >= r.max_seconds:
            self._reason = "max_seconds"
        elif r.max_epochs is not None and (
            self.steps >= r.max_epochs * self.steps_per_epoch
            if self.steps_per_epoch
            else self.epochs_done >= r.max_epochs
        ):
            self._reason = "max_epochs"
        elif (
            len(self.values) >= r.min_steady_steps
            and self.seconds >= r.min_seconds
            and (self._since_check >= self.check_every or self._too_few)
        ):
            self._since_check = 0
            est = self.estimate()
            self._too_few = est is None or est.used < r.min_steady_steps
            if est is not None and not self._too_few and est.half_width_rel <= r.precision:
                self._reason = "precision"
        return self._reason


# ---- prediction -----------------------------------------------------------------------------------


@dataclass
class Prediction:
    """What early-stop mode predicts for the full run (written to the log and to ``<base>/output``)."""

    epochs: int
    steps_per_epoch: int
    step_s: float
    step_half_width_rel: float
    train_epoch_s: float
    validation_s: float
    epoch_s: float
    epoch_low_s: float
    epoch_high_s: float
    total_s: float
    total_low_s: float
    total_high_s: float
    warmup_excess_s: float
    steps_watched: int
    stop_reason: str
    interval: float
    precision: float
    validation_batches_per_epoch: float = 0
    validation_batch_s: float | None = None
    version: int = PREDICTION_VERSION
    notes: list[str] = field(default_factory=list)
    family: str | None = None
    """The run's family, which picked the interval's calibration (None: unknown)."""
    epoch_jitter: float | None = None
    """Epoch-to-epoch jitter (relative sd) in the interval."""
    calibration: str | None = None
    """Where ``epoch_jitter`` came from: ``family``, ``pooled`` or ``rule``."""
    interval_validated: bool | None = None
    """Whether that calibration's 90 % interval covered 85-95 % of held-out logs in cross-validation."""
    instance_class: str | None = None
    """The run's instance class (:mod:`trainsweep.instance_class`; None: unknown)."""
    class_calibration: str | None = None
    """How the class widened the jitter: ``class`` (its own factor), ``unseen-class`` (a class the
    calibration has no factor for: the wider fallback), ``unknown-class``, or None (no class table)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def predict_run(
    step: SteadyEstimate,
    *,
    steps_per_epoch: int,
    epochs: int,
    rule: StopRule | None = None,
    train_batches: float | None = None,
    validation: SteadyEstimate | None = None,
    validation_batches_per_epoch: float = 0,
    epoch_overhead_s: float = 0.0,
    warmup_excess_s: float | None = None,
    steps_watched: int = 0,
    stop_reason: str = "precision",
    family: str | None = None,
    calibration: Calibration | None = None,
    instance_class: str | None = None,
) -> Prediction:
    """Predict the time per epoch and for ``epochs`` epochs from steady-state step (and validation) times.

    Args:
        step: steady-state training step estimate.
        steps_per_epoch: training steps in one epoch (ceil(samples / global batch)).
        epochs: epochs of the full run.
        train_batches: the epoch's work in full batches (samples / batch; the last batch is partial);
            defaults to ``steps_per_epoch``.
        validation: steady-state time of one validation batch, if validation was timed.
        validation_batches_per_epoch: validation batches in one epoch.
        epoch_overhead_s: measured per-epoch time that is neither steps nor validation (hand-offs).
        warmup_excess_s: one-off cost paid once per run (warm-up steps, first validation batch);
            defaults to the step estimate's own.
        family: the run's family (:func:`run_family`); picks the epoch jitter from ``calibration``
            (default: the shipped table) unless the rule sets one. Unknown: the pooled jitter, and a note.
        instance_class: the run's instance class (:mod:`trainsweep.instance_class`), which scales the
            family's jitter; default: ``cpu`` for the container on the CPU, else unknown (the widest
            fallback).
    """
    rule = rule or StopRule()
    if instance_class is None and family == CONTAINER_FAMILIES[0]:
        instance_class = "cpu"
    notes: list[str] = []
    batches = steps_per_epoch if train_batches is None else train_batches
    train = batches * step.mean_s
    val = 0.0
    var_rel_num = (batches * step.se_s) ** 2
    excess = step.warmup_excess_s if warmup_excess_s is None else warmup_excess_s
    if validation is not None and validation_batches_per_epoch > 0:
        val = validation_batches_per_epoch * validation.mean_s
        var_rel_num += (validation_batches_per_epoch * validation.se_s) ** 2
        if warmup_excess_s is None:
            excess += validation.warmup_excess_s
    elif validation_batches_per_epoch > 0:
        notes.append("validation not timed: the epoch time leaves it out")
    epoch = train + val + epoch_overhead_s
    stat_rel = math.sqrt(var_rel_num) / epoch if epoch > 0 else 0.0
    jitter, source, validated, by_class = epoch_jitter_for(family, rule, calibration, notes, instance_class)
    z = NormalDist().inv_cdf(0.5 + rule.interval / 2)
    half = z * math.hypot(stat_rel, jitter)
    total = excess + epochs * epoch
    return Prediction(
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        step_s=step.mean_s,
        step_half_width_rel=step.half_width_rel,
        train_epoch_s=train,
        validation_s=val,
        epoch_s=epoch,
        epoch_low_s=epoch * max(0.0, 1 - half),
        epoch_high_s=epoch * (1 + half),
        total_s=total,
        total_low_s=excess + epochs * epoch * max(0.0, 1 - half),
        total_high_s=excess + epochs * epoch * (1 + half),
        warmup_excess_s=excess,
        steps_watched=steps_watched,
        stop_reason=stop_reason,
        interval=rule.interval,
        precision=rule.precision,
        validation_batches_per_epoch=validation_batches_per_epoch,
        validation_batch_s=validation.mean_s if validation is not None else None,
        notes=notes,
        family=family,
        epoch_jitter=jitter,
        calibration=source,
        interval_validated=validated,
        instance_class=instance_class,
        class_calibration=by_class,
    )


def epoch_jitter_for(
    family: str | None,
    rule: StopRule,
    calibration: Calibration | None,
    notes: list[str],
    instance_class: str | None = None,
) -> tuple[float, str, bool | None, str | None]:
    """(jitter, where the family's part came from, whether cross-validation found it honest, how the
    instance class scaled it: :meth:`Calibration.class_factor`); appends notes."""
    if rule.epoch_jitter is not None:
        return rule.epoch_jitter, "rule", None, None
    cal = calibration or load_calibration()
    jitter, source, more = cal.jitter_for(family)
    notes.extend(more)
    chosen = cal.pooled if source == "pooled" else cal.families[family or ""]
    factor, by_class, class_notes = cal.class_factor(instance_class)
    notes.extend(class_notes)
    validated = chosen.validated if chosen.cv_interval_coverage is not None else None
    return jitter * factor, source, validated, by_class


# ---- replay on complete logs ----------------------------------------------------------------------


@dataclass
class ReplayResult:
    """What the rule predicted from the steps it watched, against what the rest of the log shows."""

    log: str
    steps_total: int
    steps_used: int
    epochs_total: int
    epochs_watched: int
    steady_epoch: int | None
    stop_reason: str
    predicted_epoch_s: float | None = None
    predicted_epoch_low_s: float | None = None
    predicted_epoch_high_s: float | None = None
    actual_epoch_s: float | None = None
    predicted_total_s: float | None = None
    actual_total_s: float | None = None
    baseline_predicted_epoch_s: float | None = None
    baseline_predicted_total_s: float | None = None
    share_of_log_watched: float | None = None
    share_of_90_epochs_watched: float | None = None
    validation_steady: bool | None = None
    computing_system: str | None = None
    batch_size: int | None = None
    workload: str | None = None
    family: str | None = None
    """The run's family (:func:`run_family`), which picks the interval's calibration."""
    stat_rel: float | None = None
    """Relative standard error of the predicted epoch time from the steps' own noise."""
    epoch_jitter: float | None = None
    """Epoch-to-epoch jitter (relative sd) the interval adds to ``stat_rel``."""
    calibration: str | None = None
    """Where ``epoch_jitter`` came from: ``family``, ``pooled`` or ``rule`` (set in the StopRule)."""
    interval_validated: bool | None = None
    """Whether that calibration's interval covered 85-95 % of held-out logs in cross-validation."""
    interval_notes: list[str] = field(default_factory=list)
    """What the calibration says of this family (unknown, too few logs, short of the goals)."""
    notes: list[str] = field(default_factory=list)
    instance_class: str | None = None
    """The run's instance class (:mod:`trainsweep.instance_class`), which scales the family's jitter."""
    class_calibration: str | None = None
    """``class``, ``unseen-class``, ``unknown-class`` or None: see :attr:`Prediction.class_calibration`."""

    @property
    def error(self) -> float | None:
        """Relative error of the predicted epoch time against the unwatched epochs."""
        if self.predicted_epoch_s is None or not self.actual_epoch_s:
            return None
        return self.predicted_epoch_s / self.actual_epoch_s - 1

    @property
    def baseline_error(self) -> float | None:
        if self.baseline_predicted_epoch_s is None or not self.actual_epoch_s:
            return None
        return self.baseline_predicted_epoch_s / self.actual_epoch_s - 1

    @property
    def covered(self) -> bool | None:
        if (
            self.actual_epoch_s is None
            or self.predicted_epoch_low_s is None
            or self.predicted_epoch_high_s is None
        ):
            return None
        return self.predicted_epoch_low_s <= self.actual_epoch_s <= self.predicted_epoch_high_s

    @property
    def interval_half_width(self) -> float | None:
        """The interval's upper half-width relative to the predicted epoch time (what it widens by)."""
        if self.predicted_epoch_high_s is None or not self.predicted_epoch_s:
            return None
        return self.predicted_epoch_high_s / self.predicted_epoch_s - 1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["error"] = self.error
        d["baseline_error"] = self.baseline_error
        d["covered"] = self.covered
        return d


def _epoch_time(e: Epoch) -> float | None:
    if e.epoch_s is not None and e.epoch_s > 0:
        return e.epoch_s
    if e.steps:
        return sum(e.step_s) + (e.validation_s or 0.0)
    return None


def baseline_step_s(run: RunTimings) -> float | None:
    """The seeds' estimator: mean of steps 2..11 of the flat step list."""
    flat = run.flat_steps()[BASELINE_FIRST:BASELINE_LAST]
    return sum(flat) / len(flat) if len(flat) else None


def replay(
    run: RunTimings,
    rule: StopRule | None = None,
    *,
    max_epochs: int = 2,
    validation_tolerance: float = 0.10,
    family: str | None = None,
    calibration: Calibration | None = None,
    instance_class: str | None = None,
) -> ReplayResult:
    """Apply the early-stop rule to a complete log and compare with the epochs it did not watch.

    Epoch logs time validation once per epoch, after the epoch, and the first validation pass carries
    one-off costs (graph building in TF/Keras): a validation time is steady when it is not the run's
    first, and confirmed when it agrees with the previous one within ``validation_tolerance``. Epochs
    are watched until one is steady in both its training steps (the rule's precision) and its
    validation, at most ``max_epochs``; that epoch is the steady epoch the prediction is built on, its
    inner steps replaced by the steady step time. That step time is the live rule's: a
    :class:`SteadyState` fed every step watched, in order, told of each epoch boundary, as the
    container's worker and the instrumentation feed theirs (not the steady epoch's steps alone).

    The interval's epoch jitter is the rule's when it sets one, else ``calibration``'s (default: the
    shipped table) for ``family`` (default: :func:`run_family` of ``run``) and ``instance_class``
    (default: :func:`trainsweep.instance_class.instance_class` of ``run``).
    """
    from trainsweep.instance_class import instance_class as class_of_run

    rule = rule or StopRule()
    epochs = [e for e in run.epochs if e.steps > 0]
    steps_total = sum(e.steps for e in epochs)
    res = ReplayResult(
        log=run.name,
        steps_total=steps_total,
        steps_used=0,
        epochs_total=len(epochs),
        epochs_watched=0,
        steady_epoch=None,
        stop_reason="no epochs",
        computing_system=run.computing_system,
        batch_size=run.batch_size,
        workload=run.header.workload,
        family=family if family is not None else run_family(run),
        instance_class=instance_class if instance_class is not None else class_of_run(run),
    )
    if not epochs:
        res.notes.append("the log has no training steps")
        return res

    flat_base = baseline_step_s(run)
    watched: list[Epoch] = []
    steady: tuple[Epoch, SteadyEstimate] | None = None
    reason = "cap"
    prev_val: float | None = None
    # the live rule's own estimator: every step watched so far but step 1 and the steps next to an epoch
    # boundary, warm-up found by MSER over all of them (not one epoch's steps alone)
    monitor = SteadyState(rule)
    for i, e in enumerate(epochs):
        if i >= max_epochs:
            break
        watched.append(e)
        for s in e.step_s:
            monitor.add(s)
        monitor.epoch_boundary()
        est = monitor.estimate()
        if est is None:  # epochs of a few steps: too few away from the boundaries
            est = steady_estimate(list(e.step_s), confidence=rule.confidence)
        val_ok = e.validation_s is None or i > 0
        if e.validation_s is not None and prev_val is not None:
            res.validation_steady = (
                abs(e.validation_s / prev_val - 1) <= validation_tolerance if prev_val else None
            )
        prev_val = e.validation_s
        if est is not None:
            steady = (e, est)
            if val_ok and est.half_width_rel <= rule.precision:
                reason = "steady"
                break
    res.epochs_watched = len(watched)
    res.steps_used = sum(e.steps for e in watched)
    res.stop_reason = reason
    res.share_of_log_watched = res.steps_used / steps_total if steps_total else None
    typical_steps = max(e.steps for e in epochs)
    res.share_of_90_epochs_watched = res.steps_used / (REFERENCE_EPOCHS * typical_steps)
    if steady is None:
        res.notes.append("too few steps to estimate a steady step time")
        return res
    se, est = steady
    res.steady_epoch = se.index
    if se is epochs[0] and se.validation_s is not None:
        res.notes.append("only the first epoch was seen: its validation includes one-off costs")
    n = se.steps
    ep_s = _epoch_time(se) or 0.0
    inner = list(se.step_s[1:-1]) if n > 3 else list(se.step_s)
    # the steady epoch with its inner steps replaced by their steady mean: keeps its boundary steps,
    # validation and hand-offs, drops its transients
    overhead = ep_s - sum(inner)
    if se is epochs[0] and n > 3:
        # the run's first step is a one-off cost, not part of a typical epoch
        overhead -= se.step_s[0] - est.mean_s
    pred_epoch = len(inner) * est.mean_s + overhead
    res.predicted_epoch_s = pred_epoch
    res.stat_rel = len(inner) * est.se_s / pred_epoch if pred_epoch > 0 else 0.0
    res.epoch_jitter, res.calibration, res.interval_validated, res.class_calibration = epoch_jitter_for(
        res.family, rule, calibration, res.interval_notes, res.instance_class
    )
    set_interval(res, rule.interval)

    times = [_epoch_time(e) for e in epochs]
    watched_s = sum(t or 0.0 for t in times[: len(watched)])
    rest = [t for t in times[len(watched) :] if t is not None]
    if rest:
        res.actual_epoch_s = sum(rest) / len(rest)
    if all(t is not None for t in times):
        res.actual_total_s = sum(t for t in times if t is not None)
    res.predicted_total_s = watched_s + (len(epochs) - len(watched)) * pred_epoch
    if flat_base is not None:
        res.baseline_predicted_epoch_s = flat_base * typical_steps
        res.baseline_predicted_total_s = flat_base * steps_total
    return res


# ---- aggregate figures of a replay ----------------------------------------------------------------


def _percentile(x: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    y = sorted(x)
    if not y:
        return math.nan
    pos = (len(y) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(y) - 1)
    return y[lo] + (y[hi] - y[lo]) * (pos - lo)


def _kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    n = len(a)
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            s = (a[i] - a[j]) * (b[i] - b[j])
            concordant += s > 0
            discordant += s < 0
    pairs = n * (n - 1) / 2
    return (concordant - discordant) / pairs if pairs else 1.0


def ranking_by_grid(results: Sequence[ReplayResult], group: dict[str, str]) -> list[dict[str, Any]]:
    """Per grid (``group[log]`` x computing system): batch sizes ordered by predicted vs actual epoch time.

    Repetitions of a batch size are averaged first. ``same_order`` is True when both orders agree.
    """
    cells: dict[tuple[str, str], dict[int, list[tuple[float, float]]]] = {}
    for r in results:
        if r.predicted_epoch_s is None or r.actual_epoch_s is None or r.batch_size is None:
            continue
        key = (group.get(r.log, ""), r.computing_system or "?")
        cells.setdefault(key, {}).setdefault(r.batch_size, []).append((r.predicted_epoch_s, r.actual_epoch_s))
    out = []
    for (grid, system), by_bs in sorted(cells.items()):
        if len(by_bs) < 2:
            continue
        sizes = sorted(by_bs)
        pred = [sum(p for p, _ in by_bs[b]) / len(by_bs[b]) for b in sizes]
        act = [sum(a for _, a in by_bs[b]) / len(by_bs[b]) for b in sizes]
        order_pred = [b for _, b in sorted(zip(pred, sizes, strict=True))]
        order_act = [b for _, b in sorted(zip(act, sizes, strict=True))]
        out.append(
            {
                "grid": grid,
                "computing_system": system,
                "batch_sizes": sizes,
                "order_predicted": order_pred,
                "order_actual": order_act,
                "same_order": order_pred == order_act,
                "kendall_tau": _kendall_tau(pred, act),
            }
        )
    return out


def summarize(results: Sequence[ReplayResult], group: dict[str, str] | None = None) -> dict[str, Any]:
    """Aggregate figures over the logs that have unwatched epochs to compare with."""
    scored = [r for r in results if r.error is not None]
    err = [abs(r.error) for r in scored if r.error is not None]
    base = [abs(r.baseline_error) for r in scored if r.baseline_error is not None]
    covered = [bool(r.covered) for r in scored if r.covered is not None]
    share = [r.share_of_log_watched for r in scored if r.share_of_log_watched is not None]
    share90 = [r.share_of_90_epochs_watched for r in scored if r.share_of_90_epochs_watched is not None]
    ranking = ranking_by_grid(scored, group or {})
    return {
        "logs": len(results),
        "logs_scored": len(scored),
        "median_abs_error": _percentile(err, 50),
        "p95_abs_error": _percentile(err, 95),
        "max_abs_error": max(err) if err else math.nan,
        "interval_coverage": sum(covered) / len(covered) if covered else math.nan,
        "baseline_median_abs_error": _percentile(base, 50),
        "baseline_p95_abs_error": _percentile(base, 95),
        "max_epochs_watched": max((r.epochs_watched for r in scored), default=0),
        "median_share_of_log_watched": _percentile(share, 50),
        "median_share_of_90_epochs_watched": _percentile(share90, 50),
        "max_share_of_90_epochs_watched": max(share90) if share90 else math.nan,
        "grids": len(ranking),
        "grids_same_order": sum(g["same_order"] for g in ranking),
        "ranking": ranking,
        "families": family_summary(results),
        "classes": class_summary(results),
    }


# ---- calibration of the interval ------------------------------------------------------------------

CALIBRATION_FILE = "predict-calibration.json"
CONTAINER_FAMILIES = ("container-cpu", "container-gpu")
"""Runs of trainsweep's own worker (a built-in workload), on the CPU or on GPUs: a CPU shared with other
work and a dedicated GPU do not jitter alike."""


def container_family(gpus: int) -> str:
    """The family of a run of trainsweep's own worker on ``gpus`` GPUs (0: the CPU)."""
    return CONTAINER_FAMILIES[1] if gpus > 0 else CONTAINER_FAMILIES[0]


COVERAGE_GOAL = (0.85, 0.95)
"""The 90 % interval is honest for a family when it covers this share of held-out logs."""
MEDIAN_ERROR_GOAL = 0.005
"""Above this median |error| in cross-validation, a family's predictions carry a note that says so."""
FAMILY_KEYWORDS: dict[str, tuple[str, ...]] = {
    "fcn": ("fcn", "seismic"),
    "mnist": ("mnist",),
    "resnet": ("resnet", "cifar"),
}
"""Families of the seeds' logs (cloud-ML dialect, no header) by a word in the log's path or name."""


def run_family(run: RunTimings, path: str | Path | None = None) -> str | None:
    """The family a run belongs to for the interval's calibration; None when unknown.

    ``container-cpu``/``container-gpu``: a log written by trainsweep's own worker (MLLOG dialect, a
    built-in workload in its header; its GPU count); ``mo833``: the MO833 per-rank dialect; the seeds'
    cloud-ML logs carry no workload, so a word of their path (or run name) tells ``fcn``, ``mnist`` or
    ``resnet``. Anything else (an instrumented script, an MLPerf log) is unknown and gets the pooled
    calibration.
    """
    from trainsweep.workloads import WORKLOADS

    if run.dialect == "mllog":
        return container_family(run.header.gpus or 0) if run.header.workload in WORKLOADS else None
    if run.dialect == "mo833":
        return "mo833"
    text = str(path if path is not None else run.name).lower()
    for family, words in FAMILY_KEYWORDS.items():
        if any(w in text for w in words):
            return family
    return None


@dataclass(frozen=True)
class JitterCalibration:
    """The epoch jitter fitted on one family's logs (or on all of them), with its cross-validated figures."""

    epoch_jitter: float | None
    """Split-conformal: the smallest jitter whose interval covers ``interval`` of the logs, finite-sample
    corrected; None when too few logs for that."""
    logs: int
    experiments: int
    cv_logs: int = 0
    cv_interval_coverage: float | None = None
    """Coverage of the interval on each held-out experiment, calibrated without it (leave one out)."""
    cv_median_abs_error: float | None = None

    @property
    def validated(self) -> bool:
        """Whether cross-validation showed the interval honest (coverage within :data:`COVERAGE_GOAL`)."""
        c = self.cv_interval_coverage
        return c is not None and COVERAGE_GOAL[0] <= c <= COVERAGE_GOAL[1]


@dataclass(frozen=True)
class Calibration:
    """Epoch jitter per family and pooled (all families), scaled per instance class; see
    :func:`fit_calibration`."""

    pooled: JitterCalibration
    families: dict[str, JitterCalibration] = field(default_factory=dict)
    interval: float = 0.90
    created: str = ""
    source: str = ""
    classes: dict[str, ClassCalibration] = field(default_factory=dict)
    unseen_class_factor: dict[str, float] = field(default_factory=dict)
    """Per kind (``cpu``, ``gpu``): the factor for a class without one of its own. Each seen class of
    the kind is held out in turn, the family jitters refitted without it and its logs' factor fitted
    against those: the widest of these (at least 1) is what an unseen class of that kind has needed."""

    def class_factor(self, instance_class: str | None) -> tuple[float, str | None, list[str]]:
        """(factor on the family's jitter, ``class`` / ``unseen-class`` / ``unknown-class`` / None, notes).

        A table without classes scales nothing (None). A class with its own factor uses it; a class
        without one (not in the calibration logs, or too few of them) and an unknown class get the
        unseen-class fallback of their kind (an unknown class: the widest kind's), never below 1.
        """
        if not self.classes:
            return 1.0, None, []
        own = self.classes.get(instance_class) if instance_class else None
        if own is not None and own.factor is not None:
            # the family's jitter already covers its logs: a class widens it where its own logs needed
            # more, and never narrows it (a quiet class of a noisy family would undercover the family)
            return max(1.0, own.factor), "class", []
        from trainsweep.instance_class import kind

        fallback = dict(self.unseen_class_factor)
        if instance_class is None:
            factor = max(fallback.values(), default=1.0)
            why, source = "instance class unknown", "unknown-class"
        else:
            factor = fallback.get(kind(instance_class), max(fallback.values(), default=1.0))
            why = f"no calibration logs of instance class {instance_class!r}"
            if own is not None:
                why = f"instance class {instance_class!r} has too few calibration logs ({own.logs})"
            source = "unseen-class"
        factor = max(1.0, factor)
        return (
            factor,
            source,
            [f"{why}: the interval's jitter is widened {factor:.2f}x (unseen-class fallback)"],
        )

    def jitter_for(self, family: str | None) -> tuple[float, str, list[str]]:
        """(epoch jitter, ``family`` or ``pooled``, notes) for a run of ``family``.

        A family with its own fitted jitter uses it; an unknown family, or one with too few logs, the
        pooled one. A family whose interval fell short of the coverage goal in cross-validation gets the
        wider of its own and the pooled jitter, and a note that says so.
        """
        pooled = self.pooled.epoch_jitter
        if pooled is None:
            raise ValueError("the calibration has no pooled epoch jitter")
        own = self.families.get(family) if family else None
        if own is None or own.epoch_jitter is None:
            if family is None:
                why = "family unknown"
            elif own is None:
                why = f"no calibration logs of family {family!r}"
            else:
                why = f"family {family!r} has too few calibration logs ({own.logs})"
            note = f"{why}: the interval uses the pooled calibration (epoch jitter {pooled:.2%})"
            if self.pooled.cv_interval_coverage is not None:
                note += f", which covered {self.pooled.cv_interval_coverage:.0%} of held-out logs"
            return pooled, "pooled", [note]
        notes = []
        if own.cv_median_abs_error is not None and own.cv_median_abs_error > MEDIAN_ERROR_GOAL:
            notes.append(
                f"predictions of family {family!r} were off by a median {own.cv_median_abs_error:.1%} "
                f"in cross-validation (epoch jitter {own.epoch_jitter:.1%}): two epochs do not pin its "
                "epoch time down"
            )
        if own.validated or own.cv_interval_coverage is None:
            return own.epoch_jitter, "family", notes
        low = own.cv_interval_coverage < COVERAGE_GOAL[0]
        jitter = max(own.epoch_jitter, pooled) if low else own.epoch_jitter
        note = (
            f"the 90 % interval of family {family!r} covered {own.cv_interval_coverage:.0%} of held-out "
            f"logs in cross-validation (goal {COVERAGE_GOAL[0]:.0%}-{COVERAGE_GOAL[1]:.0%}): "
            + ("two epochs do not pin its epoch time down; the interval is widened to the pooled one"
               if low else "the interval is wider than it needs to be")
        )  # fmt: skip
        return jitter, "family", [*notes, note]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pooled"]["validated"] = self.pooled.validated
        for name, cal in self.families.items():
            d["families"][name]["validated"] = cal.validated
        for name, cc in self.classes.items():
            d["classes"][name]["validated"] = cc.validated
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        from trainsweep.class_calibration import ClassCalibration

        def one(x: dict[str, Any]) -> JitterCalibration:
            return JitterCalibration(**{k: v for k, v in x.items() if k != "validated"})

        return cls(
            pooled=one(d["pooled"]),
            families={k: one(v) for k, v in d.get("families", {}).items()},
            interval=d.get("interval", 0.90),
            created=d.get("created", ""),
            source=d.get("source", ""),
            classes={k: ClassCalibration.from_dict(v) for k, v in d.get("classes", {}).items()},
            unseen_class_factor=dict(d.get("unseen_class_factor", {})),
        )


@functools.cache
def load_calibration() -> Calibration:
    """The calibration shipped in the package (``trainsweep/data/predict-calibration.json``)."""
    import json
    from importlib import resources

    text = resources.files("trainsweep").joinpath("data", CALIBRATION_FILE).read_text(encoding="utf-8")
    return Calibration.from_dict(json.loads(text))


def set_interval(res: ReplayResult, interval: float = 0.90) -> None:
    """The predicted epoch's interval from its ``stat_rel`` and ``epoch_jitter``."""
    if res.predicted_epoch_s is None or res.stat_rel is None or res.epoch_jitter is None:
        return
    z = NormalDist().inv_cdf(0.5 + interval / 2)
    half = z * math.hypot(res.stat_rel, res.epoch_jitter)
    res.predicted_epoch_low_s = res.predicted_epoch_s * max(0.0, 1 - half)  # a wide one stops at zero
    res.predicted_epoch_high_s = res.predicted_epoch_s * (1 + half)


def needed_jitter(res: ReplayResult, interval: float = 0.90) -> float | None:
    """The smallest epoch jitter whose interval contains the actual epoch time of a scored replay."""
    if res.error is None or res.stat_rel is None:
        return None
    z = NormalDist().inv_cdf(0.5 + interval / 2)
    return math.sqrt(max(0.0, (abs(res.error) / z) ** 2 - res.stat_rel**2))


def fit_jitter(results: Sequence[ReplayResult], interval: float = 0.90) -> float | None:
    """Split-conformal epoch jitter: the ceil(interval (n + 1))-th smallest needed jitter of n logs.

    A new log exchangeable with these is covered with probability at least ``interval`` (and less than
    ``interval + 1/(n+1)``); None when n is too small for that (n < interval / (1 - interval)).
    """
    return conformal_quantile([j for r in results if (j := needed_jitter(r, interval)) is not None], interval)


def conformal_quantile(scores: Sequence[float], interval: float = 0.90) -> float | None:
    """The ceil(interval (n + 1))-th smallest of n scores (None when n is too small for that)."""
    ranked = sorted(scores)
    k = math.ceil(interval * (len(ranked) + 1))
    if k > len(ranked):
        return None
    return ranked[k - 1] * (1 + 1e-9)  # the k-th log itself on the boundary, covered


def family_jitters(
    scored: Sequence[ReplayResult], experiment: dict[str, str], interval: float
) -> tuple[JitterCalibration, dict[str, JitterCalibration]]:
    by_family: dict[str, list[ReplayResult]] = {}
    for r in scored:
        if r.family:
            by_family.setdefault(r.family, []).append(r)

    def one(rs: Sequence[ReplayResult]) -> JitterCalibration:
        return JitterCalibration(
            fit_jitter(rs, interval), len(rs), len({experiment.get(r.log, r.log) for r in rs})
        )

    return one(scored), {f: one(rs) for f, rs in sorted(by_family.items())}


def fit_calibration(
    results: Sequence[ReplayResult], experiment: dict[str, str], interval: float = 0.90
) -> Calibration:
    """Epoch jitter per family (:func:`run_family`, in ``ReplayResult.family``) and pooled over all logs,
    and per instance class (``ReplayResult.instance_class``) a factor on it, with the unseen-class
    fallback (:class:`Calibration`).

    ``experiment`` maps each log to its experiment (only counted here; see :func:`cross_validate`).
    """
    scored = [r for r in results if r.error is not None and r.stat_rel is not None]
    pooled, families = family_jitters(scored, experiment, interval)
    if pooled.epoch_jitter is None:
        return Calibration(pooled, families, interval)
    from trainsweep.class_calibration import fit_classes

    classes, unseen = fit_classes(scored, experiment, pooled, families, interval)
    return Calibration(pooled, families, interval, classes=classes, unseen_class_factor=unseen)


def cross_validate(
    results: Sequence[ReplayResult], experiment: dict[str, str], interval: float = 0.90
) -> list[ReplayResult]:
    """Leave-one-experiment-out: each experiment's logs get the interval of a calibration fitted on all
    the other experiments' logs (its family's jitter if they hold enough of that family, else pooled).

    Returns copies of ``results`` with their intervals (and ``interval_notes``) replaced; replays whose
    jitter was set by the rule are calibrated too. The held-out logs never enter their own calibration:
    where the others are too few to fit one (fewer than 9 scored), the copy has no interval.
    """
    import copy

    scored: dict[int, ReplayResult] = {}
    for held in sorted({experiment.get(r.log, r.log) for r in results}):
        rest = [r for r in results if experiment.get(r.log, r.log) != held]
        cal = fit_calibration(rest, experiment, interval)
        for r in results:
            if experiment.get(r.log, r.log) != held:
                continue
            scored[id(r)] = c = copy.deepcopy(r)
            if c.predicted_epoch_s is None:
                continue
            c.interval_notes = []
            if cal.pooled.epoch_jitter is None:  # no interval rather than one fitted on its own logs
                c.epoch_jitter = c.calibration = c.interval_validated = c.class_calibration = None
                c.predicted_epoch_low_s = c.predicted_epoch_high_s = None
                n = cal.pooled.logs
                c.interval_notes.append(
                    f"too few scored logs outside its experiment ({n}) to calibrate its interval"
                )
                continue
            c.epoch_jitter, c.calibration, c.interval_validated, c.class_calibration = epoch_jitter_for(
                c.family, StopRule(interval=interval), cal, c.interval_notes, c.instance_class
            )
            set_interval(c, interval)
    return [scored[id(r)] for r in results]


def family_summary(results: Sequence[ReplayResult]) -> dict[str, dict[str, Any]]:
    """Per family (and ``pooled``): logs, logs scored, median |error|, interval coverage, baseline."""
    return group_summary(results, lambda r: r.family)


def class_summary(results: Sequence[ReplayResult]) -> dict[str, dict[str, Any]]:
    """:func:`family_summary` per instance class (and ``pooled``)."""
    return group_summary(results, lambda r: r.instance_class)


def group_summary(
    results: Sequence[ReplayResult], key: Callable[[ReplayResult], str | None]
) -> dict[str, dict[str, Any]]:
    """Per group ``key`` gives (``unknown`` for None; and ``pooled``): see :func:`family_summary`."""
    groups: dict[str, list[ReplayResult]] = {"pooled": list(results)}
    for r in results:
        groups.setdefault(key(r) or "unknown", []).append(r)
    out = {}
    for name, rs in groups.items():
        scored = [r for r in rs if r.error is not None]
        covered = [bool(r.covered) for r in scored if r.covered is not None]
        out[name] = {
            "logs": len(rs),
            "logs_scored": len(scored),
            "median_abs_error": _percentile([abs(r.error) for r in scored if r.error is not None], 50),
            "p95_abs_error": _percentile([abs(r.error) for r in scored if r.error is not None], 95),
            "interval_coverage": sum(covered) / len(covered) if covered else math.nan,
            "baseline_median_abs_error": _percentile(
                [abs(r.baseline_error) for r in scored if r.baseline_error is not None], 50
            ),
            "median_epoch_jitter": _percentile(
                [r.epoch_jitter for r in scored if r.epoch_jitter is not None], 50
            ),
            "median_interval_half_width": _percentile(
                [w for r in scored if (w := r.interval_half_width) is not None], 50
            ),
        }
    return out


def calibrate(
    results: Sequence[ReplayResult],
    experiment: dict[str, str],
    interval: float = 0.90,
    *,
    created: str = "",
    source: str = "",
) -> tuple[Calibration, list[ReplayResult]]:
    """The calibration fitted on all ``results`` (the one to ship), each family carrying the figures of
    its leave-one-experiment-out cross-validation; and the cross-validated replays themselves."""
    cv = cross_validate(results, experiment, interval)
    figures, by_class = family_summary(cv), class_summary(cv)
    full = fit_calibration(results, experiment, interval)

    def with_cv(name: str, cal: Any, figs: dict[str, dict[str, Any]]) -> Any:
        f = figs.get(name)
        if not f or not f["logs_scored"]:
            return cal
        return replace(
            cal,
            cv_logs=f["logs_scored"],
            cv_interval_coverage=f["interval_coverage"],
            cv_median_abs_error=f["median_abs_error"],
        )

    families = {k: with_cv(k, v, figures) for k, v in full.families.items()}
    classes = {k: with_cv(k, v, by_class) for k, v in full.classes.items()}
    pooled = with_cv("pooled", full.pooled, figures)
    cal = Calibration(pooled, families, interval, created, source, classes, full.unseen_class_factor)
    return cal, cv


def cross_validations(
    results: Sequence[ReplayResult], experiment: dict[str, str], interval: float = 0.90
) -> dict[str, dict[str, Any]]:
    """Leave one experiment, one family and one instance class out (:func:`cross_validate` held out by
    each), each summarised per family and per class. A family or class held out is calibrated without
    any log of it: its interval comes from the pooled jitter or the unseen-class fallback."""
    out = {}
    for name, key in (
        ("leave_one_experiment_out", lambda r: experiment.get(r.log, r.log)),
        ("leave_one_family_out", lambda r: r.family or "unknown"),
        ("leave_one_class_out", lambda r: r.instance_class or "unknown"),
    ):
        held = {r.log: key(r) for r in results}
        cv = cross_validate(results, held, interval)
        out[name] = {"families": family_summary(cv), "classes": class_summary(cv)}
    return out
