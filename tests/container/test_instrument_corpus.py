"""Public training scripts nobody here wrote (``../shared/fixtures/real-scripts``), unchanged, from a
temporary copy, run under the bootstrap with their own argument styles: a loop without a DataLoader or an
optimizer (word_language_model) and an iteration-based one that evaluates under no_grad (nanoGPT)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainsweep.logs import mllog, parse
from trainsweep.logs.model import RunTimings
from trainsweep.training import contract

from ..conftest import ROOT

pytestmark = pytest.mark.slow  # public scripts in a Python process with torch each

REAL_SCRIPTS = ROOT.parent / "shared" / "fixtures" / "real-scripts"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    status: dict
    log: str

    @property
    def run(self) -> RunTimings:
        return parse(self.log_path)

    log_path: Path = Path()

    def evaluations(self) -> int:
        return self.log.count(f'"key": "{mllog.EVAL_STOP}"')


def _copy(name: str, tmp_path: Path) -> Path:
    src = REAL_SCRIPTS / name
    if not src.is_dir():
        pytest.fail(f"the corpus is not at {src}: the project expects ../shared beside its root")
    dest = tmp_path / "src"
    shutil.copytree(src, dest)
    return dest


def _bootstrap(tmp_path: Path, cwd: Path, args: list[str], *, batch_size: int, **settings: object) -> Run:
    out = tmp_path / "output"
    name = f"corpus-local-cpu-{batch_size}-e1"
    cfg = contract.InstrumentConfig(
        run_name=name,
        batch_size=batch_size,
        epochs=int(settings.pop("epochs", 1)),  # type: ignore[call-overload]
        log_file=str(out / "logs" / f"{name}.log"),
        status_file=str(contract.cell_status_path(out, name)),
        prediction_file=str(out / "predictions" / f"{name}.json"),
        **settings,  # type: ignore[arg-type]
    )
    cfg_path = tmp_path / "instrument.json"
    cfg_path.write_text(cfg.to_json())
    env = {
        **os.environ,
        contract.INSTRUMENT_ENV: str(cfg_path),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }
    argv = [sys.executable, "-m", "trainsweep.instrument.bootstrap", *args]
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    log = Path(cfg.log_file)
    status = json.loads(Path(cfg.status_file).read_text())
    return Run(p.returncode, p.stdout, p.stderr, status, log.read_text(), log)


# ---- word_language_model: slices of one tensor, weights updated by hand, evaluate() under no_grad ------


def _word_language_model(tmp_path: Path) -> Path:
    """The example's folder with a small corpus made of its validation text (its README's advice)."""
    code = _copy("pytorch-examples/word_language_model", tmp_path)
    data = code / "data" / "wikitext-2"
    lines = (data / "valid.txt").read_text(encoding="utf8").splitlines(keepends=True)
    (data / "train.txt").write_text("".join(lines[:120]), encoding="utf8")
    (data / "valid.txt").write_text("".join(lines[120:160]), encoding="utf8")
    (data / "test.txt").write_text("".join(lines[160:200]), encoding="utf8")
    return code


WLM_ARGS = [
    "main.py",
    "--batch_size",
    "10",
    "--epochs",
    "2",
    "--emsize",
    "16",
    "--nhid",
    "16",
    "--bptt",
    "20",
]


def test_word_language_model_updating_weights_by_hand_is_timed_per_backward_pass(tmp_path):
    code = _word_language_model(tmp_path)
    r = _bootstrap(tmp_path, code, WLM_ARGS, batch_size=10, epochs=2)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (r.status["status"], r.status["step_marker"]) == ("ok", "backward")
    run = r.run
    assert run.status == "complete" and run.header.step_marker == "backward"
    steps = [e.steps for e in run.epochs]
    assert len(steps) == 2 and steps[0] == steps[1] > 1  # one step per bptt slice, each epoch alike
    assert r.status["steps"] == sum(steps)
    assert r.evaluations() == 2  # evaluate(val_data) per epoch; the test-set evaluation after is none's
    for e in run.epochs:
        assert e.validation_s is not None and e.validation_s > 0
        assert e.epoch_s is not None and sum(e.step_s) + e.validation_s <= e.epoch_s + 1e-3


def test_word_language_model_with_its_optimizer_flag_is_timed_per_optimizer_step(tmp_path):
    code = _word_language_model(tmp_path)
    r = _bootstrap(tmp_path, code, [*WLM_ARGS, "--use-optimizer", "--lr", "0.01"], batch_size=10, epochs=2)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (r.status["status"], r.status["step_marker"]) == ("ok", "optimizer")
    assert [e.steps for e in r.run.epochs] == [r.status["steps"] // 2] * 2


# ---- nanoGPT: max_iters, random slices of a memmap, GradScaler.step, estimate_loss() under no_grad -------

NANOGPT_TINY = [
    "--device=cpu",
    "--compile=False",
    "--n_layer=2",
    "--n_head=2",
    "--n_embd=32",
    "--block_size=32",
    "--eval_iters=3",
    "--dropout=0.0",
    "--log_interval=5",
]


def _nanogpt(tmp_path: Path) -> Path:
    code = _copy("nanoGPT", tmp_path)
    prepared = subprocess.run(
        [sys.executable, "data/shakespeare_char/prepare.py"],
        cwd=code,
        capture_output=True,
        text=True,
        check=False,
    )
    assert prepared.returncode == 0, prepared.stderr
    return code


def test_nanogpt_is_one_stretch_of_its_iterations_with_estimate_loss_timed_as_evaluation(tmp_path):
    code = _nanogpt(tmp_path)
    args = [
        "train.py",
        "config/train_shakespeare_char.py",
        *NANOGPT_TINY,
        "--batch_size=8",
        "--max_iters=12",
        "--eval_interval=5",
    ]
    r = _bootstrap(tmp_path, code, args, batch_size=8, steps=12)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (r.status["status"], r.status["step_marker"]) == ("ok", "optimizer")
    run = r.run
    assert run.header.steps == 12 and run.header.step_marker == "optimizer"
    # iterations 0..12 each step once (the loop ends after max_iters + 1 steps): one stretch, no epochs
    assert [e.steps for e in run.epochs] == [13]
    assert r.evaluations() == 3  # estimate_loss() at iterations 0, 5 and 10
    (e,) = run.epochs
    assert e.validation_s is not None and e.validation_s > 0
    assert e.epoch_s is not None and sum(e.step_s) + e.validation_s <= e.epoch_s + 1e-3
