"""What an instrumentation session records and how: the cell's settings, or defaults outside a job."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from trainsweep import sagemaker_contract as sm
from trainsweep.instrument.loops import FIRST_STEP_TIMEOUT_S
from trainsweep.predict import StopRule
from trainsweep.training.contract import InstrumentConfig


@dataclass(frozen=True)
class Settings:
    """What a session records and how: the cell's :class:`InstrumentConfig`, or defaults outside a job."""

    run_name: str
    workload: str
    batch_size: int | None = None  # global batch size the sweep asked for
    epochs: int | None = None
    mode: str = "full"
    rule: StopRule = field(default_factory=StopRule)
    max_steps_per_epoch: int | None = None
    max_eval_batches: int | None = None
    instance_type: str | None = None
    prediction_file: Path | None = None
    batch_size_arg: str = "batch-size"  # the script's own name for it, for the ignored-batch-size flag
    steps: int | None = None  # a step-based run: this many training steps, timed as one stretch
    first_step_timeout_s: float = FIRST_STEP_TIMEOUT_S

    @classmethod
    def from_config(cls, cfg: InstrumentConfig, *, workload: str) -> Settings:
        """The cell's settings; ``workload`` (the script's file name) unless the supervisor named one."""
        return cls(
            run_name=cfg.run_name,
            workload=cfg.workload if cfg.workload != InstrumentConfig.workload else workload,
            batch_size=cfg.batch_size,
            epochs=1 if cfg.steps is not None else cfg.epochs,
            mode=cfg.mode,
            rule=StopRule(**cfg.rule),
            max_steps_per_epoch=cfg.max_steps_per_epoch,
            max_eval_batches=cfg.max_eval_batches,
            instance_type=cfg.instance_type or os.environ.get(sm.CURRENT_INSTANCE_TYPE_ENV) or None,
            prediction_file=Path(cfg.prediction_file),
            batch_size_arg=cfg.batch_size_arg,
            steps=cfg.steps,
            first_step_timeout_s=(
                FIRST_STEP_TIMEOUT_S if cfg.first_step_timeout_s is None else cfg.first_step_timeout_s
            ),
        )

    @classmethod
    def standalone(cls, *, workload: str) -> Settings:
        """Outside a trainsweep job: batch size from the loader, mode full, nothing capped."""
        return cls(
            run_name=Path(workload).stem or "run",
            workload=workload,
            instance_type=os.environ.get(sm.CURRENT_INSTANCE_TYPE_ENV) or None,
        )
