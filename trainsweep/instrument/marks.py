"""The explicit marks of an instrumented run (:class:`ExplicitMarks`, a part of
:class:`trainsweep.instrument.session.Session`): what :mod:`trainsweep.instrument`'s functions and the
framework callbacks (:mod:`trainsweep.instrument.hf`, :mod:`trainsweep.instrument.lightning`) call: data
ready, step end, epoch start and end, evaluation start and end, a metric.

The first mark of a kind (:data:`KINDS`) switches the automatic detection of that kind off, so nothing is
counted twice.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trainsweep.instrument import probe
from trainsweep.instrument.epochs import EpochInference
from trainsweep.instrument.loops import EXPLICIT
from trainsweep.logs import mllog
from trainsweep.training.timeline import RunWriter

KINDS = frozenset({"data", "step", "epoch", "eval"})
"""What an explicit mark can take over from the automatic hooks."""
ACCURACY_NAMES = frozenset({"accuracy", "acc", "eval_accuracy", "eval_acc", "val_accuracy", "val_acc"})
METRIC_PREFIX = mllog.NS + "metric."


def metric_value(value: Any) -> Any:
    """A JSON value for a metric: tensors and numpy scalars become floats; None when not finite."""
    if isinstance(value, torch.Tensor):
        value = value.detach().float().mean().item()
    elif hasattr(value, "item") and not isinstance(value, int | float | str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class ExplicitMarks(EpochInference):
    """The session's explicit marks over its epoch bookkeeping."""

    writer: RunWriter

    def _count_step(self) -> None:
        raise NotImplementedError  # the session's: a training step ends

    def _raise_if_stopped(self) -> None:
        raise NotImplementedError  # the session's: early stop already predicted

    def claim(self, *kinds: str) -> None:
        """Switch the automatic detection of ``kinds`` off before the first mark (framework callbacks)."""
        unknown = set(kinds) - KINDS
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        self.manual.update(kinds)

    def data_ready(self) -> None:
        self.manual.add("data")
        tl = self.timeline
        if tl.clock is None:
            tl.restart_clock()
        assert tl.clock is not None
        tl.clock.data_ready()
        tl.ready_marked = True

    def step_end(self) -> None:
        if "step" not in self.manual:
            self.manual.add("step")
            self.timeline.mark_steps(EXPLICIT)
            if self._auto_step_pending:
                # the optimizer hook has just counted this very step: the mark takes over from here on
                self._auto_step_pending = False
                self._raise_if_stopped()
                return
        self._count_step()

    def epoch_start(self, epoch: int | None = None) -> None:
        self.manual.add("epoch")
        self._settle()
        probe.sync()
        now, wall = probe.now()
        tl = self.timeline
        if tl.epoch is not None:
            tl.close_epoch(tl.epoch, now, wall)
        tl.restart_clock()
        tl.open_epoch(now, wall, None, epoch)

    def epoch_end(self) -> None:
        self.manual.add("epoch")
        self._settle()
        tl = self.timeline
        if tl.epoch is not None:
            probe.sync()
            tl.close_epoch(tl.epoch, *probe.now())

    def eval_start(self) -> None:
        self.manual.add("eval")
        self._settle_training_pass()
        probe.sync()
        self._eval_at = probe.now()

    def eval_end(self) -> None:
        self.manual.add("eval")
        self._settle()
        if self._eval_at is None:
            return
        probe.sync()
        (t0, wall0), self._eval_at = self._eval_at, None
        nested = self.train_pass is not None and not self.train_pass.ended
        self._evaluated(t0, wall0, *probe.now(), nested=nested)

    def metric(self, name: str, value: Any) -> None:
        """A metric of the current (or the last closed) epoch; accuracies become EVAL_ACCURACY."""
        v = metric_value(value)
        if v is None:
            return
        tl = self.timeline
        index = tl.epoch.index if tl.epoch is not None else tl.closed_index
        accuracy = index is not None and name.lower() in ACCURACY_NAMES  # no epoch: no epoch's accuracy
        self.writer.metric(mllog.EVAL_ACCURACY if accuracy else METRIC_PREFIX + name, v, index)
