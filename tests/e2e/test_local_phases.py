"""End to end: ``trainsweep run SPEC --local`` with ``target`` and ``phases: [scan, confirm]``.

The data are MNIST-shaped images whose class is a bright bar at a place of its own: a few steps of a
large batch learn it, a few steps of a tiny batch (with its linearly scaled, tiny learning rate) do not.
The scan early-stops every batch size in one packed job; batch size 1024 is larger than the data and
fails there, so the scan ranks the other two, and the confirm sweep trains those (``confirm_top_k: 2``)
to the target: the large batch reaches it and stops there, the tiny one never does and is not
recommended, although the scan found it the fastest to train.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from trainsweep import layout, phases
from trainsweep.cli import app

pytestmark = pytest.mark.slow

TARGET = 0.8


def _bars(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n)
    x = rng.integers(0, 40, (n, 28, 28), dtype=np.uint8)
    for i, c in enumerate(y):
        row, col = (c // 5) * 14, (c % 5) * 5
        x[i, row : row + 14, col : col + 5] = 255
    return x, y


def _spec(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (x_train, y_train), (x_test, y_test) = _bars(512, 0), _bars(256, 1)
    np.savez(data / "mnist.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    spec: dict[str, Any] = {
        "name": "phases",
        "workload": {
            "model": "mnist-cnn",
            "epochs": 4,
            "hyperparameters": {
                "max-steps-per-epoch": 4,
                "early-stop-min-steps": 2,
                "early-stop-min-seconds": 0,
                "validation-batches": 2,
            },
        },
        "instance_types": ["local"],
        "batch_sizes": [2, 128, 1024],
        "max_runtime_seconds": 300,
        "max_concurrency": 2,
        "data": data.resolve().as_uri(),
        "target": {"metric": "eval_accuracy", "value": TARGET},
        "phases": ["scan", "confirm"],
        "confirm_top_k": 2,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _sweep(folder: Path) -> dict[str, Any]:
    return json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())


def test_a_two_phase_sweep_confirms_the_scans_best_and_recommends_from_the_confirmed_runs(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(
        app, ["run", str(_spec(tmp_path)), "--local", "--no-watch", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output

    folders = sorted(d for d in out.iterdir() if d.is_dir())
    assert len(folders) == 2, folders
    scan, confirm = folders
    assert confirm.name == scan.name + phases.CONFIRM_SUFFIX

    # The scan: one packed early-stop job of every batch size; 1024 fails (larger than the data).
    scan_doc = json.loads((scan / layout.JOBS_JSON).read_text())
    assert [j["batch_sizes"] for j in scan_doc["jobs"]] == [[2, 128, 1024]]
    scan_runs = {r["batch_size"]: r for r in _sweep(scan)["runs"]}
    assert scan_runs[2]["prediction_used"] and scan_runs[128]["prediction_used"]
    scan_rows = {r["batch_size"]: r for r in _sweep(scan)["configurations"]}
    assert scan_rows[1024]["status"] != "ok"

    # The confirm sweep: the scan's two ranked configurations, one full job each, nothing else.
    record = json.loads((confirm / phases.PHASES_FILE).read_text())
    assert record["scan_sweep_id"] == scan.name
    assert [r["batch_size"] for r in record["ranking"]] == [c["batch_size"] for c in record["confirmed"]]
    assert {c["batch_size"] for c in record["confirmed"]} == {2, 128}
    confirm_doc = json.loads((confirm / layout.JOBS_JSON).read_text())
    # a run that stopped at the target is complete, not a log that ends early
    assert {c["batch_size"]: c["status"] for c in confirm_doc["cells"]} == {2: "completed", 128: "completed"}
    assert sorted(j["batch_sizes"] for j in confirm_doc["jobs"]) == [[2], [128]]

    summary = _sweep(confirm)
    rec = summary["recommendation"]
    assert rec["target"] == f"eval_accuracy >= {TARGET:g}"
    assert (rec["pick"]["instance_type"], rec["pick"]["batch_size"]) == ("local", 128)
    assert rec["pick"]["time_to_target_s"] > 0
    missed = {c["batch_size"]: c["reason"] for c in rec["not_judged"]}
    assert missed[2].startswith(f"did not reach target: eval_accuracy {TARGET:g} not reached by 1 of 1 runs")
    assert "from the confirmed runs" in result.output and "to reach the target" in result.output

    # The large batch stopped at its first evaluation reaching the target (MLPerf's time-to-train); the
    # tiny one trained every epoch.
    runs = {m["batch_size"]: m for m in summary["runs"]}
    assert runs[128]["eval_accuracy"] >= TARGET
    assert runs[128]["epochs_measured"] == runs[128]["target_epoch"] < 4
    assert runs[2]["epochs_measured"] == 4 and runs[2]["eval_accuracy"] < TARGET
    rows = {r["batch_size"]: r for r in summary["configurations"]}
    assert rows[2]["quality"].startswith("did not reach target")
    assert rows[128]["quality"] == "" and rows[128]["cost_to_target_usd"] == 0.0  # local: free
