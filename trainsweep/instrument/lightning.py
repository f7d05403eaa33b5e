"""PyTorch Lightning callback: the Trainer's steps, epochs and validation as trainsweep marks.

``pl.Trainer(..., callbacks=[TrainsweepCallback()])``. Under the container's automatic instrumentation
Lightning also triggers the DataLoader and optimizer hooks; the callback takes steps, epochs, data
readiness and evaluation over when training starts, so nothing is counted twice. The sanity-check
validation before training is not timed. Lightning validates before ``on_train_epoch_end``, so an
epoch's time includes its validation.
"""

from __future__ import annotations

from typing import Any

try:
    import pytorch_lightning as pl
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "trainsweep.instrument.lightning needs pytorch-lightning: pip install 'trainsweep[lightning]'"
    ) from e

from trainsweep.instrument import current_session
from trainsweep.instrument.session import ACCURACY_NAMES, Session


class TrainsweepCallback(pl.Callback):
    """Marks Lightning's optimizer steps, training epochs, validation passes and validation accuracy."""

    def __init__(self) -> None:
        self._session: Session | None = None
        self._global_step = 0
        self._ready = False

    @property
    def session(self) -> Session:
        if self._session is None:
            self._session = current_session()
        return self._session

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.session.claim("data", "step", "epoch", "eval")
        self._global_step = trainer.global_step

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.session.epoch_start()
        self._ready = False

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if not self._ready:  # with gradient accumulation, the step's first batch is when its input is ready
            self.session.data_ready()
            self._ready = True

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step != self._global_step:  # an optimizer update, not an accumulation batch
            self._global_step = trainer.global_step
            self._ready = False
            self.session.step_end()

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.session.eval_start()

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.session.eval_end()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        for name, value in trainer.callback_metrics.items():
            if name in ACCURACY_NAMES:
                self.session.metric(name, value)
                break

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.session.epoch_end()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.session.epoch_end()
