"""The one writer of a run's timeline: initialisation, the header, the run's start, epochs, steps,
evaluations, metrics, the prediction, the run's end or its failure, as ``:::MLLOG`` events
(:mod:`trainsweep.logs.mllog`) next to the seeds' human-readable lines.

The built-in worker (:mod:`trainsweep.training.worker`) and an instrumented script's session
(:mod:`trainsweep.instrument.session`) both write through :class:`RunWriter`, so the parser, the run
records and the report read both alike. It infers nothing: callers say what happened and when.

Header events and human-readable lines come from rank 0; epoch boundaries, steps and failures from every
rank (``rank`` in the metadata). An event written after the moment it stands for (an instrumented
script's epoch is known to be a training epoch only at its first step) carries that moment's wall-clock
time (``wall``); without one, the time of writing. The events a complete run holds are
:data:`trainsweep.logs.mllog.REQUIRED_EVENTS`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainsweep.axes import PRECISION_KEY
from trainsweep.logs import mllog
from trainsweep.predict import Prediction
from trainsweep.training import cpu_wait
from trainsweep.training.runlog import RunLog


@dataclass(frozen=True)
class RunFacts:
    """The run's header. None: unknown, not written."""

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
    seed: int | None = None
    precision: str | None = None
    """The precision the model's output really came in (the built-in workloads check it)."""

    def events(self) -> tuple[tuple[str, Any], ...]:
        """(key, value) of the header's events, in the order they are written."""
        return (
            (mllog.WORKLOAD, self.workload),
            (mllog.GLOBAL_BATCH_SIZE, self.global_batch_size),
            (mllog.TRAIN_SAMPLES, self.train_samples),
            (mllog.EVAL_SAMPLES, self.eval_samples),
            (mllog.EPOCH_COUNT, self.epochs),
            (mllog.TRAIN_STEPS, self.steps),
            (mllog.GPUS, self.gpus),
            (mllog.WORLD_SIZE, self.world_size),
            (mllog.SEED, self.seed),
            (mllog.SUBMISSION_PLATFORM, self.platform),
            (mllog.COMMAND_LINE, self.command_line),
            (PRECISION_KEY, self.precision),
            (mllog.INSTANCE_TYPE, self.instance_type),
        )


def gpu_memory(device: torch.device) -> dict[str, int] | None:
    """PyTorch's peaks on ``device`` over the run and its size (None on the CPU): how much of the GPU the
    batch size needs, the headroom per cell."""
    if device.type != "cuda":
        return None
    return {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
        "total_bytes": torch.cuda.get_device_properties(device).total_memory,
    }


def _ms(wall: float | None) -> float | None:
    return None if wall is None else wall * 1000


