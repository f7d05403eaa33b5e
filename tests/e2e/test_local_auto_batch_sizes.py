"""End to end: ``batch_sizes: auto`` in a local sweep finds the out-of-memory edge under the test memory cap.

The worker caps its own address space (``TRAINSWEEP_MEMORY_LIMIT_MB``, the tests' stand-in for a small
GPU): at 150 MB above the built model and one math thread, mnist-cnn trains batch sizes 64 and 128 and
runs out of memory at 256 (measured: the forward and backward pass of 256 images need more). The
search starts at 64 and doubles; 256 fails with the worker's real out-of-memory error, so 512 and 1024
are never started.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.training.worker import MEMORY_LIMIT_ENV

pytestmark = pytest.mark.slow


def _run_auto_sweep(tmp_path: Path, name: str, auto: dict[str, Any]) -> tuple[Result, Path]:
    """``trainsweep run --local`` of a short synthetic mnist-cnn sweep with ``batch_sizes: {auto: ...}``."""
    spec = {
        "name": name,
        "workload": {
            "model": "mnist-cnn",
            "epochs": 2,
            "synthetic": True,
            "hyperparameters": {
                "synthetic-samples": 2048,
                "max-steps-per-epoch": 4,
                "max-eval-batches": 1,
                "early-stop-min-steps": 2,
                "early-stop-min-seconds": 0,
                "validation-batches": 2,
            },
        },
        "instance_types": ["local"],
        "batch_sizes": {"auto": auto},
        "max_runtime_seconds": 300,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "results"
    return CliRunner().invoke(app, ["run", str(path), "--local", "--no-watch", "--out", str(out)]), out


def test_auto_batch_sizes_double_until_out_of_memory_and_report_the_feasible_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "150")  # the local jobs inherit it
    # The cap counts address space, and glibc reserves 64 MB of it for each malloc arena a new thread
    # makes: how many a job made after its cap depended on which thread allocated first (timing; a
    # loaded machine ran 128 out of memory). One arena: the cap measures the training's memory only.
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    # one math thread, as in the container tests: each extra thread's stack counts against the cap
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result, out = _run_auto_sweep(tmp_path, "auto", {"min": 64, "max": 1024})
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]

    # One packed early-stop job over the doubling sequence.
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    assert [j["batch_sizes"] for j in doc["jobs"]] == [[64, 128, 256, 512, 1024]]
    cells = {c["batch_size"]: c for c in doc["cells"]}
    assert [cells[b]["status"] for b in (64, 128)] == ["completed", "completed"]
    assert cells[256]["status"] == "infeasible"
    assert "out of memory at batch size 256" in cells[256]["reason"]
    for bs in (512, 1024):  # never started: larger than the edge
        assert cells[bs]["status"] == "infeasible"
        assert "not run: batch size 256 ran out of memory" in cells[bs]["reason"]
        log = (folder / "logs" / f"{folder.name}-local-cpu-{bs}-e0.log").read_text()
        assert "step training time" not in log

    summary = json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())
    search = summary["batch_size_search"]["local"]
    assert search["feasible"] == [64, 128] and search["largest_feasible"] == 128
    assert search["out_of_memory_at"] == 256 and search["stopped"] == "out of memory"
    assert [c["batch_size"] for c in search["curve"]] == [64, 128]
    assert all(c["samples_per_s"] > 0 for c in search["curve"])
    html = (folder / layout.RESULTS_DIR / layout.REPORT_HTML).read_text()
    assert "Batch-size search" in html and "largest feasible 128" in html and "out of memory at 256" in html


def test_sizes_past_a_throughput_plateau_are_skipped_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one math thread: mnist-cnn on a CPU gains nothing from a larger batch (measured: 312, 271, 110
    # samples/s at 64, 128, 256). min_gain 0.99 asks each doubling for twice the throughput, which a
    # loaded machine's noise does not fake twice in a row: the search stops after 256 and skips 512
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result, out = _run_auto_sweep(tmp_path, "plateau", {"min": 64, "max": 512, "min_gain": 0.99})
    assert result.exit_code == 0, result.output
    assert "3 done" in result.output and "1 skipped" in result.output and "failed" not in result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]

    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    cells = {c["batch_size"]: c for c in doc["cells"]}
    assert [cells[b]["status"] for b in (64, 128, 256)] == ["completed"] * 3
    assert cells[512]["status"] == "skipped" and "throughput stopped improving" in cells[512]["reason"]
    # the skipped cell never ran: the job's bill is shared by the three that did
    assert cells[512]["billable_s"] is None
    shares = {cells[b]["billable_s"] for b in (64, 128, 256)}
    assert len(shares) == 1 and None not in shares

    summary = json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())
    rows = {r["batch_size"]: r for r in summary["configurations"]}
    assert rows[512]["status"] == "skipped"
    assert rows[512]["not_judged"].startswith("skipped: throughput stopped improving")
    assert summary["batch_size_search"]["local"]["stopped"] == "plateau"
    assert summary["recommendation"]["pick"]["batch_size"] in (64, 128, 256)
    status = CliRunner().invoke(app, ["status", folder.name, "--results", str(out), "--json"])
    assert status.exit_code == 0, status.output
    counts = json.loads(status.stdout)["counts"]
    assert counts["skipped"] == 1 and counts["failed"] == 0 and counts["done"] == 3
