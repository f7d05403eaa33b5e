"""End to end: ``batch_sizes: auto`` for a user's script in a local sweep (``trainsweep run --local``).

The script trains a small model and raises PyTorch's own out-of-memory error from batch size 64 on (a
stand-in for a GPU that holds no more; no memory cap, no timing): the search runs 16 and 32, finds the
edge at 64, and never starts 128.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow

TRAIN = """
import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
torch.manual_seed(0)
data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    for x, y in DataLoader(data, batch_size=args.batch_size):
        if args.batch_size >= 64:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def test_auto_batch_sizes_search_a_scripts_batch_sizes_up_to_its_out_of_memory_edge(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    spec = {
        "name": "auto-script",
        "workload": {
            "entry_point": "train.py",
            "source_dir": str(src),
            "epochs": 4,
            "hyperparameters": {"early-stop-min-seconds": 0, "early-stop-max-epochs": 4},
        },
        "instance_types": ["local"],
        "batch_sizes": {"auto": {"min": 16, "max": 128}},  # one doubling runs: no plateau can end it first
        "max_runtime_seconds": 300,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", str(path), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]

    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    assert [j["batch_sizes"] for j in doc["jobs"]] == [[16, 32, 64, 128]]
    cells = {c["batch_size"]: c for c in doc["cells"]}
    assert [cells[b]["status"] for b in (16, 32)] == ["completed", "completed"]
    assert cells[64]["status"] == "infeasible"
    assert "out of memory at batch size 64" in cells[64]["reason"]
    assert cells[128]["status"] == "infeasible"
    assert "not run: batch size 64 ran out of memory" in cells[128]["reason"]

    summary = json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())
    search = summary["batch_size_search"]["local"]
    assert search["feasible"] == [16, 32] and search["out_of_memory_at"] == 64