class RunWriter:
    """Writes one rank's timeline to ``log``."""

    def __init__(self, log: RunLog, *, rank: int = 0) -> None:
        self.log = log
        self.primary = rank == 0
        self._sched: cpu_wait.SchedTimes | None = None

    @property
    def path(self) -> Path:
        return self.log.path

    def legacy(self, text: str) -> None:
        """A seeds' human-readable line (rank 0)."""
        if self.primary:
            self.log.line(text)

    def header(self, key: str, value: Any, **metadata: Any) -> None:
        """An event of the run as a whole (rank 0)."""
        if self.primary:
            self.log.event(key, value, **metadata)

    # ---- the start -------------------------------------------------------------------------------

    def init_start(self) -> None:
        self.header(mllog.INIT_START, None)

    def run_start(
        self, facts: RunFacts, *, init_s: float, wall: float | None = None, flags: Sequence[str] = ()
    ) -> None:
        """Initialisation over, the flags on the run, the header, RUN_START (at ``wall``)."""
        self.legacy(f"Initialization time {init_s}")
        self.header(mllog.INIT_TIME, init_s)
        self.header(mllog.INIT_STOP, None, time_ms=_ms(wall))
        for flag in flags:
            self.legacy(flag)
        for key, value in facts.events():
            if value is not None:
                self.header(key, value)
        steps = f"; steps: {facts.steps}" if facts.steps is not None else ""
        self.legacy(
            f"Batch size: {facts.global_batch_size}; epochs: {facts.epochs}{steps}; mode: {facts.mode}"
        )
        self.header(mllog.RUN_START, None, time_ms=_ms(wall))
        if self.primary:
            self._sched = cpu_wait.snapshot()

    def step_marker(self, marker: str) -> None:
        """How the run's training steps are marked (``optimizer``, ``backward``, ``explicit``)."""
        self.header(mllog.STEP_MARKER, marker)
        self.legacy(f"Steps marked by: {marker}")

    # ---- epochs, steps, evaluations --------------------------------------------------------------

    def epoch_start(self, index: int, *, epochs: int | None, wall: float | None = None) -> None:
        self.log.event(mllog.EPOCH_START, event_type=mllog.START, time_ms=_ms(wall), epoch_num=index)
        self.legacy(f"Epoch {index}/{epochs}" if epochs else f"Epoch {index}")

    def step(self, epoch: int, n: int, step_s: float, wait_s: float, compute_s: float) -> None:
        """One training step (every rank; the legacy line on rank 0)."""
        self.log.step(epoch, n, step_s, wait_s, compute_s, legacy=self.primary)

    def eval_start(self, epoch: int, *, wall: float | None = None) -> None:
        self.header(mllog.EVAL_START, None, time_ms=_ms(wall), epoch_num=epoch)

    def eval_stop(self, epoch: int, *, wall: float | None = None) -> None:
        self.header(mllog.EVAL_STOP, None, time_ms=_ms(wall), epoch_num=epoch)

    def evaluation(self, epoch: int, *, wall0: float | None = None, wall1: float | None = None) -> None:
        """EVAL_START and EVAL_STOP of one evaluation pass known after the fact (its time counts at the
        epoch's end)."""
        self.eval_start(epoch, wall=wall0)
        self.eval_stop(epoch, wall=wall1)

    def epoch_end(
        self, index: int, *, validation_s: float | None, epoch_s: float, wall: float | None = None
    ) -> None:
        """The epoch's validation and epoch times, EPOCH_STOP and ``Real time`` (at ``wall``, else now)."""
        if validation_s is not None:
            self.legacy(f"Validation time: {validation_s}s")
            self.header(mllog.VALIDATION_TIME, validation_s, epoch_num=index)
        self.legacy(f"Epoch time: {epoch_s}s")
        self.header(mllog.EPOCH_TIME, epoch_s, epoch_num=index)
        wall = time.time() if wall is None else wall
        self.log.event(mllog.EPOCH_STOP, event_type=mllog.END, time_ms=wall * 1000, epoch_num=index)
        self.legacy(f"Real time: {wall}")

    def metric(self, key: str, value: Any, epoch: int | None) -> None:
        if epoch is None:
            self.header(key, value)
        else:
            self.header(key, value, epoch_num=epoch)

    def target_reached(self, epoch: int, target: float, value: float) -> None:
        """The run ends at its first evaluation reaching the target (MLPerf's time-to-train)."""
        self.legacy(f"Target {mllog.EVAL_ACCURACY} {target} reached after epoch {epoch}: {value}")
        reached = {"metric": mllog.EVAL_ACCURACY, "target": target, "value": value, "epoch": epoch}
        self.header(mllog.TARGET_REACHED, reached)

    def flag(self, text: str) -> None:
        self.legacy(text)

    # ---- the end ---------------------------------------------------------------------------------

    def prediction(self, value: dict[str, Any], pred: Prediction, *, file: Path | None = None) -> None:
        """Early stop's prediction: its event, its line and (rank 0) the prediction ``file``."""
        self.header(mllog.PREDICTION, value)
        self.legacy(
            f"Predicted epoch time: {pred.epoch_s}s "
            f"(90 % interval {pred.epoch_low_s}s - {pred.epoch_high_s}s); "
            f"predicted time for {pred.epochs} epochs: {pred.total_s}s; steps watched: {pred.steps_watched} "
            f"({pred.stop_reason})"
        )
        if self.primary and file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(value, indent=2))

    def model_saved(self, path: Path, save_s: float) -> None:
        self.header(mllog.MODEL_SAVE_TIME, save_s)
        self.legacy(f"Model saved: {path} ({save_s}s)")

    def run_end(self, *, fit_s: float | None, gpu_memory: dict[str, int] | None, total_s: float) -> None:
        """The run's totals and RUN_STOP with status ``success``."""
        if fit_s is not None:
            self.header(mllog.FIT_TIME, fit_s)
        if gpu_memory is not None:
            self.header(mllog.GPU_MEMORY, gpu_memory)
        if self.primary and (sched := cpu_wait.waited(self._sched, cpu_wait.snapshot())) is not None:
            self.header(mllog.CPU_WAIT, sched)
        self.header(mllog.TOTAL_TIME, total_s)
        self.header(mllog.RUN_STOP, None, status="success")

    def failure(self, reason: str, kind: str) -> None:
        """The FAILURE event (every rank) and the ``Training failed:`` line; a log that cannot be written
        any more (its disk is full) loses them quietly: the cell's status file still says why."""
        try:
            self.log.event(mllog.FAILURE, {"reason": reason, "kind": kind}, epoch_num=0)
            self.legacy(f"Training failed: {reason}")
        except OSError:
            pass

    def close(self) -> None:
        self.log.close()
