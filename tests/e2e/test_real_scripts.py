"""End to end: public training scripts swept unchanged, through the CLI in local mode.

The acceptance corpus (``../shared/fixtures/real-scripts``) holds public scripts byte for byte. Each test
copies one into a temporary folder, prepares its data as its README says, and runs
``trainsweep run SPEC --local`` with two batch sizes (or two values of an axis), as a user would with the
command they already type:

* nanoGPT: a positional config file, ``--key=value`` arguments, iterations instead of epochs, batches
  sliced from a memmap (no DataLoader), evaluation under ``torch.no_grad()`` inside the loop, its
  ``val loss`` read from its output by a metric definition; its ``dtype`` swept as an axis, which it
  ignores on a CPU (no autocast there): the report flags bfloat16 as not honoured; its FLOPs per sample
  are counted (a CPU has no peak: no MFU);
* word_language_model: ``store_true`` flags (``--use-optimizer``), no DataLoader, and by default weights
  updated by hand (no optimizer at all: a step ends at each backward pass);
* ddp-tutorial-series: a GPU-only script (``torchrun`` and NCCL on CUDA), which must fail on a CPU with
  its own words in the reason.
"""

from __future__ import annotations

import csv
import io
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "fixtures" / "real-scripts"
runner = CliRunner()

NANOGPT_TINY = (
    "--device=cpu --compile=False --n_layer=2 --n_head=2 --n_embd=32 --block_size=32 --eval_iters=4 "
    "--dropout=0.0 --eval_interval=10 --log_interval=5 --always_save_checkpoint=False"
)


def _copy(tmp_path: Path, name: str) -> Path:
    src = CORPUS / name
    if not src.is_dir():
        pytest.fail(f"the real-scripts corpus is not at {CORPUS}: the project expects ../shared beside it")
    dest = tmp_path / Path(name).name
    shutil.copytree(src, dest)
    return dest


