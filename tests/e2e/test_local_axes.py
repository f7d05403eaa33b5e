"""End to end: a local sweep of a built-in over two axes (``dtype`` × ``seed``) through the CLI.

One packed job scans every setting's batch sizes on one (local) instance. Each run trains in its own
precision and says so in its run record; ``sweep.csv`` has one row per (batch size, setting) and a column
per axis; each setting has its own seed tree. Under the tests' memory cap (150 MB above the built model,
see test_local_auto_batch_sizes.py) float32 runs out of memory at batch size 256: those cells are
infeasible for their setting, the others are judged on their own.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.training.worker import MEMORY_LIMIT_ENV

pytestmark = pytest.mark.slow

SPEC = {
    "name": "axes",
    "workload": {
        "model": "mnist-cnn",
        "epochs": 1,
        "synthetic": True,
        "hyperparameters": {"synthetic-samples": 1024, "max-steps-per-epoch": 3, "max-eval-batches": 1},
    },
    "axes": {"dtype": ["float32", "bfloat16"], "seed": [0, 1]},
    "instance_types": ["local"],
    "batch_sizes": [64, 256],
    "packing": "per-instance",
    "max_runtime_seconds": 900,
}


def test_a_local_sweep_over_two_axes_reports_each_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "150")
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", str(path), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]

    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    assert doc["schema_version"] == 2 and len(doc["jobs"]) == 1  # one packed job
    cells = {(c["axes"]["dtype"], c["axes"]["seed"], c["batch_size"]): c for c in doc["cells"]}
    assert len(cells) == 8
    for dtype in ("float32", "bfloat16"):
        for seed in (0, 1):
            assert cells[(dtype, seed, 64)]["status"] == "completed", cells
    for seed in (0, 1):
        oom = cells[("float32", seed, 256)]
        assert oom["status"] == "infeasible" and "out of memory at batch size 256" in oom["reason"]

    results = folder / layout.RESULTS_DIR
    for cell in cells.values():
        if cell["status"] != "completed":
            continue
        record = json.loads((results / layout.run_record_path(cell["run_name"])).read_text())
        assert record["extra"]["trainsweep.axes"] == cell["axes"]
        assert record["extra"]["trainsweep.precision"] == cell["axes"]["dtype"]
        tree = f"dtype={cell['axes']['dtype']}/seed={cell['axes']['seed']}"
        assert (
            results / "execution-times" / tree / "local-cpu" / str(cell["batch_size"]) / "e0.json"
        ).is_file()

    table = list(csv.DictReader(io.StringIO((results / layout.SWEEP_CSV).read_text())))
    assert list(table[0])[4:7] == ["batch_size", "dtype", "seed"]
    status = {(t["dtype"], t["seed"], t["batch_size"]): t["status"] for t in table}
    assert len(status) == 8
    assert status[("float32", "0", "256")] == status[("float32", "1", "256")] == "infeasible"
    assert all(status[(d, s, "64")] == "ok" for d in ("float32", "bfloat16") for s in ("0", "1"))

    # the report: the best setting of the (unpriced) local instance by time, each axis's effect, and a
    # recommendation naming the whole configuration
    doc = json.loads((results / layout.SWEEP_JSON).read_text())
    (best,) = doc["best_settings"]
    assert (
        best["by"] == "time" and best["instance_type"] == "local" and set(best["axes"]) == {"dtype", "seed"}
    )
    pick = doc["recommendation"]["pick"]
    assert set(pick["axes"]) == {"dtype", "seed"}
    named = f"and dtype={pick['axes']['dtype']} seed={pick['axes']['seed']} ("
    assert any(line.startswith("Use ") and named in line for line in doc["recommendation"]["text"])
    for name in ("dtype", "seed"):
        assert (results / layout.plot_path(f"axis-{name}")).is_file()
