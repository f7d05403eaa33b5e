"""The accuracy guard weighs evidence, through ``trainsweep report DIR``: "too short to judge" for runs with
fewer optimizer steps than the best needed, "not distinguishable" within the standard error the
evaluation size and the repetitions give, "learns worse" otherwise; the recommendation says what it
set aside and why, and a sweep without prices gets no cost plots."""

from __future__ import annotations

import csv
import io
import json
from array import array
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.logs.model import Epoch, RunHeader, RunTimings

runner = CliRunner()


def _run(
    itype: str,
    bs: int,
    step: float,
    steps: int,
    accuracies: list[float],
    *,
    eval_samples: int | None,
    rep: int = 0,
) -> RunTimings:
    """A run of ``steps`` steps an epoch of ``step`` s (the first twice as long), epoch k evaluated at
    ``accuracies[k-1]`` on ``eval_samples`` samples."""
    eps = [
        Epoch(
            i,
            array("d", [2 * step] + [step] * (steps - 1)),
            array("l", range(1, steps + 1)),
            epoch_s=step * (steps + 1),
            validation_accuracy=acc,
        )
        for i, acc in enumerate(accuracies, start=1)
    ]
    header = RunHeader(instance_type=itype, batch_size=bs, epochs=len(eps), eval_samples=eval_samples)
    return RunTimings(
        name=f"sweep-{itype}-{bs}-e{rep}", batch_size=bs, run_index=rep, epochs=eps, header=header
    )


def _report(tmp_path: Path, runs: list[RunTimings], epochs: int = 2) -> tuple[dict[str, Any], dict, str]:
    root = tmp_path / "grid"
    (root / layout.RUNS_DIR).mkdir(parents=True)
    for r in runs:
        (root / layout.run_record_path(r.name)).write_text(json.dumps(r.to_record()))
    (root / layout.SPEC_JSON).write_text(json.dumps({"name": "g", "workload": {"epochs": epochs}}))
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads((root / layout.SWEEP_JSON).read_text())
    rows = {
        int(r["batch_size"]): r for r in csv.DictReader(io.StringIO((root / layout.SWEEP_CSV).read_text()))
    }
    return summary, rows, (root / layout.REPORT_HTML).read_text()


# The quickstart's shape: 1,920 samples an epoch, 2 epochs, evaluated on 320 samples. Batch size 128 steps
# fastest but has made 30 optimizer steps; batch size 32 needed its 120 to come within the margin.
QUICK = [
    _run("local", 32, 0.040, 60, [0.959, 1.0], eval_samples=320),
    _run("local", 64, 0.070, 30, [0.40, 0.884], eval_samples=320),
    _run("local", 128, 0.120, 15, [0.097, 0.1125], eval_samples=320),
]


def test_a_batch_size_with_fewer_steps_than_the_best_needed_is_too_short_to_judge(tmp_path):
    _, rows, _ = _report(tmp_path, QUICK)
    assert rows[128]["optimizer_steps"] == "30" and rows[32]["optimizer_steps"] == "120"
    assert rows[128]["quality"].startswith(
        "too short to judge: eval_accuracy 0.1125 ± 0.018 after 30 optimizer steps; the best "
        "(1 ± 0.0044, local x 32) needed 120 to come within the margin (0.02) of its final accuracy. "
        "With the same epochs a larger batch makes fewer optimizer steps (statistical efficiency); "
        "a target (time to the same accuracy) compares them fairly"
    )
    assert rows[64]["quality"].startswith("too short to judge: eval_accuracy 0.884 ± 0.018 after 60")
    assert rows[128]["not_judged"] == rows[128]["quality"]
    # binomial standard error of 0.1125 on 320 samples (Agresti-Coull: (36 + 2) / 324)
    p = 38 / 324
    assert float(rows[128]["eval_accuracy_se"]) == pytest.approx((p * (1 - p) / 324) ** 0.5, rel=1e-5)


