"""The bootstrap as the container starts it: ``python -m trainsweep.instrument.bootstrap script.py ARGS``, a
real subprocess on small scripts, its exit code, its cell status file and its log read by the parser."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainsweep.instrument.bootstrap import NO_STEPS
from trainsweep.logs import parse
from trainsweep.logs.model import RunTimings
from trainsweep.training import contract

pytestmark = pytest.mark.slow  # a Python process with torch each

HELPERS = """
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
"""

PLAIN = """
import argparse
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from helpers import make_model  # next to the script: its folder is on sys.path

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
N_TRAIN = {n_train}
BATCH = {batch}
torch.manual_seed(0)
train = DataLoader(
    TensorDataset(torch.randn(N_TRAIN, 8), torch.randint(0, 2, (N_TRAIN,))), batch_size=BATCH, shuffle=True
)
val = DataLoader(TensorDataset(torch.randn(48, 8), torch.randint(0, 2, (48,))), batch_size=16)
model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0
for epoch in range(args.epochs):
    model.train()
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        {after_step}
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"epoch {{epoch}}: accuracy {{correct / 48}}")
"""


def plain(*, n_train: int = 128, batch: str = "args.batch_size", after_step: str = "pass") -> str:
    return PLAIN.format(n_train=n_train, batch=batch, after_step=after_step)


@dataclass
class Cell:
    returncode: int
    stdout: str
    stderr: str
    cfg: contract.InstrumentConfig

    @property
    def status(self) -> dict[str, Any]:
        return json.loads(Path(self.cfg.status_file).read_text())

    @property
    def run(self) -> RunTimings:
        return parse(Path(self.cfg.log_file))

    @property
    def log(self) -> str:
        return Path(self.cfg.log_file).read_text()


def start_cell(
    tmp_path: Path, script: str, *, batch_size: int, epochs: int, **settings: Any
) -> tuple[list[str], dict[str, str], contract.InstrumentConfig, Path]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(textwrap.dedent(script))
    (src / "helpers.py").write_text(HELPERS)
    out = tmp_path / "output"
    name = f"t1-local-cpu-{batch_size}-e1"
    cfg = contract.InstrumentConfig(
        run_name=name,
        batch_size=batch_size,
        epochs=epochs,
        log_file=str(out / "data" / "logs" / f"{name}.log"),
        status_file=str(contract.cell_status_path(out, name)),
        prediction_file=str(out / "data" / "predictions" / f"{name}.json"),
        **settings,
    )
    cfg_path = tmp_path / "instrument.json"
    cfg_path.write_text(cfg.to_json())
    env = {
        **os.environ,
        contract.INSTRUMENT_ENV: str(cfg_path),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }
    argv = [
        sys.executable,
        "-m",
        "trainsweep.instrument.bootstrap",
        "train.py",
        "--batch-size",
        str(batch_size),
        "--epochs",
        str(epochs),
    ]
    return argv, env, cfg, src


@pytest.fixture
def run_cell(tmp_path: Path) -> Callable[..., Cell]:
    """Run ``script`` (text) as the bootstrap runs a cell's script, in its own source folder."""

    def run(script: str, *, batch_size: int = 32, epochs: int = 2, **settings: Any) -> Cell:
        argv, env, cfg, src = start_cell(tmp_path, script, batch_size=batch_size, epochs=epochs, **settings)
        p = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=120, check=False)
        return Cell(p.returncode, p.stdout, p.stderr, cfg)

    return run


def test_a_plain_script_is_timed_without_a_change_to_its_code(run_cell):
    cell = run_cell(plain())
    assert cell.returncode == contract.EXIT_OK, cell.stderr
    assert cell.status == {
        "run_name": "t1-local-cpu-32-e1",
        "batch_size": 32,
        "status": "ok",
        "reason": None,
        "prediction": None,
        "steps": 8,
        "loader_batch_size": 32,
        "flags": [],
        "step_marker": "optimizer",
        "train_samples": 128,
    }
    run = cell.run
    assert run.status == "complete" and run.problems == []
    assert run.header.step_marker == "optimizer"
    assert (run.computing_system, run.batch_size) == ("local-cpu", 32)
    assert [e.steps for e in run.epochs] == [4, 4]
    assert all(e.validation_s is not None and e.validation_s > 0 for e in run.epochs)
    assert all(e.epoch_s is not None and e.epoch_s > sum(e.step_s) for e in run.epochs)
    assert (
        run.header.workload == "train.py"
        and run.header.train_samples == 128
        and run.header.eval_samples == 48
    )
    assert run.init_s is not None and run.fit_s is not None and run.total_s is not None
    assert "epoch 1: accuracy" in cell.stdout  # the script's own output goes on


def test_early_stop_predicts_the_run_and_ends_it_cleanly_before_its_end(run_cell):
    rule = {"min_steady_steps": 5, "min_seconds": 0, "precision": 0.5, "max_steps": 30}
    cell = run_cell(plain(n_train=2000), batch_size=8, mode="early-stop", rule=rule)
    assert cell.returncode == contract.EXIT_OK, cell.stderr
    status = cell.status
    assert status["status"] == "ok" and status["reason"] is None
    assert status["steps"] < 2 * 250  # the full run's steps
    pred = status["prediction"]
    assert pred["steps_per_epoch"] == 250 and pred["epochs"] == 2 and pred["run_name"] == "t1-local-cpu-8-e1"
    assert pred["validation_batches_per_epoch"] == 3
    assert len(pred["validation_batch_times_s"]) == 6  # the rule's count: the 3 batches, twice
    assert json.loads(Path(cell.cfg.prediction_file).read_text()) == pred
    run = cell.run
    assert run.prediction == pred and run.status == "complete"
    assert "Predicted epoch time:" in cell.log


