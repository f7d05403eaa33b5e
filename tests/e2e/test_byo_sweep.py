"""End to end: the user's own script swept with ``trainsweep run SPEC --local``, as a user runs it.

The shipped example (``examples/byo-pytorch``) in full mode per cell and in early-stop mode packed into one
job, and a script that misbehaves in a different way at each batch size: every failure reaches its cell's
status with its reason, its log is delivered, and the other cells are unaffected.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "byo-pytorch"
runner = CliRunner()


def _run(spec: Path, out: Path) -> Path:
    result = runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]
    return folder


def _cells(folder: Path) -> dict[int, dict[str, Any]]:
    return {c["batch_size"]: c for c in json.loads((folder / layout.JOBS_JSON).read_text())["cells"]}


def _sweep(folder: Path) -> dict[str, Any]:
    return json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())


def _record(folder: Path, run: str) -> dict[str, Any]:
    return json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(run)).read_text())


def test_the_example_script_sweeps_in_full_and_the_report_names_the_best_batch_size(tmp_path):
    folder = _run(EXAMPLE / "sweep.yaml", tmp_path)
    sweep_id = folder.name
    cells = _cells(folder)
    assert {bs: c["status"] for bs, c in cells.items()} == dict.fromkeys((32, 64, 128), "completed")
    for bs in (32, 64, 128):
        run = f"{sweep_id}-local-cpu-{bs}-e0"
        record = _record(folder, run)
        epochs = record["epochs"]
        assert len(epochs) == 2
        steps = -(-14745 // bs)  # 90 % of the 16,384 generated samples
        assert [len(e["step_s"]) for e in epochs] == [steps, steps]
        assert all(e["validation_s"] > 0 for e in epochs)
        seed_json = layout.execution_times_path("local-cpu", bs, 0, "json")
        assert (folder / layout.RESULTS_DIR / seed_json).is_file()
    sweep = _sweep(folder)
    pick = sweep["recommendation"]["pick"]
    # local costs nothing: the cheapest is the fastest, measured
    fastest = min(sweep["configurations"], key=lambda r: r["time_to_train_s"])
    assert (pick["instance_type"], pick["batch_size"]) == ("local", fastest["batch_size"])
    report = (folder / layout.RESULTS_DIR / layout.REPORT_HTML).read_text()
    assert f"batch size {pick['batch_size']}" in report
    # the packed source went with the sweep, content-hashed
    assert list((folder / layout.CODE_DIR).glob("sourcedir-*.tar.gz"))


def test_the_example_script_early_stops_in_one_packed_job(tmp_path):
    folder = _run(EXAMPLE / "sweep-early-stop.yaml", tmp_path)
    sweep_id = folder.name
    jobs = json.loads((folder / layout.JOBS_JSON).read_text())["jobs"]
    assert len(jobs) == 1 and jobs[0]["batch_sizes"] == [32, 64, 128]
    for bs in (32, 64, 128):
        run = f"{sweep_id}-local-cpu-{bs}-e0"
        record = _record(folder, run)
        assert record["status"] == "complete", run  # early-stopped cleanly, not failed
        assert record["prediction"]["epoch_s"] > 0
        log = (folder / "logs" / f"{run}.log").read_text()
        assert "Predicted epoch time:" in log
        # the prediction rests on exactly the steps the run logged: it stopped where it said
        assert record["prediction"]["steps_watched"] == log.count("step training time")
    assert _sweep(folder)["recommendation"]["pick"]["batch_size"] in (32, 64, 128)


def test_every_way_a_script_can_fail_reaches_its_cell_and_spares_the_others(tmp_path):
    shutil.copytree(Path(__file__).parent / "byo_misbehaving", tmp_path / "project")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: misbehaving\n"
        "workload: {entry_point: project/train.py, epochs: 1}\n"
        "instance_types: [local]\n"
        "batch_sizes: [8, 9, 10, 11, 12, 13]\n"
        "max_runtime_seconds: 300\n"
        "max_concurrency: 2\n"
    )
    folder = _run(spec, tmp_path / "out")
    cells = _cells(folder)
    assert cells[8]["status"] == "completed"
    assert cells[9]["status"] == "failed"
    assert "exited with code 4 before its first training step" in cells[9]["reason"]
    assert cells[10]["status"] == "failed"
    assert "no backward pass and no optimizer.step(): nothing to time" in cells[10]["reason"]
    assert cells[11]["status"] == "completed"  # flagged, not failed: its timings are real
    assert cells[12]["status"] == "infeasible"
    assert "out of memory" in cells[12]["reason"]
    assert cells[13]["status"] == "failed"
    assert "ValueError: label 7 out of range" in cells[13]["reason"]
    for bs in (8, 9, 10, 11, 12, 13):  # every log delivered
        assert (folder / "logs" / f"{folder.name}-local-cpu-{bs}-e0.log").is_file(), bs
    ignored = (folder / "logs" / f"{folder.name}-local-cpu-11-e0.log").read_text()
    assert "ignored --batch-size 11" in ignored
    record = _record(folder, f"{folder.name}-local-cpu-11-e0")
    assert record["header"]["batch_size"] == 4  # the truth, not what was asked for
    assert "header-contradicts-name" in [p["code"] for p in record["problems"]]
    rows = {r["batch_size"]: r for r in _sweep(folder)["configurations"]}
    assert "trained with batch size 4, not 11" in rows[11]["notes"]
    assert rows[11]["samples_per_s"] == pytest.approx(4 / rows[11]["step_time_s"], rel=1e-6)
    assert len(_record(folder, f"{folder.name}-local-cpu-8-e0")["epochs"][0]["step_s"]) == 8