def test_the_recommendation_names_the_raw_fastest_and_why_it_was_set_aside(tmp_path):
    summary, _, html = _report(tmp_path, QUICK)
    text = summary["recommendation"]["text"]
    assert text[0].startswith("Could not judge 2 of 3 configurations: 2 too short to judge")
    assert (
        "Use local with batch size 32 (4.9 s to train): the only configuration, a subset: 2 of 3" in text[1]
    )
    assert (
        "Fastest of the configurations that learn as well: local with batch size 32 (4.9 s to train)." in text
    )
    (aside,) = [s for s in text if "set aside" in s]
    assert aside.startswith(
        "local x 128 trains in 3.8 s, 21% less time than local x 32 (4.9 s), but is set aside: too short "
        "to judge: eval_accuracy 0.1125"
    )
    assert "statistical efficiency" in aside and "a target" in aside
    assert summary["recommendation"]["raw_fastest"]["batch_size"] == 128
    assert not any("Cheapest" in s or "Pareto" in s for s in text)  # nothing has a price
    assert "time alone ranks them" in " ".join(text)
    assert aside in html


def test_a_sweep_without_prices_gets_no_cost_plots_and_one_line_why(tmp_path):
    _, _, html = _report(tmp_path, QUICK)
    plots = sorted(p.name for p in (tmp_path / "grid" / layout.PLOTS_DIR).iterdir())
    assert "cost-per-epoch.png" not in plots and "pareto.png" not in plots
    assert "time-to-train.png" in plots and "throughput.png" in plots
    assert 'id="plot-cost-per-epoch"' not in html and 'id="plot-pareto"' not in html
    assert '<p id="no-prices">No cost plots: no configuration has a price (local runs cost nothing)' in html


def _pair(eval_samples: int | None) -> list[RunTimings]:
    """Two types, same steps: g4dn (cheaper) ends 0.05 below p3."""
    return [
        _run("ml.p3.2xlarge", 64, 0.05, 40, [0.93, 0.95], eval_samples=eval_samples),
        _run("ml.g4dn.xlarge", 64, 0.06, 40, [0.88, 0.90], eval_samples=eval_samples),
    ]


def test_a_gap_within_what_a_small_evaluation_can_resolve_is_not_distinguishable(tmp_path):
    summary, _, html = _report(tmp_path, _pair(40))
    g4dn = next(r for r in summary["configurations"] if r["instance_type"] == "ml.g4dn.xlarge")
    assert g4dn["quality"] == ""
    assert g4dn["accuracy_note"].startswith(
        "not distinguishable: eval_accuracy 0.9 ± 0.052 is 0.05 below the best (0.95 ± 0.043, "
        "ml.p3.2xlarge x 64) but within 2 standard errors of the difference (0.135; 40 evaluation samples, "
        "1 run)"
    )
    rec = summary["recommendation"]
    assert rec["not_judged"] == [] and rec["pick"]["instance_type"] == "ml.g4dn.xlarge"
    assert ">not distinguishable</td>" in html


def test_the_same_gap_on_a_large_evaluation_learns_worse(tmp_path):
    summary, _, _ = _report(tmp_path, _pair(10000))
    g4dn = next(r for r in summary["configurations"] if r["instance_type"] == "ml.g4dn.xlarge")
    assert g4dn["quality"].startswith("learns worse: eval_accuracy 0.9 ± 0.003 is 0.05 below the best")
    assert "optimizer steps" not in g4dn["quality"]  # as many steps as the best: not a step count matter
    rec = summary["recommendation"]
    assert rec["pick"]["instance_type"] == "ml.p3.2xlarge"
    text = " ".join(rec["text"])
    assert "Cheapest of the configurations that learn as well: ml.p3.2xlarge" in text
    assert "ml.g4dn.xlarge x 64 costs $" in text and "but is set aside: learns worse" in text


def test_fewer_steps_than_the_best_but_enough_to_learn_is_learns_worse_with_the_target_hint(tmp_path):
    # x 256 made 50 steps; x 64 came within the margin after its first 40 (of 80)
    runs = [
        _run("ml.p3.2xlarge", 64, 0.05, 40, [0.94, 0.95], eval_samples=10000),
        _run("ml.p3.2xlarge", 256, 0.15, 25, [0.70, 0.80], eval_samples=10000),
    ]
    _, rows, _ = _report(tmp_path, runs)
    assert rows[256]["quality"].startswith("learns worse: eval_accuracy 0.8 ± 0.004 is 0.15 below the best")
    assert "after 50 optimizer steps against 80" in rows[256]["quality"]
    assert rows[256]["quality"].endswith("a target (time to the same accuracy) compares them fairly")