@pytest.fixture(scope="module")
def nanogpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nanoGPT with its data prepared by its own ``prepare.py`` (input.txt is there: no download)."""
    root = _copy(tmp_path_factory.mktemp("nanogpt"), "nanoGPT")
    prep = root / "data" / "shakespeare_char"
    subprocess.run([sys.executable, "prepare.py"], cwd=prep, check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def word_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """word_language_model with a small wikitext-2: its README's training split is a copy of valid.txt;
    here the first 240 lines of it, and 60-line valid and test splits, so an epoch takes seconds."""
    root = _copy(tmp_path_factory.mktemp("wordlm"), "pytorch-examples/word_language_model")
    data = root / "data" / "wikitext-2"
    lines = (data / "valid.txt").read_text().splitlines(keepends=True)
    (data / "train.txt").write_text("".join(lines[:240]))
    (data / "valid.txt").write_text("".join(lines[240:300]))
    (data / "test.txt").write_text("".join(lines[300:360]))
    return root


def _run(tmp_path: Path, spec: dict[str, Any], *, expect_ok: bool = True) -> tuple[Path, str]:
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "results"
    args = ["run", str(path), "--local", "--no-watch", "--out", str(out)]
    result = runner.invoke(app, args, env={"COLUMNS": "400"})  # a wide terminal: reasons on one line
    if expect_ok:
        assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]
    return folder, result.output


def _cells(folder: Path) -> dict[int, dict[str, Any]]:
    return {c["batch_size"]: c for c in json.loads((folder / layout.JOBS_JSON).read_text())["cells"]}


def _record(folder: Path, bs: int) -> dict[str, Any]:
    run = f"{folder.name}-local-cpu-{bs}-e0"
    return json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(run)).read_text())


def _spec(name: str, source: Path, workload: dict[str, Any], mode: str) -> dict[str, Any]:
    return {
        "name": name,
        "workload": {"source_dir": str(source), **workload},
        "instance_types": ["local"],
        "batch_sizes": [8, 16],
        "mode": mode,
        "packing": "per-instance",
        "max_runtime_seconds": 900,
    }


def _nanogpt_flops_per_sample(root: Path) -> int:
    """A hand count of nanoGPT's matrix-product FLOPs per sample (a block of tokens) of a training step
    for ``NANOGPT_TINY``: 6 x the weights of its products (attention in and out, the MLP, the head tied to
    the token embedding) per token, forward and backward, plus attention's two T x T products per layer
    (2 x 2 x T x C per token forward, 3 x that with the backward)."""
    cfg = {k.lstrip("-"): v for k, v in (a.split("=") for a in NANOGPT_TINY.split())}
    layers, c, t = int(cfg["n_layer"]), int(cfg["n_embd"]), int(cfg["block_size"])
    vocab = pickle.loads((root / "data" / "shakespeare_char" / "meta.pkl").read_bytes())["vocab_size"]
    weights = layers * (c * 3 * c + c * c + 2 * c * 4 * c) + c * vocab
    attention = layers * 3 * (2 * 2 * t * c)
    return (6 * weights + attention) * t


def _all_steps(record: dict[str, Any]) -> int:
    return sum(len(e["step_s"]) for e in record["epochs"])


def test_nanogpt_sweeps_its_dtype_from_its_command_and_the_report_flags_what_the_cpu_ignored(
    nanogpt, tmp_path
):
    workload = {
        "command": f"python train.py config/train_shakespeare_char.py {NANOGPT_TINY} "
        "--batch_size={batch_size} --max_iters={steps} --dtype={dtype}",
        "steps": 30,
        "metric_definitions": [{"name": "val_loss", "regex": r"val loss ([0-9.]+)"}],
    }
    spec = _spec("nanogpt", nanogpt, workload, "full")
    spec.update(batch_sizes=[8], axes={"dtype": ["float32", "bfloat16"]})
    folder, _ = _run(tmp_path, spec)
    cells = {c["axes"]["dtype"]: c for c in json.loads((folder / layout.JOBS_JSON).read_text())["cells"]}
    assert {d: c["status"] for d, c in cells.items()} == {"float32": "completed", "bfloat16": "completed"}
    results = folder / layout.RESULTS_DIR
    for cell in cells.values():
        record = json.loads((results / layout.run_record_path(cell["run_name"])).read_text())
        assert record["status"] == "complete"
        # nanoGPT runs iterations 0..max_iters: one optimizer step each, through GradScaler.step
        assert _all_steps(record) == 31
        assert record["header"]["step_marker"] == "optimizer"
        assert record["header"]["steps"] == 30
        # estimate_loss() under torch.no_grad, every 10 iterations: timed as evaluation, not as steps
        assert record["epochs"][0]["validation_s"] > 0
        # its "step N: train loss X, val loss Y" lines, read by the metric definition
        series = record["extra"]["trainsweep.metric_series"]["val_loss"]
        assert series and all(0 < v < 10 for v in series.values())
        # on a CPU nanoGPT leaves autocast out whatever its dtype says (ctx = nullcontext()): float32
        assert record["extra"]["trainsweep.precision"] == "float32"
        assert record["extra"]["trainsweep.compiled"] is False  # --compile=False

    # the report: the best (instance, batch size, setting), the axis's effect, and bfloat16 flagged
    ignored = "dtype=bfloat16 not honoured: the run trained in float32"
    rows = {t["dtype"]: t for t in csv.DictReader(io.StringIO((results / layout.SWEEP_CSV).read_text()))}
    assert rows["bfloat16"]["status"] == rows["float32"]["status"] == "ok"
    assert ignored in rows["bfloat16"]["notes"] and "not honoured" not in rows["float32"]["notes"]
    # its FLOPs, counted once per run from its forward pass on the meta device; no MFU: a CPU has no peak
    hand = _nanogpt_flops_per_sample(nanogpt)
    for row in rows.values():
        assert abs(float(row["flops_per_sample"]) / hand - 1) < 0.1, (row["flops_per_sample"], hand)
        assert row["mfu"] == ""
        assert row["mfu_note"] == "no peak: the catalogue has no accelerator peak for local"
    doc = json.loads((results / layout.SWEEP_JSON).read_text())
    configurations = doc["configurations"]
    assert all(r["flops_per_sample"] > 0 and r["mfu_note"].startswith("no peak") for r in configurations)
    (best,) = doc["best_settings"]
    assert (best["instance_type"], best["batch_size"], best["by"]) == ("local", 8, "time")
    assert best["not_honoured"] == ([ignored] if best["axes"] == {"dtype": "bfloat16"} else [])
    page = (results / layout.REPORT_HTML).read_text()
    assert 'id="best-settings-table"' in page and 'id="plot-axis-dtype"' in page
    assert (results / layout.plot_path("axis-dtype")).read_bytes().startswith(b"\x89PNG")
    quality = page[page.index('id="quality"') : page.index('id="runs"')]
    assert "setting-not-honoured" in quality and ignored in quality


def test_nanogpt_early_stop_predicts_its_steps_and_stops_before_them(nanogpt, tmp_path):
    workload = {
        "command": f"python train.py config/train_shakespeare_char.py {NANOGPT_TINY} "
        "--batch_size={batch_size} --max_iters={steps} --gradient_accumulation_steps=2",
        "steps": 2000,
        "hyperparameters": {"early-stop-min-steps": 10, "early-stop-max-steps": 40},
    }
    folder, _ = _run(tmp_path, _spec("nanogpt-es", nanogpt, workload, "early-stop"))
    cells = _cells(folder)
    assert {bs: c["status"] for bs, c in cells.items()} == {8: "completed", 16: "completed"}
    for bs in (8, 16):
        record = _record(folder, bs)
        assert _all_steps(record) <= 41  # stopped long before its 2,000 iterations
        assert record["prediction"]["total_s"] > 0
        assert record["extra"]["trainsweep.batches_per_step"] == 2  # two micro-steps an iteration
    rows = csv.DictReader(io.StringIO((folder / layout.RESULTS_DIR / layout.SWEEP_CSV).read_text()))
    for row in rows:  # an iteration trains two batches of the batch size
        bs = int(row["batch_size"])
        assert float(row["samples_per_s"]) == pytest.approx(2 * bs / float(row["step_time_s"]), rel=1e-4)
        assert f"a step trains 2 batches of batch size {bs} (gradient accumulation)" in row["notes"]


def test_word_language_model_with_its_store_true_flag_and_epochs(word_lm, tmp_path):
    workload = {
        "entry_point": "main.py",
        "batch_size_arg": "batch_size",
        "epochs": 2,
        "flags": ["use-optimizer"],
        "hyperparameters": {"use-optimizer": True, "emsize": 16, "nhid": 16, "log-interval": 10},
    }
    folder, _ = _run(tmp_path, _spec("wordlm", word_lm, workload, "full"))
    cells = _cells(folder)
    assert {bs: c["status"] for bs, c in cells.items()} == {8: "completed", 16: "completed"}
    for bs in (8, 16):
        record = _record(folder, bs)
        assert len(record["epochs"]) == 2
        steps = {len(e["step_s"]) for e in record["epochs"]}
        assert len(steps) == 1 and steps.pop() > 5  # one AdamW step per bptt slice, the same each epoch
        assert record["header"]["step_marker"] == "optimizer"


def test_word_language_model_updating_weights_by_hand_is_timed_at_each_backward(word_lm, tmp_path):
    workload = {
        "command": "python main.py --batch_size {batch_size} --epochs {epochs} --emsize 16 --nhid 16",
        "epochs": 2,
    }
    folder, _ = _run(tmp_path, _spec("wordlm-sgd", word_lm, workload, "early-stop"))
    cells = _cells(folder)
    assert {bs: c["status"] for bs, c in cells.items()} == {8: "completed", 16: "completed"}
    for bs in (8, 16):
        record = _record(folder, bs)
        assert record["header"]["step_marker"] == "backward"  # how its steps were marked, said
        assert _all_steps(record) > 5


def test_the_gpu_only_ddp_tutorial_fails_on_a_cpu_with_its_own_words(tmp_path):
    source = _copy(tmp_path, "pytorch-examples/ddp-tutorial-series")
    workload = {
        "command": "torchrun --standalone --nproc_per_node={gpus} multigpu_torchrun.py {epochs} 10 "
        "--batch_size {batch_size}",
        "epochs": 2,
    }
    spec = _spec("ddp", source, workload, "full")
    spec["packing"] = "per-cell"
    folder, output = _run(tmp_path, spec, expect_ok=False)
    # torch's own AttributeError, raised in the rank torchrun started: in the CLI's table, the cells'
    # reasons, the report
    assert "AttributeError: module 'torch._C' has no attribute" in output and "'_cuda_setDevice'" in output
    cells = _cells(folder)
    assert {c["status"] for c in cells.values()} == {"failed"}
    for cell in cells.values():
        assert "_cuda_setDevice" in cell["reason"]
    report = (folder / layout.RESULTS_DIR / layout.REPORT_HTML).read_text()
    assert "_cuda_setDevice" in report
