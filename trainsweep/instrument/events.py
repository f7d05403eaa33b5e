"""The log of an instrumented script, written as the built-in worker writes its own: ``:::MLLOG`` events
next to the seeds' human-readable lines, so that the parser, the run records and the report read both
alike.

Header events and human-readable lines come from rank 0; epoch boundaries, steps and failures from every
rank (``rank`` in the metadata). Events that are written after the moment they stand for (an epoch is
known to be a training epoch only at its first step) carry that moment's time stamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.logs import mllog
from trainsweep.predict import Prediction
from trainsweep.training.runlog import STDOUT_ONLY, RunLog


class StdoutLog(RunLog):
    """A run log that only prints, on every rank (outside a job the platform collects stdout)."""

    def __init__(self, *, rank: int = 0) -> None:
        super().__init__(STDOUT_ONLY, rank=rank)
        self.echo = True  # every rank


@dataclass(frozen=True)
class RunFacts:
    """The run's header, known at its first training step. None: unknown, not written."""

    workload: str
    global_batch_size: int | None
    train_samples: int | None
    eval_samples: int | None
    epochs: int | None
    gpus: int
    world_size: int
    platform: str
    command_line: str
    instance_type: str | None
    mode: str
    steps: int | None = None
    """A step-based run's steps (its one epoch is that stretch of steps)."""


def _ms(wall: float) -> float:
    return wall * 1000


class RunWriter:
    """Writes one rank's events of an instrumented run to ``log``."""

    def __init__(self, log: RunLog, *, rank: int = 0) -> None:
        self.log = log
        self.primary = rank == 0

    @property
    def path(self) -> Path:
        return self.log.path

    def legacy(self, text: str) -> None:
        if self.primary:
            self.log.line(text)

    def header(self, key: str, value: Any, **metadata: Any) -> None:
        if self.primary:
            self.log.event(key, value, **metadata)

    def init_start(self) -> None:
        self.header(mllog.INIT_START, None)

    def run_start(self, facts: RunFacts, *, init_s: float, wall: float, flags: list[str]) -> None:
        """Initialisation over, the header, the flags on the batch size, RUN_START (at ``wall``)."""
        self.legacy(f"Initialization time {init_s}")
        self.header(mllog.INIT_TIME, init_s)
        self.header(mllog.INIT_STOP, None, time_ms=_ms(wall))
        for flag in flags:
            self.legacy(flag)
        for key, value in (
            (mllog.WORKLOAD, facts.workload),
            (mllog.GLOBAL_BATCH_SIZE, facts.global_batch_size),
            (mllog.TRAIN_SAMPLES, facts.train_samples),
            (mllog.EVAL_SAMPLES, facts.eval_samples),
            (mllog.EPOCH_COUNT, facts.epochs),
            (mllog.TRAIN_STEPS, facts.steps),
            (mllog.GPUS, facts.gpus),
            (mllog.WORLD_SIZE, facts.world_size),
            (mllog.SUBMISSION_PLATFORM, facts.platform),
            (mllog.COMMAND_LINE, facts.command_line),
            (mllog.INSTANCE_TYPE, facts.instance_type),
        ):
            if value is not None:
                self.header(key, value)
        steps = f"; steps: {facts.steps}" if facts.steps is not None else ""
        self.legacy(
            f"Batch size: {facts.global_batch_size}; epochs: {facts.epochs}{steps}; mode: {facts.mode}"
        )
        self.header(mllog.RUN_START, None, time_ms=_ms(wall))

    def step_marker(self, marker: str) -> None:
        """How the run's training steps are marked (``optimizer``, ``backward``, ``explicit``)."""
        self.header(mllog.STEP_MARKER, marker)
        self.legacy(f"Steps marked by: {marker}")

    def epoch_start(self, index: int, *, epochs: int | None, wall: float) -> None:
        self.log.event(mllog.EPOCH_START, event_type=mllog.START, time_ms=_ms(wall), epoch_num=index)
        self.legacy(f"Epoch {index}/{epochs}" if epochs else f"Epoch {index}")

    def step(self, epoch: int, n: int, step_s: float, wait_s: float, compute_s: float) -> None:
        self.log.step(epoch, n, step_s, wait_s, compute_s, legacy=self.primary)

    def evaluation(self, epoch: int, *, wall0: float | None = None, wall1: float | None = None) -> None:
        """EVAL_START and EVAL_STOP of one evaluation pass (its time counts at the epoch's end)."""
        self.header(mllog.EVAL_START, None, time_ms=None if wall0 is None else _ms(wall0), epoch_num=epoch)
        self.header(mllog.EVAL_STOP, None, time_ms=None if wall1 is None else _ms(wall1), epoch_num=epoch)

    def epoch_end(self, index: int, *, validation_s: float | None, epoch_s: float, wall: float) -> None:
        if validation_s is not None:
            self.legacy(f"Validation time: {validation_s}s")
            self.header(mllog.VALIDATION_TIME, validation_s, epoch_num=index)
        self.legacy(f"Epoch time: {epoch_s}s")
        self.header(mllog.EPOCH_TIME, epoch_s, epoch_num=index)
        self.log.event(mllog.EPOCH_STOP, event_type=mllog.END, time_ms=_ms(wall), epoch_num=index)
        self.legacy(f"Real time: {wall}")

    def metric(self, key: str, value: Any, epoch: int | None) -> None:
        if epoch is None:
            self.header(key, value)
        else:
            self.header(key, value, epoch_num=epoch)

    def flag(self, text: str) -> None:
        self.legacy(text)

    def prediction(self, value: dict[str, Any], pred: Prediction) -> None:
        self.header(mllog.PREDICTION, value)
        self.legacy(
            f"Predicted epoch time: {pred.epoch_s}s "
            f"(90 % interval {pred.epoch_low_s}s - {pred.epoch_high_s}s); "
            f"predicted time for {pred.epochs} epochs: {pred.total_s}s; steps watched: {pred.steps_watched} "
            f"({pred.stop_reason})"
        )

    def run_end(self, *, fit_s: float | None, gpu_memory: dict[str, int] | None, total_s: float) -> None:
        if fit_s is not None:
            self.header(mllog.FIT_TIME, fit_s)
        if gpu_memory is not None:
            self.header(mllog.GPU_MEMORY, gpu_memory)
        self.header(mllog.TOTAL_TIME, total_s)
        self.header(mllog.RUN_STOP, None, status="success")

    def failure(self, reason: str, kind: str) -> None:
        """The FAILURE event (every rank) and the ``Training failed:`` line."""
        try:
            self.log.event(mllog.FAILURE, {"reason": reason, "kind": kind}, epoch_num=0)
            self.legacy(f"Training failed: {reason}")
        except OSError:
            pass

    def close(self) -> None:
        self.log.close()
