"""The full-run prediction early-stop mode writes: :func:`predict_run` turns steady step (and validation
batch) times into the time per epoch and for the requested epochs, with an interval."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

from trainsweep.predict.calibration import CONTAINER_FAMILIES, Calibration, epoch_jitter_for, run_noise
from trainsweep.predict.steady import SteadyEstimate, StopRule

PREDICTION_VERSION = 1


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
    """Epoch-to-epoch jitter (relative sd) in the interval: the calibration's multiple of this run's own
    noise (:func:`trainsweep.predict.run_noise`), or the rule's."""
    calibration: str | None = None
    """Where ``epoch_jitter`` came from: ``family``, ``pooled`` or ``rule``."""
    interval_validated: bool | None = None
    """Whether that calibration's 90 % interval covered 85-95 % of held-out logs in cross-validation."""
    instance_class: str | None = None
    """The run's instance class (:mod:`trainsweep.instance_class`; None: unknown)."""
    class_calibration: str | None = None
    """How the class widened the jitter: ``class`` (its own factor), ``unseen-class`` (a class the
    calibration has no factor for: the wider fallback), ``unknown-class``, or None (no class table)."""
    run_noise: float | None = None
    """This run's own noise (relative sd of the predicted epoch from its steps' standard error,
    floored: :func:`trainsweep.predict.run_noise`), which the calibrated jitter is a multiple of."""

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
    train, val, var_rel_num, excess = _epoch_parts(
        step, batches, validation, validation_batches_per_epoch, warmup_excess_s, notes
    )
    epoch = train + val + epoch_overhead_s
    stat_rel = math.sqrt(var_rel_num) / epoch if epoch > 0 else 0.0
    jitter, source, validated, by_class = epoch_jitter_for(
        family, rule, calibration, notes, instance_class, stat_rel
    )
    half = NormalDist().inv_cdf(0.5 + rule.interval / 2) * math.hypot(stat_rel, jitter)
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
        run_noise=run_noise(stat_rel),
    )


def _epoch_parts(
    step: SteadyEstimate,
    batches: float,
    validation: SteadyEstimate | None,
    validation_batches: float,
    warmup_excess_s: float | None,
    notes: list[str],
) -> tuple[float, float, float, float]:
    """(training time, validation time, variance of their sum, one-off excess) of one epoch; appends a
    note when the epoch has validation that was not timed."""
    train = batches * step.mean_s
    val = 0.0
    var = (batches * step.se_s) ** 2
    excess = step.warmup_excess_s if warmup_excess_s is None else warmup_excess_s
    if validation is not None and validation_batches > 0:
        val = validation_batches * validation.mean_s
        var += (validation_batches * validation.se_s) ** 2
        if warmup_excess_s is None:
            excess += validation.warmup_excess_s
    elif validation_batches > 0:
        notes.append("validation not timed: the epoch time leaves it out")
    return train, val, var, excess
