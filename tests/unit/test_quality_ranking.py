"""Quality, not only speed: the final eval_accuracy per configuration, the margin flag, and the ranking by
time and cost to reach a target, through ``trainsweep report DIR`` (run records + spec.json) and the
scan ranking of a two-phase sweep (:mod:`trainsweep.phases`)."""

from __future__ import annotations

import csv
import io
import json
from array import array
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout, phases
from trainsweep.cli import app
from trainsweep.cost import billing
from trainsweep.errors import SpecError, TrainsweepError
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.spec import load_spec, plan_sweep

runner = CliRunner()


def _run(name: str, vm: str, bs: int, step: float, accuracies: list[float]) -> RunTimings:
    """A 3-epoch run (20 steps an epoch) whose epoch k ends with evaluation accuracy ``accuracies[k-1]``."""
    eps = [
        Epoch(
            i,
            array("d", [step * 20] + [step] * 19),
            array("l", range(1, 21)),
            epoch_s=step * (39 if i == 1 else 20),
            validation_accuracy=acc,
        )
        for i, acc in enumerate(accuracies, start=1)
    ]
    return RunTimings(name=name, computing_system=vm, batch_size=bs, run_index=0, epochs=eps)


# On one instance type: x 512 is the cheapest to train but learns worse; x 128 is the dearest to train
# (slowest steps) but reaches 0.9 after one epoch, x 64 only after three.
RUNS = [
    _run("result-g4dn-1-64-e0", "g4dn-1", 64, 0.10, [0.60, 0.85, 0.92]),
    _run("result-g4dn-1-128-e0", "g4dn-1", 128, 0.15, [0.91, 0.94, 0.95]),
    _run("result-g4dn-1-512-e0", "g4dn-1", 512, 0.05, [0.40, 0.60, 0.80]),
]


def _report(
    tmp_path: Path, spec: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, dict[str, str]], str]:
    root = tmp_path / "grid"
    (root / layout.RUNS_DIR).mkdir(parents=True)
    for r in RUNS:
        (root / layout.run_record_path(r.name)).write_text(json.dumps(r.to_record()))
    if spec is not None:
        (root / layout.SPEC_JSON).write_text(json.dumps(spec))
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((root / layout.SWEEP_JSON).read_text())
    rows = csv.DictReader(io.StringIO((root / layout.SWEEP_CSV).read_text()))
    by_cell = {f"{r['instance_type']} x {r['batch_size']}": r for r in rows}
    html = (root / layout.REPORT_HTML).read_text()
    return summary, by_cell, result.output + html


@pytest.mark.slow
def test_a_configuration_more_than_the_margin_below_the_best_is_flagged_and_not_recommended(tmp_path):
    summary, rows, text = _report(tmp_path, {"name": "q", "workload": {"epochs": 3}, "quality_margin": 0.05})
    assert rows["ml.g4dn.xlarge x 128"]["eval_accuracy"] == "0.95"
    assert rows["ml.g4dn.xlarge x 64"]["quality"] == ""  # 0.03 below the best: within the margin
    flagged = rows["ml.g4dn.xlarge x 512"]["quality"]
    assert (
        flagged
        == "learns worse: eval_accuracy 0.8 is 0.15 below the best (0.95, ml.g4dn.xlarge x 128; margin 0.05)"
    )
    rec = summary["recommendation"]
    assert (rec["pick"]["instance_type"], rec["pick"]["batch_size"]) == ("ml.g4dn.xlarge", 64)
    assert rec["pick"]["eval_accuracy"] == pytest.approx(0.92)
    assert [c["batch_size"] for c in rec["not_judged"]] == [512]
    assert "<th>Eval accuracy</th>" in text and flagged in text


def test_without_a_spec_the_default_margin_applies(tmp_path):
    _, rows, _ = _report(tmp_path, None)
    assert rows["ml.g4dn.xlarge x 512"]["quality"].endswith("margin 0.02)")
    assert rows["ml.g4dn.xlarge x 64"]["quality"].startswith("learns worse: eval_accuracy 0.92 is 0.03")


