"""Loops the DataLoader and optimizer hooks alone cannot read, run as the container runs a cell's script
(``python -m trainsweep.instrument.bootstrap``): no optimizer, no loader, iterations instead of epochs,
evaluation under no_grad inside the loop, a loop with nothing to time, a batch the loader cannot use."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from trainsweep.logs import mllog

from .conftest import finish
from .test_instrument_bootstrap import Cell, start_cell

pytestmark = pytest.mark.slow  # a Python process with torch each

# A language-model-like loop: batches are slices of one tensor, no DataLoader; weights updated by hand;
# each epoch ends with an evaluation over another tensor under no_grad (evaluate(), several model calls).
MANUAL = """
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
torch.manual_seed(0)
data = torch.randn(20 * args.batch_size, 8)
target = data.sum(1, keepdim=True)
val = torch.randn(4 * args.batch_size, 8)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
{optimizer}


def evaluate(source):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(source), args.batch_size):
            total += model(source[i : i + args.batch_size]).sum().item()
        time.sleep({eval_sleep})
    return total


for epoch in range(args.epochs):
    model.train()
    for i in range(0, len(data), args.batch_size):
        loss = ((model(data[i : i + args.batch_size]) - target[i : i + args.batch_size]) ** 2).mean()
        model.zero_grad()
        loss.backward()
        {update}
    print(f"epoch {{epoch}}: eval {{evaluate(val):.3f}}")
evaluate(val)  # a test set after training: not an epoch's
"""

BY_HAND = "[p.data.add_(p.grad, alpha=-0.01) for p in model.parameters()]"


def manual(*, optimizer: str = "", update: str = BY_HAND, eval_sleep: float = 0.0) -> str:
    return MANUAL.format(optimizer=optimizer, update=update, eval_sleep=eval_sleep)


# An iteration-based loop (nanoGPT's shape): random slices of a tensor, max_iters, an optimizer, and
# estimate_loss() under @torch.no_grad() every eval_interval iterations (and before the first).
ITERATIONS = """
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
MAX_ITERS, EVAL_INTERVAL = {max_iters}, {eval_interval}
torch.manual_seed(0)
data = torch.randn(1000, 8)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def get_batch():
    ix = torch.randint(len(data), (args.batch_size,))
    return data[ix], data[ix].sum(1, keepdim=True)


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = [((model(x) - y) ** 2).mean().item() for x, y in (get_batch() for _ in range(5))]
    time.sleep({eval_sleep})
    model.train()
    return sum(losses) / len(losses)


it = 0
while True:
    if it % EVAL_INTERVAL == 0:
        print(f"iter {{it}}: val loss {{estimate_loss():.4f}}")
    x, y = get_batch()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    it += 1
    if it >= MAX_ITERS:
        break
"""


def iterations(*, max_iters: int, eval_interval: int, eval_sleep: float = 0.0) -> str:
    return ITERATIONS.format(max_iters=max_iters, eval_interval=eval_interval, eval_sleep=eval_sleep)


@pytest.fixture
def run_cell(tmp_path: Path) -> Callable[..., Cell]:
    def run(script: str, *, batch_size: int = 8, epochs: int = 2, **settings: Any) -> Cell:
        argv, env, cfg, src = start_cell(tmp_path, script, batch_size=batch_size, epochs=epochs, **settings)
        p = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=180, check=False)
        return Cell(p.returncode, p.stdout, p.stderr, cfg)

    return run


def evaluations(cell: Cell) -> int:
    return cell.log.count(f'"key": "{mllog.EVAL_STOP}"')


def test_without_an_optimizer_a_step_ends_at_each_backward_pass_and_the_record_says_so(run_cell):
    cell = run_cell(manual())
    assert cell.returncode == 0, cell.stderr
    assert cell.status["status"] == "ok"
    assert (cell.status["steps"], cell.status["step_marker"]) == (40, "backward")
    run = cell.run
    assert run.header.step_marker == "backward" and run.status == "complete"
    assert [e.steps for e in run.epochs] == [20, 20]  # evaluation after the steps ends the epoch
    assert run.to_record()["header"]["step_marker"] == "backward"


def test_an_evaluation_under_no_grad_is_the_epochs_validation_not_part_of_a_step(run_cell):
    cell = run_cell(manual(eval_sleep=0.3))
    assert cell.returncode == 0, cell.stderr
    run = cell.run
    assert evaluations(cell) == 2  # the test-set evaluation after the last epoch is no epoch's
    for e in run.epochs:
        assert e.validation_s is not None and e.validation_s >= 0.3
        # steps and evaluation are disjoint parts of the epoch: none of the evaluation is in a step
        assert e.epoch_s is not None and sum(e.step_s) + e.validation_s <= e.epoch_s + 1e-3


def test_a_script_that_builds_an_optimizer_is_timed_by_its_steps_not_its_backward_passes(run_cell):
    opt = "opt = torch.optim.SGD(model.parameters(), lr=0.01)"
    cell = run_cell(manual(optimizer=opt, update="opt.step()"))
    assert cell.returncode == 0, cell.stderr
    assert (cell.status["steps"], cell.status["step_marker"]) == (40, "optimizer")
    assert cell.run.header.step_marker == "optimizer"


NOTHING_IN_A_LOADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(8, 1)
loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8)
for epoch in range(50):
    for (x,) in loader:
        model(x).sum()  # a forward with gradients on, and never a backward pass
    print(f"epoch {epoch} done", flush=True)
"""


