"""Results of a sweep with axes: one sweep.csv row per (instance type, batch size, setting), one column per
axis; a sweep without axes keeps the columns and records it always had."""

from __future__ import annotations

import csv
import io
import json

from trainsweep.aws.outcome import Cell, job_cells
from trainsweep.cost.metrics import CSV_COLUMNS, RunMetrics, aggregate, run_metrics
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.report import sweep_csv
from trainsweep.spec import plan_sweep

F32, BF16 = {"dtype": "float32", "compile": False}, {"dtype": "bfloat16", "compile": False}


def _run(name: str, step_s: float, setting: dict | None) -> RunTimings:
    extra = {"trainsweep.axes": setting, "trainsweep.precision": setting.get("dtype")} if setting else {}
    epoch = Epoch(index=1, step_s=[step_s] * 6, epoch_s=step_s * 6)
    return RunTimings(name=name, dialect="mllog", batch_size=64, run_index=0, epochs=[epoch], extra=extra)


def _metrics(runs: list[tuple[str, float, dict | None]]) -> list[RunMetrics]:
    jobs = {n: {"instance_type": "ml.g5.xlarge", "status": "completed", "batch_size": 64} for n, _, _ in runs}
    return [run_metrics(_run(n, s, a), epochs=1, job=jobs[n]) for n, s, a in runs]


def _table(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def test_each_setting_is_its_own_row_with_a_column_per_axis() -> None:
    metrics = _metrics([("a0", 0.2, F32), ("a1", 0.22, F32), ("b0", 0.1, BF16)])
    rows = aggregate(metrics)
    assert [(r.axes["dtype"], r.runs) for r in rows] == [("float32", 2), ("bfloat16", 1)]
    table = _table(sweep_csv(rows))
    header = list(table[0])
    assert header[header.index("batch_size") + 1 : header.index("batch_size") + 3] == ["dtype", "compile"]
    assert [(t["dtype"], t["compile"], t["step_time_s"]) for t in table] == [
        ("float32", "false", "0.21"),
        ("bfloat16", "false", "0.1"),
    ]
    assert metrics[2].precision == "bfloat16" and metrics[2].to_dict()["axes"] == BF16


def test_a_sweep_without_axes_keeps_its_columns_and_records() -> None:
    metrics = _metrics([("a0", 0.2, None), ("b0", 0.1, None)])
    rows = aggregate(metrics)
    assert len(rows) == 1
    assert tuple(_table(sweep_csv(rows))[0]) == CSV_COLUMNS
    assert "axes" not in rows[0].to_dict() and "axes" not in metrics[0].to_dict()
    assert "precision" not in metrics[0].to_dict()


def test_out_of_memory_is_infeasible_for_its_setting_and_batch_size_only() -> None:
    metrics = _metrics([("a0", 0.2, F32)])
    oom = ("ml.g5.xlarge", 64, "infeasible", "out of memory at batch size 64", 1, BF16)
    rows = aggregate(metrics, extra_cells=[oom])
    assert {r.axes["dtype"]: r.status for r in rows} == {"float32": "ok", "bfloat16": "infeasible"}


def test_cell_records_carry_the_setting_only_in_a_sweep_with_axes() -> None:
    spec = {
        "name": "s",
        "workload": {"model": "mnist-cnn"},
        "instance_types": ["ml.g5.xlarge"],
        "batch_sizes": [64],
        "packing": "per-instance",
    }
    (plain,) = plan_sweep(spec, sweep_id="s-1").jobs
    assert "axes" not in job_cells(plain)[0]
    (job,) = plan_sweep({**spec, "axes": {"dtype": ["float32", "bfloat16"]}}, sweep_id="s-1").jobs
    cells = job_cells(job)
    assert [c["axes"] for c in cells] == [{"dtype": "float32"}, {"dtype": "bfloat16"}]
    record = Cell(**cells[1], status="completed", reason=None, billable_s=None).to_dict()
    assert record["axes"] == {"dtype": "bfloat16"}
    plain_record = Cell(**job_cells(plain)[0], status="completed", reason=None, billable_s=None)
    assert "axes" not in plain_record.to_dict()


def test_resume_reruns_a_missing_setting_on_the_original_run_names_and_says_what_else_it_reruns() -> None:
    from trainsweep.aws.resume import plan_resume

    spec = {
        "name": "s",
        "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True},
        "axes": {"dtype": ["float32", "bfloat16"]},
        "instance_types": ["local"],
        "batch_sizes": [32, 64],
    }
    plan = plan_sweep(spec, sweep_id="s-20260101-000000")
    doc = json.loads(plan.jobs_json())
    cells = [c for j in plan.jobs for c in job_cells(j)]
    failed = next(c for c in cells if c["axes"] == {"dtype": "bfloat16"} and c["batch_size"] == 64)
    doc["cells"] = [{**c, "status": "failed" if c is failed else "completed", "reason": None} for c in cells]
    have = {c["run_name"] for c in cells} - {failed["run_name"]}
    resume = plan_resume(spec, doc, have)
    assert resume.missing == [failed["run_name"]]
    same_size = next(c for c in cells if c["axes"] == {"dtype": "float32"} and c["batch_size"] == 64)
    assert resume.also_rerun == [same_size["run_name"]]
    (reduced,) = resume.specs
    rerun = {n for j in plan_sweep(reduced, sweep_id="s-20260101-000000").jobs for n in j.run_names}
    assert rerun == {failed["run_name"], same_size["run_name"]}
    assert {c["run_name"] for c in resume.kept_cells} == have - {same_size["run_name"]}


def test_each_setting_has_its_own_seed_tree_and_a_run_without_axes_keeps_the_seed_layout() -> None:
    from trainsweep.artefacts import seed_paths

    run = _run("a0", 0.2, BF16)
    run.computing_system = "g5-1"
    assert seed_paths(run)["json"] == "execution-times/dtype=bfloat16/compile=false/g5-1/64/e0.json"
    plain = _run("b0", 0.2, None)
    plain.computing_system = "g5-1"
    assert seed_paths(plain)["json"] == "execution-times/g5-1/64/e0.json"
    hostile = _run("c0", 0.2, {"../x": "../../y"})
    hostile.computing_system = "g5-1"
    assert ".." not in seed_paths(hostile)["json"]


def test_status_shows_each_cells_setting_and_its_json_has_it_only_with_axes() -> None:
    from rich.console import Console

    from trainsweep.aws.sweeps import CellView, SweepView
    from trainsweep.cli.sweep import render_view

    cells = [CellView("r0", "j0", "local", 64, 0, axes=BF16), CellView("r1", "j1", "local", 64, 0, axes=F32)]
    console = Console(width=200, record=True)
    console.print(render_view(SweepView("s-1", "RUNNING", cells)))
    text = console.export_text()
    assert "setting" in text and "dtype=bfloat16 compile=false" in text
    assert SweepView("s-1", None, cells).to_dict()["cells"][0]["axes"] == BF16
    plain = SweepView("s-1", None, [CellView("r0", "j0", "local", 64, 0)])
    assert "axes" not in plain.to_dict()["cells"][0]
    plain_console = Console(width=200, record=True)
    plain_console.print(render_view(plain))
    assert "setting" not in plain_console.export_text()


def test_an_axis_named_like_a_figure_gets_a_column_of_its_own() -> None:
    metrics = _metrics([("a0", 0.2, {"utilisation": "high"})])
    table = _table(sweep_csv(aggregate(metrics)))
    assert table[0]["axis.utilisation"] == "high" and table[0]["utilisation"] != "high"