def test_with_a_target_the_ranking_is_by_time_and_cost_to_reach_it(tmp_path):
    spec = {"name": "q", "workload": {"epochs": 3}, "target": {"metric": "eval_accuracy", "value": 0.9}}
    summary, rows, text = _report(tmp_path, spec)
    # x 128 reaches 0.9 after epoch 1: 0.15 x 39 s; x 64 after epoch 3: 0.1 x (39 + 20 + 20) s.
    assert float(rows["ml.g4dn.xlarge x 128"]["time_to_target_s"]) == pytest.approx(0.15 * 39)
    assert float(rows["ml.g4dn.xlarge x 64"]["time_to_target_s"]) == pytest.approx(0.1 * 79)
    price = float(rows["ml.g4dn.xlarge x 64"]["usd_per_hour"])
    for cell, seconds in (("ml.g4dn.xlarge x 128", 0.15 * 39), ("ml.g4dn.xlarge x 64", 0.1 * 79)):
        billed = billing.modelled_billable_s(seconds, billing.FIXED_OVERHEAD_S)
        assert float(rows[cell]["cost_to_target_usd"]) == pytest.approx(
            billing.cost_usd(billed, price, 1), rel=1e-5
        )
    assert rows["ml.g4dn.xlarge x 512"]["time_to_target_s"] == ""
    assert rows["ml.g4dn.xlarge x 512"]["quality"] == (
        "did not reach target: eval_accuracy 0.9 not reached by 1 of 1 runs (best eval_accuracy 0.8)"
    )
    rec = summary["recommendation"]
    assert rec["target"] == "eval_accuracy >= 0.9"
    # x 64 is cheaper to train all three epochs than x 128, but x 128 is cheaper to reach the target.
    assert float(rows["ml.g4dn.xlarge x 64"]["cost_to_train_usd"]) < float(
        rows["ml.g4dn.xlarge x 128"]["cost_to_train_usd"]
    )
    assert (rec["pick"]["instance_type"], rec["pick"]["batch_size"]) == ("ml.g4dn.xlarge", 128)
    assert [c["batch_size"] for c in rec["not_judged"]] == [512]
    assert "Ranked by time and cost to reach eval_accuracy >= 0.9" in text
    assert "<th>Time to target</th>" in text


def _sweep_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"configurations": rows}


def _row(itype: str, bs: int, t: float | None, c: float | None, **kw: Any) -> dict[str, Any]:
    return {"instance_type": itype, "batch_size": bs, "time_to_train_s": t, "cost_to_train_usd": c,
            "status": "ok", "not_judged": "", **kw}  # fmt: skip


def test_the_scan_ranks_judged_configurations_by_cost_then_time_and_keeps_the_top_k():
    ranked = phases.rank_scan(
        _sweep_json(
            [
                _row("ml.g4dn.xlarge", 64, 100.0, 0.30),
                _row("ml.g4dn.xlarge", 128, 80.0, 0.20),
                _row("ml.p3.2xlarge", 64, 50.0, 0.20),
                _row("ml.p3.2xlarge", 128, None, None, status="failed", not_judged="no timings: oom"),
                _row("ml.g5.xlarge", 64, 10.0, 0.01, not_judged="no price: none"),
            ]
        )
    )
    assert phases.confirm_cells(ranked, 2) == [("ml.p3.2xlarge", 64), ("ml.g4dn.xlarge", 128)]
    assert phases.confirm_cells(ranked, 3)[-1] == ("ml.g4dn.xlarge", 64)


def test_a_scan_that_judged_nothing_confirms_nothing_with_a_clear_error():
    with pytest.raises(TrainsweepError, match="judged no configuration"):
        phases.rank_scan(_sweep_json([_row("local", 8, None, None, status="failed", not_judged="x")]))
    with pytest.raises(TrainsweepError, match="no configurations"):
        phases.rank_scan({"kind": "something else"})


