"""The Hugging Face Trainer and PyTorch Lightning callbacks, under the automatic hooks as in the container:
one step per optimizer update, one epoch per training epoch, validation inside its epoch, nothing counted
twice. Tiny models built from a config, on the CPU, no download."""

from __future__ import annotations

import builtins
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from trainsweep.instrument import auto
from trainsweep.instrument.session import EarlyStop, activate, open_session
from trainsweep.training.contract import InstrumentConfig

from .conftest import finish

pytestmark = pytest.mark.slow  # importing transformers and Lightning takes seconds


# ---- Hugging Face ------------------------------------------------------------------------------------


class Sentences(Dataset):
    """Random token ids with labels, as a tokenised dataset gives them to the Trainer."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(n)
        self.ids = torch.randint(1, 100, (n, 8), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": self.labels[i],
        }


def hf_trainer(tmp_path: Path, **args: Any) -> Any:
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    from trainsweep.instrument.hf import TrainsweepCallback

    torch.manual_seed(0)
    settings: dict[str, Any] = {"eval_strategy": "epoch", **args}
    config = BertConfig(
        vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    arguments = TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        num_train_epochs=2,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=8,
        save_strategy="no",
        logging_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        **settings,
    )
    return Trainer(
        model=BertForSequenceClassification(config),
        args=arguments,
        train_dataset=Sentences(24),
        eval_dataset=Sentences(16),
        callbacks=[TrainsweepCallback()],
    )


def test_hf_trainer_steps_epochs_and_evaluation_are_each_counted_once(recorder, tmp_path):
    session = recorder()
    hf_trainer(tmp_path).train()
    run = finish(session)
    assert run.status == "complete", run.problems
    assert [e.steps for e in run.epochs] == [6, 6]  # 24 samples / 4: optimizer and callback agree
    assert all(e.validation_s is not None and e.epoch_s is not None for e in run.epochs)
    assert run.header.batch_size == 4


def test_hf_trainer_with_gradient_accumulation_counts_optimizer_updates(recorder, tmp_path):
    session = recorder()
    hf_trainer(tmp_path, gradient_accumulation_steps=2, eval_strategy="no").train()
    run = finish(session)
    assert [e.steps for e in run.epochs] == [3, 3]


def test_the_hf_callback_marks_a_loop_that_calls_it_as_the_trainer_does(recorder):
    """The mapping itself, without the Trainer (and without accelerate)."""
    from transformers import TrainerControl, TrainerState

    from trainsweep.instrument.hf import TrainsweepCallback

    session = recorder(epochs=1)
    cb, state, control = TrainsweepCallback(), TrainerState(), TrainerControl()
    cb.on_train_begin(None, state, control)  # type: ignore[arg-type]
    net = nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    cb.on_epoch_begin(None, state, control)  # type: ignore[arg-type]
    for x, y in DataLoader(TensorDataset(torch.randn(12, 3), torch.randint(0, 2, (12,))), batch_size=4):
        cb.on_step_begin(None, state, control)  # type: ignore[arg-type]
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()  # the hook sees it too: the callback has claimed steps
        cb.on_step_end(None, state, control)  # type: ignore[arg-type]
    cb.on_evaluate(None, state, control, metrics={"eval_accuracy": 0.5})  # type: ignore[arg-type]
    cb.on_train_end(None, state, control)  # type: ignore[arg-type]
    run = finish(session)
    assert [e.steps for e in run.epochs] == [3]
    assert run.epochs[0].validation_accuracy == 0.5


# ---- PyTorch Lightning -------------------------------------------------------------------------------


def lightning_fit(callbacks: list[Any], *, epochs: int = 2, accumulate: int = 1) -> None:
    import pytorch_lightning as pl

    class Classifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_acc", (self(x).argmax(1) == y).float().mean())

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(24, 4), torch.randint(0, 2, (24,))), batch_size=4)
    val = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=8)
    trainer = pl.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=1,
        accumulate_grad_batches=accumulate,
        callbacks=callbacks,
    )
    trainer.fit(Classifier(), train, val)


def test_lightning_steps_epochs_and_validation_are_each_counted_once(recorder):
    from trainsweep.instrument.lightning import TrainsweepCallback

    session = recorder()
    lightning_fit([TrainsweepCallback()])
    run = finish(session)
    assert run.status == "complete", run.problems
    assert [e.steps for e in run.epochs] == [6, 6]
    assert all(e.validation_s is not None for e in run.epochs)  # the sanity check is no epoch's
    assert all(e.validation_accuracy is not None for e in run.epochs)


def test_lightning_with_gradient_accumulation_counts_optimizer_updates(recorder):
    from trainsweep.instrument.lightning import TrainsweepCallback

    session = recorder()
    lightning_fit([TrainsweepCallback()], accumulate=2)
    run = finish(session)
    assert [e.steps for e in run.epochs] == [3, 3]


def test_lightning_without_the_callback_is_timed_by_the_hooks_alone(recorder):
    session = recorder()
    lightning_fit([])
    run = finish(session)
    assert [e.steps for e in run.epochs] == [6, 6]
    assert all(e.validation_s is not None for e in run.epochs)


@pytest.mark.parametrize(
    ("module", "framework"), [("hf", "transformers"), ("lightning", "pytorch_lightning")]
)
def test_a_callback_module_without_its_framework_says_what_to_install(monkeypatch, module, framework):
    real_import = builtins.__import__

    def without(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == framework or name.startswith(framework + "."):
            raise ImportError(f"No module named {framework!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    monkeypatch.delitem(sys.modules, f"trainsweep.instrument.{module}", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'trainsweep\["):
        importlib.import_module(f"trainsweep.instrument.{module}")


def test_early_stop_before_the_first_evaluation_does_not_time_the_training_set_as_validation(tmp_path: Path):
    import transformers

    cfg = InstrumentConfig(
        run_name="cell",
        batch_size=4,
        epochs=3,
        mode="early-stop",
        rule={"precision": 0.5, "min_seconds": 0},
        log_file=str(tmp_path / "cell.log"),
        status_file=str(tmp_path / "s.json"),
        prediction_file=str(tmp_path / "p.json"),
    )
    session = open_session(cfg, workload="train.py", rank=0)
    installed = auto.install(session)
    activate(session)
    try:
        config = transformers.BertConfig(
            vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "hf"),
            num_train_epochs=3,
            per_device_train_batch_size=4,
            per_device_eval_batch_size=8,
            eval_strategy="epoch",
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
        )
        trainer = transformers.Trainer(
            model=transformers.BertForSequenceClassification(config),
            args=args,
            train_dataset=Sentences(400),
            eval_dataset=Sentences(16),
        )
        with pytest.raises(EarlyStop):
            trainer.train()
    finally:
        installed.remove()
        activate(None)
        session.close()
    pred = session.prediction
    assert pred is not None and pred["steps_watched"] < 100  # stopped inside epoch 1, before any evaluation
    # fails today: 100.0 (len of the training loader: the Trainer's DataLoader before accelerate wraps it)
    assert pred["validation_batches_per_epoch"] != 100.0
    assert pred["validation_s"] < 0.5 * pred["train_epoch_s"]
