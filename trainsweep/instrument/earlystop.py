"""Early stop for an instrumented script: when to stop (every rank agrees), and the prediction of the full
run from the steps watched, the training loader's shape and a few timed validation batches.

The same rule and prediction as the built-in worker (:meth:`trainsweep.training.worker.CellRun.early_stop`);
what differs is where the numbers come from: the script's own loaders and model.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from trainsweep.instrument import probe
from trainsweep.instrument.outcome import EarlyStop
from trainsweep.instrument.passes import Loaders, batches_per_step
from trainsweep.instrument.settings import Settings
from trainsweep.instrument.timeline import Epoch, Timeline
from trainsweep.predict import (
    Prediction,
    SteadyEstimate,
    SteadyState,
    StopRule,
    predict_run,
    steady_estimate,
    t_quantile,
)
from trainsweep.training.contract import DDP_AGREE_EVERY

NEW_SHAPE_NOTE = "new-shape warm-up of partial last batches not measured (the script owns the training step)"
MEASURED_EVAL_NOTE = (
    "validation from the evaluations the run made (each timed whole): {count} per {per}, {mean:.3g} s each"
)


class CannotPredictError(Exception):
    """Early stop has no prediction to give; the message says why (it becomes the cell's reason)."""


def should_stop(monitor: SteadyState, steps_in_epoch: int, device: torch.device) -> bool:
    """The rule's verdict; under DDP every ``DDP_AGREE_EVERY`` steps, agreed by all ranks (any says stop)."""
    local = monitor.stop_reason() is not None
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return local
    if steps_in_epoch % DDP_AGREE_EVERY:
        return False
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    flag = torch.tensor([1.0 if local else 0.0], device=on)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


@dataclass(frozen=True)
class EpochShape:
    steps_per_epoch: int
    train_batches: float
    """The epoch's work in full batches (the last batch is usually partial)."""


def epoch_shape(
    loader: DataLoader | None,
    *,
    batch_size: int | None,
    cap: int | None,
    batches_per_step: int,
    whole_pass: int | None = None,
) -> EpochShape:
    """Steps per epoch from ``len(loader)`` (at most ``cap`` batches), ``batches_per_step`` with accumulation;
    for a loader without a length, the steps of its first whole pass (``whole_pass``, once it ended).

    Raises:
        CannotPredictError: no training loader, or one without a length before its first pass ended.
    """
    batches = probe.loader_batches(loader) if loader is not None else None
    if loader is not None and batches is None and whole_pass is not None:
        return EpochShape(whole_pass, float(whole_pass))
    if loader is None or batches is None:
        raise CannotPredictError(
            "early stop cannot predict: steps per epoch are unknown "
            "(no training DataLoader with a length was seen, and no epoch ended)"
        )
    if cap is not None:
        batches = min(batches, cap)
    steps = math.ceil(batches / batches_per_step)
    samples = probe.loader_samples(loader, batch_size, cap)
    full: float = steps
    if samples is not None and batch_size:
        full = min(samples / batch_size / batches_per_step, float(steps))
    return EpochShape(steps, full)


@dataclass(frozen=True)
class ValidationTiming:
    batches_per_epoch: float
    times: list[float]
    error: str | None = None
    """Why the batches could not be timed (the prediction then leaves validation out)."""
    measured: bool = False
    """``times`` are whole evaluations the script made (``batches_per_epoch`` of them per epoch), not
    batches early stop timed itself."""


def time_validation(
    loader: DataLoader | None, model: nn.Module | None, *, cap: int | None, n: int, sync: Callable[[], None]
) -> ValidationTiming:
    """The first ``n`` batches of ``loader`` through ``model``; no loader: no validation to predict."""
    if loader is None:
        return ValidationTiming(0.0, [])
    limits = [v for v in (probe.loader_batches(loader), cap) if v is not None]
    per_epoch = float(min(limits)) if limits else 0.0
    if model is None:
        return ValidationTiming(per_epoch, [], "no model was seen in a training step")
    try:
        times = probe.time_model_batches(model, loader, n, sync)
    except Exception as e:
        text = str(e).splitlines()[0][:300] if str(e) else ""
        return ValidationTiming(per_epoch, [], f"{type(e).__name__}: {text}")
    return ValidationTiming(per_epoch, times)


def prediction(
    monitor: SteadyState,
    shape: EpochShape,
    validation: ValidationTiming,
    *,
    rule: StopRule,
    epochs: int,
    reason: str,
) -> Prediction:
    """The full run predicted as the worker predicts it (one-off costs: warm-up and first validation batch).

    Raises:
        CannotPredictError: too few steps were watched to estimate the step time.
    """
    est = monitor.estimate()
    if est is None:
        raise CannotPredictError(
            f"early-stop watched {monitor.steps} steps, too few to estimate the step time; "
            "raise the epochs or the step caps"
        )
    if validation.measured:
        val_est = evaluation_estimate(validation.times, confidence=rule.confidence)
    elif validation.times:
        val_est = steady_estimate(validation.times, confidence=rule.confidence, skip_first=1)
    else:
        val_est = None
    excess = est.warmup_excess_s
    if val_est is not None and validation.batches_per_epoch > 0:
        excess += val_est.warmup_excess_s
    pred = predict_run(
        est,
        steps_per_epoch=shape.steps_per_epoch,
        train_batches=shape.train_batches,
        epochs=epochs,
        rule=rule,
        validation=val_est,
        validation_batches_per_epoch=validation.batches_per_epoch,
        warmup_excess_s=excess,
        steps_watched=monitor.steps,
        stop_reason=reason,
    )
    pred.notes.append(NEW_SHAPE_NOTE)
    if validation.measured and val_est is not None:
        per = "run" if shape.steps_per_epoch == shape.train_batches and epochs == 1 else "epoch"
        count = f"{validation.batches_per_epoch:g}"
        pred.notes.append(MEASURED_EVAL_NOTE.format(count=count, per=per, mean=val_est.mean_s))
    return pred


def evaluation_estimate(durations: Sequence[float], *, confidence: float = 0.95) -> SteadyEstimate | None:
    """The time of one whole evaluation from the few the run made (every one counts: none is warm-up)."""
    if not durations:
        return None
    if len(durations) >= 4:
        est = steady_estimate(durations, confidence=confidence)
        if est is not None:
            return est
    mean = statistics.fmean(durations)
    n = len(durations)
    se = statistics.stdev(durations) / math.sqrt(n) if n > 1 else 0.0
    rel = t_quantile(0.5 + confidence / 2, n - 1) * se / mean if n > 1 and mean > 0 else 0.0
    return SteadyEstimate(mean, se, rel, n, 0, 0, 0.0)


def evaluations_in_run(at_steps: Sequence[int], steps: int) -> int:
    """How many evaluations a step-based run of ``steps`` steps makes, from the step counts at which the
    watched ones began: every median gap from the first one on; one seen is one in the run."""
    if len(at_steps) < 2:
        return len(at_steps)
    gaps = sorted(b - a for a, b in itertools.pairwise(at_steps) if b > a)
    if not gaps:
        return len(at_steps)
    every = gaps[len(gaps) // 2]
    return max(len(at_steps), (steps - at_steps[0]) // every + 1)


def prediction_value(
    run_name: str, batch_size: int | None, pred: Prediction, validation: ValidationTiming
) -> dict[str, Any]:
    """The PREDICTION event's value, laid out as the worker's."""
    value: dict[str, Any] = {"run_name": run_name, "batch_size": batch_size, **pred.to_dict()}
    value["validation_batch_times_s"] = validation.times
    value["new_shape_warmup_s"] = {}
    return value


class Forecast:
    """Early stop's prediction of the full run from what the timeline and the loaders saw, written to the
    run's log and its prediction file."""

    def __init__(
        self, settings: Settings, monitor: SteadyState, timeline: Timeline, loaders: Loaders
    ) -> None:
        self.settings = settings
        self.monitor = monitor
        self.timeline = timeline
        self.loaders = loaders

    def predict(
        self,
        ep: Epoch | None,
        reason: str,
        *,
        model: nn.Module | None,
        internal: Callable[[], Any],
        per_step: float | None = None,
    ) -> dict[str, Any]:
        """The prediction of the full run (``internal``: a context in which the session's hooks record
        nothing, for the validation batches timed here; ``per_step``: the batches a step trains, when
        known, kept in the prediction as ``batches_per_step`` for whoever turns its step time into
        samples/s, such as the batch-size search).

        Raises:
            EarlyStop: with ``error`` set, when no prediction can be made.
        """
        s, tl = self.settings, self.timeline
        ep = ep or tl.last_epoch or Epoch(tl.last_index, 0.0, 0.0)
        try:
            shape, validation = self._run_shape(ep, model=model, internal=internal)
            if not validation.measured:
                tl.writer.evaluation(ep.index)
            epochs = s.epochs or max(tl.last_index, 1)
            pred = prediction(self.monitor, shape, validation, rule=s.rule, epochs=epochs, reason=reason)
        except CannotPredictError as e:
            raise EarlyStop(None, str(e)) from None
        if validation.error is not None:
            flag = (
                f"early stop could not time validation batches ({validation.error}): "
                "the prediction leaves validation out"
            )
            tl.flags.append(flag)
            tl.writer.flag(flag)
        value = prediction_value(s.run_name, s.batch_size, pred, validation)
        if s.steps is not None:
            value["steps"] = s.steps
        if per_step is not None:
            value["batches_per_step"] = per_step
        tl.writer.prediction(value, pred, file=s.prediction_file)
        return value

    def _run_shape(
        self, ep: Epoch, *, model: nn.Module | None, internal: Callable[[], Any]
    ) -> tuple[EpochShape, ValidationTiming]:
        """The full run's steps per epoch and its validation: from the loaders (timing a few evaluation
        batches), or, for a step-based run or a loop without a loader, from the steps and evaluations seen.

        Raises:
            CannotPredictError: the steps per epoch are unknown.
        """
        s, tl, loaders = self.settings, self.timeline, self.loaders
        if s.steps is not None:
            count = evaluations_in_run(tl.eval_at_steps, s.steps)
            measured = ValidationTiming(float(count), list(tl.eval_s), measured=True)
            return EpochShape(s.steps, float(s.steps)), measured
        known = self.monitor.steps_per_epoch
        if loaders.train is None and known is not None:
            per_epoch = float(tl.evals_per_epoch or 0)
            measured = ValidationTiming(per_epoch, list(tl.eval_s), measured=True)
            return EpochShape(known, float(known)), measured
        tp = ep.train_pass or loaders.last_train_pass
        shape = epoch_shape(
            loaders.train,
            batch_size=loaders.batch_size,
            cap=s.max_steps_per_epoch,
            batches_per_step=batches_per_step(tp) or 1,  # gradient accumulation
            whole_pass=known if self.monitor.epochs_done else None,
        )
        with internal():
            validation = time_validation(
                loaders.eval_loader(),
                model,
                cap=s.max_eval_batches,
                n=s.rule.validation_batches,
                sync=probe.sync,
            )
        return shape, validation
