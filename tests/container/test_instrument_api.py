"""The explicit API (``trainsweep.instrument``): marks for loops the hooks cannot read, and how they take
over from the automatic detection without counting anything twice."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainsweep.instrument as ti
from trainsweep.logs import mllog
from trainsweep.logs.parser import parse
from trainsweep.training.contract import INSTRUMENT_ENV

from .conftest import finish

ROOT = Path(__file__).resolve().parents[2]


def custom_step(w: torch.Tensor) -> None:
    """A training step without torch.optim: nothing for the automatic hooks to see."""
    w -= 0.01 * torch.randn_like(w)


def test_marks_time_a_custom_loop_without_loader_or_optimizer(recorder):
    session = recorder()
    w = torch.zeros(4)
    for _ in range(2):
        ti.epoch_start()
        for _ in range(5):
            ti.data_ready()
            custom_step(w)
            ti.step_end()
        ti.eval_start()
        custom_step(w)
        ti.eval_end()
        ti.epoch_end()
    run = finish(session)
    assert run.status == "complete", run.problems
    assert [e.steps for e in run.epochs] == [5, 5]
    assert all(e.validation_s is not None and e.epoch_s is not None for e in run.epochs)
    assert run.header.batch_size == 4  # no loader: the batch size the sweep asked for


def test_an_explicit_step_mark_after_optimizer_step_is_the_same_step(recorder):
    session = recorder(epochs=1)
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for (x,) in DataLoader(TensorDataset(torch.randn(12, 3)), batch_size=4):
        net(x).sum().backward()
        opt.step()
        ti.step_end()  # the first mark takes over the step the optimizer hook just counted
    run = finish(session)
    assert [e.steps for e in run.epochs] == [3]


def test_explicit_epochs_with_automatic_steps(recorder):
    session = recorder()
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    data = DataLoader(TensorDataset(torch.randn(16, 3)), batch_size=4)
    for _ in range(2):
        ti.epoch_start()
        for i, (x,) in enumerate(data):
            net(x).sum().backward()
            opt.step()
            if i == 1:  # two "epochs" per pass, as the script defines them
                ti.epoch_end()
                ti.epoch_start()
        ti.epoch_end()
    run = finish(session)
    assert [e.steps for e in run.epochs] == [2, 2, 2, 2]
    assert [e.index for e in run.epochs] == [1, 2, 3, 4]


def test_accuracy_is_the_epochs_eval_accuracy_and_other_metrics_are_kept(recorder):
    session = recorder(epochs=1)
    w = torch.zeros(2)
    ti.epoch_start()
    ti.step_end()
    custom_step(w)
    ti.step_end()
    ti.metric("val_acc", torch.tensor(0.75))
    ti.metric("loss", 0.5)
    ti.metric("perplexity", float("nan"))  # left out: the log is JSON
    ti.epoch_end()
    run = finish(session)
    assert run.epochs[0].validation_accuracy == 0.75
    assert run.extra["trainsweep.metric.loss"] == 0.5
    assert "trainsweep.metric.perplexity" not in run.extra


def test_claim_refuses_an_unknown_kind(recorder):
    session = recorder()
    with pytest.raises(ValueError, match="unknown kinds"):
        session.claim("steps")


@pytest.mark.slow
def test_outside_a_job_the_marks_print_a_parsable_log(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from torch.utils.data import DataLoader, TensorDataset
            import trainsweep.instrument as ti

            net = torch.nn.Linear(3, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            data = DataLoader(TensorDataset(torch.randn(12, 3)), batch_size=6)
            for epoch in range(2):
                ti.epoch_start()
                for (x,) in data:
                    net(x).sum().backward()
                    opt.step()
                ti.epoch_end()
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != INSTRUMENT_ENV}
    p = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    run = parse(p.stdout.encode(), name="mine")
    assert [e.steps for e in run.epochs] == [2, 2]
    assert run.header.batch_size == 6 and run.header.workload == "mine.py"
    assert mllog.RUN_STOP in p.stdout


def test_importing_the_api_needs_neither_torch_nor_the_frameworks():
    heavy = "{'torch', 'transformers', 'pytorch_lightning'}"
    code = f"import sys, trainsweep.instrument; print(sorted({heavy} & set(sys.modules)))"
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert p.stdout.strip() == "[]"