def test_a_loop_with_no_backward_pass_nor_step_fails_at_its_first_epochs_end(run_cell):
    cell = run_cell(NOTHING_IN_A_LOADER)
    assert cell.returncode == 1
    assert cell.status["status"] == "error" and cell.status["steps"] == 0
    assert cell.status["reason"].startswith(
        "the script ran its model in training mode through a whole pass of a DataLoader (8 batches) "
        "with no backward pass and no optimizer.step(): nothing to time"
    )
    assert "epoch 0 done" not in cell.stdout  # failed at the first epoch's end, not after fifty


NOTHING_FOREVER = """
import torch
from torch import nn

model = nn.Linear(8, 1)
while True:  # no loader, no backward pass: only the bound ends it
    model(torch.randn(4, 8)).sum()
"""


def test_a_loop_with_nothing_to_time_and_no_loader_fails_after_the_bound(run_cell):
    cell = run_cell(NOTHING_FOREVER, first_step_timeout_s=0.5)
    assert cell.returncode == 1
    reason = cell.status["reason"]
    assert reason.startswith("the script ran its model in training mode for ") and "nothing to time" in reason
    assert cell.run.status == "failed"


def test_an_iteration_based_run_is_one_stretch_of_steps_with_its_evaluations_apart(run_cell):
    cell = run_cell(iterations(max_iters=30, eval_interval=10, eval_sleep=0.1), steps=30)
    assert cell.returncode == 0, cell.stderr
    run = cell.run
    assert run.header.steps == 30 and run.header.epochs == 1
    assert [e.steps for e in run.epochs] == [30]
    assert evaluations(cell) == 3  # at iterations 0, 10 and 20: the first, before any step, counts
    (e,) = run.epochs
    assert e.validation_s is not None and e.validation_s >= 0.3
    assert e.epoch_s is not None and sum(e.step_s) + e.validation_s <= e.epoch_s + 1e-3
    assert cell.status["step_marker"] == "optimizer"


def test_early_stop_of_an_iteration_based_run_predicts_its_steps_and_its_evaluations(run_cell):
    # at least 30 steady steps watched, at most 40: evaluations seen at steps 0, 5, ..., 25 at least
    rule = {"min_steady_steps": 30, "min_seconds": 0, "precision": 0.5, "max_steps": 40}
    script = iterations(max_iters=100_000, eval_interval=5)
    cell = run_cell(script, steps=100_000, mode="early-stop", rule=rule)
    assert cell.returncode == 0, cell.stderr
    pred = cell.status["prediction"]
    assert 30 <= cell.status["steps"] <= 45
    assert (pred["steps"], pred["epochs"], pred["steps_per_epoch"]) == (100_000, 1, 100_000)
    evals = pred["validation_batches_per_epoch"]
    assert evals == 100_000 // 5 + 1  # every 5 steps from step 0 in a run of 100000 steps
    assert pred["validation_s"] == pytest.approx(evals * pred["validation_batch_s"])
    assert pred["total_s"] == pytest.approx(
        100_000 * pred["step_s"] + pred["validation_s"] + pred["warmup_excess_s"]
    )