BASE = {
    "name": "p",
    "workload": {"model": "mnist-cnn", "epochs": 4, "synthetic": True},
    "instance_types": ["ml.g4dn.xlarge", "ml.p3.2xlarge"],
    "batch_sizes": [32, 64, 128],
}


def test_phase_specs_scan_everything_early_and_confirm_the_chosen_cells_to_the_target():
    spec = load_spec({**BASE, "target": {"value": 0.97}, "phases": ["scan", "confirm"], "repetitions": 2})
    scan = plan_sweep(phases.scan_spec(spec), sweep_id="p-1")
    assert [(j.instance_type, list(j.batch_sizes)) for j in scan.jobs] == [
        ("ml.g4dn.xlarge", [32, 64, 128]),
        ("ml.p3.2xlarge", [32, 64, 128]),
    ]
    assert all(j.hyperparameters["mode"] == "early-stop" for j in scan.jobs)
    assert all("target-accuracy" not in j.hyperparameters for j in scan.jobs)
    cells = [("ml.p3.2xlarge", 64), ("ml.g4dn.xlarge", 128)]
    confirm = plan_sweep(phases.confirm_spec(spec, cells), sweep_id=phases.confirm_sweep_id("p-1"))
    got = {(j.instance_type, j.batch_sizes[0], j.repetition) for j in confirm.jobs}
    assert got == {(t, b, rep) for t, b in cells for rep in (0, 1)}
    assert all(j.hyperparameters["target-accuracy"] == "0.97" for j in confirm.jobs)
    assert all(j.hyperparameters["mode"] == "full" for j in confirm.jobs)


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"phases": ["scan", "confirm"]}, "target", "set target"),
        ({"phases": ["confirm"], "target": {"value": 0.9}}, "phases", "the only sequence"),
        ({"mode": "early-stop", "target": {"value": 0.9}}, "target", "never reaches a target"),
        ({"target": {"value": 1.5}}, "target.value", "an accuracy target is in (0, 1], got 1.5"),
        ({"target": {"metric": "loss", "value": 0.5}}, "target.metric", "'loss' is not measured"),
        (
            {"cells": [{"instance_type": "ml.p3.2xlarge", "batch_size": 256}]},
            "cells.0",
            "not in instance_types",
        ),
        ({"quality_margin": -0.1}, "quality_margin", "less than the minimum of 0"),
    ],
)
def test_bad_quality_fields_are_clear_errors(extra, field, says):
    with pytest.raises(SpecError) as err:
        load_spec({**BASE, **extra})
    assert any(f == field and says in m for f, m in err.value.errors), err.value.errors


def test_a_single_sweep_refuses_phases_which_only_trainsweep_run_orchestrates():
    # PlanSweep (the state machine started directly) plans one sweep: it must not run a phases spec as
    # one full sweep of every configuration.
    with pytest.raises(SpecError, match="runs as two sweeps"):
        plan_sweep({**BASE, "target": {"value": 0.9}, "phases": ["scan", "confirm"]}, sweep_id="p-1")


def test_with_a_target_the_pareto_plot_draws_time_and_cost_to_reach_it():
    from trainsweep.plots import sweep as sp
    from trainsweep.report import analyse

    a = analyse(RUNS, spec={"name": "q", "workload": {"epochs": 3}, "target": {"value": 0.9}})
    ax = sp.pareto_figure(a.rows, a.recommendation).axes[0]
    assert ax.get_xlabel() == "Time to reach eval_accuracy >= 0.9 (min)"
    points = sorted(tuple(p) for p in ax.collections[0].get_offsets())  # one instance type: one scatter
    reached = [r for r in a.rows if r.time_to_target_s is not None]
    assert points == sorted((r.time_to_target_s / 60, r.cost_to_target_usd) for r in reached)
