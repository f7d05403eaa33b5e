"""Hugging Face ``transformers.Trainer`` callback: the Trainer's steps and epochs as trainsweep marks.

``Trainer(..., callbacks=[TrainsweepCallback()])``. Under the container's automatic instrumentation the
Trainer also triggers the DataLoader and optimizer hooks; the callback takes steps, epochs and data
readiness over before the first step, so nothing is counted twice. Evaluation stays automatic (the
Trainer has no evaluation-start callback): an evaluation loader pass inside or after an epoch is timed as
its validation. An epoch ends when the next begins (or training ends), so its time includes the
evaluation, logging and checkpoint that follow its steps.
"""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("trainsweep.instrument.hf needs transformers: pip install 'trainsweep[hf]'") from e

from trainsweep.instrument import current_session
from trainsweep.instrument.session import ACCURACY_NAMES, Session


class TrainsweepCallback(TrainerCallback):
    """Marks the Trainer's steps (optimizer updates), epochs and evaluation accuracy."""

    def __init__(self) -> None:
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = current_session()
        return self._session

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.session.claim("data", "step", "epoch")

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.session.epoch_start()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # the Trainer has fetched the step's (accumulation) batches before this callback
        self.session.data_ready()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.session.step_end()

    def on_evaluate(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        for name, value in (metrics or {}).items():
            if name in ACCURACY_NAMES:
                self.session.metric(name, value)
                break

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.session.epoch_end()