def test_a_script_that_raises_is_an_error_with_its_type_and_message(run_cell):
    cell = run_cell(plain(after_step="raise ValueError('bad row 3\\nin file x')"))
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["status"] == "error"
    assert cell.status["reason"] == "ValueError: bad row 3"
    assert "Traceback" in cell.stderr
    run = cell.run
    assert run.status == "failed" and run.failure_reason == "ValueError: bad row 3"
    assert "Training failed: ValueError: bad row 3" in cell.log


def test_a_script_that_exits_before_its_first_step_says_so(run_cell):
    cell = run_cell("import sys\nsys.exit(2)\n")
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["reason"] == "the script exited with code 2 before its first training step"
    assert cell.status["steps"] == 0


def test_a_script_that_exits_non_zero_after_training_steps_is_an_error(run_cell):
    cell = run_cell(plain(after_step="sys.exit(4) if steps == 3 else None"))
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["reason"] == "the script exited with code 4"
    assert cell.status["steps"] == 3


def test_a_script_that_never_steps_an_optimizer_has_nothing_to_time(run_cell):
    cell = run_cell("print('hello')\n")
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["reason"] == NO_STEPS
    assert "docs/byo.md" in cell.stderr


def test_a_script_that_ignores_the_batch_size_is_flagged_and_logged_with_its_real_batch(run_cell):
    cell = run_cell(plain(batch="32"), batch_size=64)
    assert cell.returncode == contract.EXIT_OK, cell.stderr
    flag = "the script ignored --batch-size 64: its training loader batches 32 per rank"
    assert cell.status["status"] == "ok" and cell.status["flags"] == [flag]
    assert cell.status["loader_batch_size"] == 32
    assert flag in cell.log
    assert cell.run.header.batch_size == 32


def test_a_script_that_trains_on_the_cpu_in_a_job_with_gpus_is_refused_with_the_reason(run_cell, monkeypatch):
    monkeypatch.setenv("SM_NUM_GPUS", "4")  # what SageMaker sets on an instance with 4 GPUs
    cell = run_cell(plain())
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["status"] == "error"
    assert cell.status["reason"].startswith(
        "the job has 4 GPU(s) (SM_NUM_GPUS=4) but the script's first optimizer step ran on the CPU"
    )
    assert cell.status["steps"] == 0  # nothing timed under the GPU instance's name
    assert cell.run.status == "failed"


def test_out_of_memory_is_its_own_outcome(run_cell):
    oom = "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB')"
    cell = run_cell(plain(after_step=oom))
    assert cell.returncode == contract.EXIT_OOM
    assert cell.status["status"] == "oom"
    assert (
        cell.status["reason"]
        == "out of memory at batch size 32: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert cell.run.extra["failure_kind"] == "oom"


def test_max_steps_per_epoch_caps_each_training_pass(run_cell):
    cell = run_cell(plain(n_train=640), max_steps_per_epoch=3, max_eval_batches=1)
    assert cell.returncode == contract.EXIT_OK, cell.stderr
    run = cell.run
    assert [e.steps for e in run.epochs] == [3, 3]
    assert cell.status["steps"] == 6
    assert run.header.train_samples == 96 and run.header.eval_samples == 16
    assert run.problems == []


def test_settings_the_predictor_refuses_are_bad_input(run_cell):
    cell = run_cell(plain(), mode="early-stop", rule={"precision": 2})
    assert cell.returncode == contract.EXIT_BAD_INPUT
    assert cell.status["status"] == "error"
    assert (
        cell.status["reason"]
        == "bad instrumentation settings: ValueError: precision must be in (0, 1), got 2"
    )


def test_sigterm_stops_the_script_with_status_stopped(tmp_path):
    script = plain(n_train=100000, after_step="import time; time.sleep(0.01)")
    argv, env, cfg, src = start_cell(tmp_path, script, batch_size=8, epochs=1)
    with subprocess.Popen(
        argv, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as p:
        assert p.stdout is not None
        for line in p.stdout:
            if "step training time" in line:
                break
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    assert p.returncode == contract.EXIT_STOPPED
    status = json.loads(Path(cfg.status_file).read_text())
    assert (status["status"], status["reason"]) == ("stopped", "stopped by SIGTERM")


SPAWNS_PER_GPU = """
import torch
import torch.multiprocessing as mp


def main(rank, world_size):
    raise AssertionError("no rank should start")


if __name__ == "__main__":
    world_size = torch.cuda.device_count()  # the DDP tutorial's multigpu.py: 0 without a GPU
    mp.spawn(main, args=(world_size,), nprocs=world_size)
"""


def test_a_script_that_spawns_one_rank_per_gpu_on_a_cpu_says_it_started_none(run_cell):
    cell = run_cell(SPAWNS_PER_GPU)
    assert cell.returncode == contract.EXIT_ERROR
    assert cell.status["reason"].startswith(
        "the script started no rank: torch.multiprocessing.spawn(nprocs=0)"
    ), cell.status
    assert "never called optimizer.step() nor backward() itself" in cell.status["reason"]