def test_early_stop_without_a_loader_predicts_from_the_first_whole_epoch(run_cell):
    rule = {"min_steady_steps": 5, "min_seconds": 0, "precision": 0.9, "max_steps": 15}
    cell = run_cell(manual(), epochs=5, mode="early-stop", rule=rule)
    assert cell.returncode == 0, cell.stderr
    pred = cell.status["prediction"]
    assert pred["steps_per_epoch"] == 20 and pred["epochs"] == 5
    assert pred["validation_batches_per_epoch"] == 1  # one evaluation per epoch, timed whole
    assert 20 < cell.status["steps"] < 5 * 20


SMALL_DATASET = """
import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
loader = DataLoader(TensorDataset(torch.randn(50, 8)), batch_size=args.batch_size, drop_last={drop_last})
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    total = 0.0
    for (x,) in loader:
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        total += loss.item()
    print(f"mean loss {{total / len(loader)}}")
"""


@pytest.mark.parametrize("drop_last", [True, False])
def test_a_batch_larger_than_the_training_set_is_beyond_the_edge_not_a_crash(run_cell, drop_last):
    cell = run_cell(SMALL_DATASET.format(drop_last=drop_last), batch_size=64)
    assert cell.returncode == 3
    assert cell.status["status"] == "infeasible" and cell.status["steps"] == 0
    assert cell.status["reason"].startswith(
        "batch size 64 is beyond what this script can train: its DataLoader holds 50 samples per rank, "
        "fewer than one batch of 64"
    )
    if drop_last:  # no batch at all: the script's own error follows
        assert "ZeroDivisionError" in cell.status["reason"]
    assert cell.run.extra["failure_kind"] == "infeasible"


# ---- the rules in this process (the hooks of the recorder fixture) ----------------------------------------


class _WithTargetNetwork(torch.nn.Module):
    """A model whose forward runs a target network under no_grad (BYOL, MoCo): two module calls in training
    mode, in a block with gradients off, inside the training step."""

    def __init__(self) -> None:
        super().__init__()
        self.online = torch.nn.Linear(3, 3)
        self.target = torch.nn.Linear(3, 3)
        self.head = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            t = self.head(self.target(x))
        return ((self.online(x) - t) ** 2).mean()


def test_a_no_grad_block_inside_the_training_forward_is_part_of_the_step_not_an_evaluation(recorder):
    session = recorder()
    net = _WithTargetNetwork()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(4):
        net(torch.randn(4, 3)).backward()
        opt.step()
        opt.zero_grad()
    run = finish(session)
    assert [e.steps for e in run.epochs] == [4]
    assert run.epochs[0].validation_s is None  # no evaluation was seen


def test_a_single_model_call_under_no_grad_in_a_step_is_not_an_evaluation(recorder):
    session = recorder()
    student, teacher = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2).eval()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    for _ in range(4):
        x = torch.randn(4, 3)
        with torch.no_grad():
            soft = teacher(x)  # a teacher in evaluation mode, once per step: distillation, not evaluation
        ((student(x) - soft) ** 2).mean().backward()
        opt.step()
        opt.zero_grad()
    run = finish(session)
    assert [e.steps for e in run.epochs] == [4] and run.epochs[0].validation_s is None


def test_removing_the_hooks_restores_backward_optimizers_and_no_grad():
    originals = (
        torch.autograd.backward,
        torch.optim.Optimizer.__init__,
        torch.no_grad.__enter__,
        torch.no_grad.__exit__,
        torch.inference_mode.__enter__,
    )
    from trainsweep.instrument import auto
    from trainsweep.instrument.session import open_session

    session = open_session(None, workload="x.py")  # outside a job: prints, writes no file
    installed = auto.install(session)
    assert torch.autograd.backward is not originals[0]
    installed.remove()
    assert (
        torch.autograd.backward,
        torch.optim.Optimizer.__init__,
        torch.no_grad.__enter__,
        torch.no_grad.__exit__,
        torch.inference_mode.__enter__,
    ) == originals
    assert not session.forwards.on
