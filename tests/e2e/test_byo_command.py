"""End to end: a sweep of the command a user already types (``workload.command``), with ``trainsweep run
SPEC --local``, as a user runs it: the command's placeholders filled per cell, its script timed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner()

# A script with nanoGPT's argument shape: a positional config file, then --key=value only.
TRAIN = """
import sys
import torch
from torch.utils.data import DataLoader, TensorDataset

settings = {"batch_size": 0, "epochs": 0, "accumulate": 1}
for arg in sys.argv[1:]:
    if not arg.startswith("--"):
        exec(open(arg).read(), {}, settings)
        continue
    assert "=" in arg, f"arguments are --key=value: {arg}"
    key, value = arg[2:].split("=", 1)
    settings[key] = int(value)
data = TensorDataset(torch.randn(192, 4), torch.randint(0, 2, (192,)))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(settings["epochs"]):
    for i, (x, y) in enumerate(DataLoader(data, batch_size=settings["batch_size"])):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if (i + 1) % settings["accumulate"] == 0:  # gradient accumulation
            opt.step()
            opt.zero_grad()
"""


def _record(folder: Path, run: str) -> dict[str, Any]:
    return json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(run)).read_text())


def test_a_command_sweeps_its_batch_sizes_in_full(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "small.py").write_text("epochs = 1\n")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: command\n"
        "workload:\n"
        "  command: python train.py config/small.py --batch_size={batch_size} --epochs={epochs}"
        " --accumulate={accumulate}\n"
        "  epochs: 2\n"
        "  hyperparameters: {accumulate: 2}\n"
        "instance_types: [local]\n"
        "batch_sizes: [16, 32]\n"
        "max_runtime_seconds: 300\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])

    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]
    cells = {c["batch_size"]: c for c in json.loads((folder / layout.JOBS_JSON).read_text())["cells"]}
    assert {bs: c["status"] for bs, c in cells.items()} == {16: "completed", 32: "completed"}
    for bs in (16, 32):
        record = _record(folder, f"{folder.name}-local-cpu-{bs}-e0")
        # --epochs=2 from the placeholder won over the config file's 1; a step every second batch
        assert [len(e["step_s"]) for e in record["epochs"]] == [192 // bs // 2] * 2
    rows = {
        int(r["batch_size"]): r
        for r in csv.DictReader((folder / layout.RESULTS_DIR / layout.SWEEP_CSV).open())
    }
    for bs, row in rows.items():  # a step trains two batches
        assert float(row["samples_per_s"]) == pytest.approx(2 * bs / float(row["step_time_s"]), rel=1e-4)
        assert f"a step trains 2 batches of batch size {bs} (gradient accumulation)" in row["notes"]
    assert list((folder / layout.CODE_DIR).glob("sourcedir-*.tar.gz"))  # the spec's folder, packed
