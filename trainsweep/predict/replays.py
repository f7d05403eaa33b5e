"""The early-stop rule replayed on a complete log (:func:`replay`), against the epochs it did not watch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from trainsweep.predict.calibration import Calibration, epoch_jitter_for, run_family
from trainsweep.predict.steady import SteadyEstimate, SteadyState, StopRule, steady_estimate

if TYPE_CHECKING:
    from trainsweep.logs.model import Epoch, RunTimings

# Seeds' estimator: mean of steps 2..11 of the flat step list ("2-11" in training-times-summary.py).
BASELINE_FIRST, BASELINE_LAST = 1, 11
REFERENCE_EPOCHS = 90  # "a 90-epoch training of the same configuration" when reporting the share watched


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
    watched, steady = _watch(res, epochs, rule, max_epochs, validation_tolerance)
    if steady is None:
        res.notes.append("too few steps to estimate a steady step time")
        return res
    _predict_epoch(res, epochs, steady, rule, calibration)
    _compare(res, run, epochs, len(watched))
    return res


def _watch(
    res: ReplayResult, epochs: Sequence[Epoch], rule: StopRule, max_epochs: int, validation_tolerance: float
) -> tuple[list[Epoch], tuple[Epoch, SteadyEstimate] | None]:
    """Feed the epochs to the live rule until one is steady (at most ``max_epochs``); sets what was
    watched. Returns the epochs watched and the last one with an estimate, with its estimate."""
    watched: list[Epoch] = []
    steady: tuple[Epoch, SteadyEstimate] | None = None
    reason = "cap"
    prev_val: float | None = None
    # the live rule's own estimator: every step watched so far but step 1 and the steps next to an epoch
    # boundary, warm-up found by MSER over all of them (not one epoch's steps alone)
    monitor = SteadyState(rule)
    for i, e in enumerate(epochs[: max(0, max_epochs)]):
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
    res.share_of_log_watched = res.steps_used / res.steps_total if res.steps_total else None
    typical_steps = max(e.steps for e in epochs)
    res.share_of_90_epochs_watched = res.steps_used / (REFERENCE_EPOCHS * typical_steps)
    return watched, steady


def _predict_epoch(
    res: ReplayResult,
    epochs: Sequence[Epoch],
    steady: tuple[Epoch, SteadyEstimate],
    rule: StopRule,
    calibration: Calibration | None,
) -> None:
    """The predicted epoch time: the steady epoch with its inner steps replaced by their steady mean
    (it keeps its boundary steps, validation and hand-offs, and drops its transients); and its interval."""
    se, est = steady
    res.steady_epoch = se.index
    if se is epochs[0] and se.validation_s is not None:
        res.notes.append("only the first epoch was seen: its validation includes one-off costs")
    n = se.steps
    ep_s = _epoch_time(se) or 0.0
    inner = list(se.step_s[1:-1]) if n > 3 else list(se.step_s)
    overhead = ep_s - sum(inner)
    if se is epochs[0] and n > 3:
        # the run's first step is a one-off cost, not part of a typical epoch
        overhead -= se.step_s[0] - est.mean_s
    pred_epoch = len(inner) * est.mean_s + overhead
    res.predicted_epoch_s = pred_epoch
    res.stat_rel = len(inner) * est.se_s / pred_epoch if pred_epoch > 0 else 0.0
    res.epoch_jitter, res.calibration, res.interval_validated, res.class_calibration = epoch_jitter_for(
        res.family, rule, calibration, res.interval_notes, res.instance_class, res.stat_rel
    )
    set_interval(res, rule.interval)


def _compare(res: ReplayResult, run: RunTimings, epochs: Sequence[Epoch], watched: int) -> None:
    """What the log shows beside the prediction: the unwatched epochs' mean time, the whole run's, and
    the seeds' estimator's predictions."""
    pred_epoch = res.predicted_epoch_s or 0.0
    times = [_epoch_time(e) for e in epochs]
    watched_s = sum(t or 0.0 for t in times[:watched])
    rest = [t for t in times[watched:] if t is not None]
    if rest:
        res.actual_epoch_s = sum(rest) / len(rest)
    if all(t is not None for t in times):
        res.actual_total_s = sum(t for t in times if t is not None)
    res.predicted_total_s = watched_s + (len(epochs) - watched) * pred_epoch
    flat_base = baseline_step_s(run)
    if flat_base is not None:
        res.baseline_predicted_epoch_s = flat_base * max(e.steps for e in epochs)
        res.baseline_predicted_total_s = flat_base * res.steps_total


def set_interval(res: ReplayResult, interval: float = 0.90) -> None:
    """The predicted epoch's interval from its ``stat_rel`` and ``epoch_jitter``."""
    if res.predicted_epoch_s is None or res.stat_rel is None or res.epoch_jitter is None:
        return
    z = NormalDist().inv_cdf(0.5 + interval / 2)
    half = z * math.hypot(res.stat_rel, res.epoch_jitter)
    res.predicted_epoch_low_s = res.predicted_epoch_s * max(0.0, 1 - half)  # a wide one stops at zero
    res.predicted_epoch_high_s = res.predicted_epoch_s * (1 + half)
