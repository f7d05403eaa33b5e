"""sweep_artefacts on the real FCN grid and on partial / DDP inputs: csv, json, html, plots."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest

from trainsweep import layout
from trainsweep.cost.metrics import CSV_COLUMNS
from trainsweep.report import analyse, sweep_artefacts

PNG = b"\x89PNG\r\n\x1a\n"
REQUIRED = [
    "instance_type",
    "gpus",
    "batch_size",
    "runs",
    "step_time_s",
    "samples_per_s",
    "epoch_time_s",
    "time_to_train_s",
    "billable_s",
    "usd_per_hour",
    "cost_per_epoch_usd",
    "samples_per_usd",
    "data_wait_share",
    "status",
]


@pytest.fixture(scope="module")
def fcn_artefacts(fcn_runs):
    return sweep_artefacts(fcn_runs)


def _rows(arts) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(arts[layout.SWEEP_CSV].decode())))


def test_fcn_grid_gives_24_configurations_of_3_runs(fcn_artefacts):
    rows = _rows(fcn_artefacts)
    assert len(rows) == 24
    assert {r["runs"] for r in rows} == {"3"} and {r["status"] for r in rows} == {"ok"}
    assert {r["instance_type"] for r in rows} == {
        "ml.p2.xlarge",
        "ml.p2.8xlarge",
        "ml.p2.16xlarge",
        "ml.p3.2xlarge",
        "ml.p3.8xlarge",
        "ml.p3.16xlarge",
    }


def test_csv_has_the_required_columns(fcn_artefacts):
    header = fcn_artefacts[layout.SWEEP_CSV].decode().splitlines()[0].split(",")
    assert header == list(CSV_COLUMNS)
    assert set(REQUIRED) <= set(header)


def test_fcn_p3_2xlarge_256_figures_follow_from_the_seed_timings(fcn_artefacts, fcn_runs):
    row = next(
        r for r in _rows(fcn_artefacts) if r["instance_type"] == "ml.p3.2xlarge" and r["batch_size"] == "256"
    )
    # Epochs 2-5 of the three runs, straight from the original execution-times JSON.
    later = [e.epoch_s for run in fcn_runs if run.name.startswith("result-p3-1-256-") for e in run.epochs[1:]]
    epoch_s = sum(later) / len(later)
    assert float(row["epoch_time_s"]) == pytest.approx(epoch_s, rel=1e-5)
    assert float(row["cost_per_epoch_usd"]) == pytest.approx(epoch_s * 3.825 / 3600, rel=1e-5)
    assert float(row["samples_per_s"]) == pytest.approx(256 / float(row["step_time_s"]), rel=1e-5)


def test_recommendation_agrees_with_the_table(fcn_artefacts):
    rows = _rows(fcn_artefacts)
    doc = json.loads(fcn_artefacts[layout.SWEEP_JSON])
    rec = doc["recommendation"]
    cheapest = min(rows, key=lambda r: float(r["cost_to_train_usd"]))
    fastest = min(rows, key=lambda r: float(r["time_to_train_s"]))
    assert (rec["cheapest"]["instance_type"], str(rec["cheapest"]["batch_size"])) == (
        cheapest["instance_type"],
        cheapest["batch_size"],
    )
    assert (rec["fastest"]["instance_type"], str(rec["fastest"]["batch_size"])) == (
        fastest["instance_type"],
        fastest["batch_size"],
    )
    assert rec["pick"] == rec["cheapest"]
    # Nothing outside the Pareto set is both faster and cheaper than a member.
    front = {(p["instance_type"], p["batch_size"]) for p in rec["pareto"]}
    for p in rec["pareto"]:
        assert not any(
            float(r["time_to_train_s"]) < p["time_to_train_s"]
            and float(r["cost_to_train_usd"]) < p["cost_to_train_usd"]
            for r in rows
            if (r["instance_type"], int(r["batch_size"])) != (p["instance_type"], p["batch_size"])
        )
    assert (cheapest["instance_type"], int(cheapest["batch_size"])) in front


def test_report_states_the_recommendation_first_with_numbers(fcn_artefacts):
    page = fcn_artefacts[layout.REPORT_HTML].decode()
    doc = json.loads(fcn_artefacts[layout.SWEEP_JSON])
    first = doc["recommendation"]["text"][0]
    assert first.startswith("Use ml.") and "$" in first
    assert page.index("Recommendation") < page.index("sweep-table")
    assert first in page.replace("&#x27;", "'")
    assert "How every number was computed" in page
    assert "http://" not in page and "https://" not in page  # loads offline


def test_every_plot_is_a_png_and_embedded_in_the_report(fcn_artefacts):
    plots = {k: v for k, v in fcn_artefacts.items() if k.startswith(layout.PLOTS_DIR + "/")}
    for name in (
        "cost-per-epoch",
        "samples-per-s",
        "throughput",
        "pareto",
        "step-time-distributions",
        "rank-timeline",
    ):
        assert layout.plot_path(name) in plots
    assert all(v.startswith(PNG) for v in plots.values())
    page = fcn_artefacts[layout.REPORT_HTML].decode()
    assert page.count("data:image/png;base64,") == len(plots)


def test_artefacts_are_deterministic(fcn_runs, fcn_artefacts):
    again = sweep_artefacts(fcn_runs)
    assert again.keys() == fcn_artefacts.keys()
    assert again[layout.SWEEP_CSV] == fcn_artefacts[layout.SWEEP_CSV]
    assert again[layout.SWEEP_JSON] == fcn_artefacts[layout.SWEEP_JSON]


def test_deadline_and_budget_change_the_pick(fcn_runs):
    a = analyse(fcn_runs, deadline_s=16.0)
    assert a.recommendation.pick.time_to_train_s <= 16.0
    b = analyse(fcn_runs, budget_usd=0.0001)
    assert b.recommendation.pick is None


def test_partial_sweep_with_failed_and_infeasible_cells(fcn_runs):
    runs = [copy.deepcopy(r) for r in fcn_runs if r.computing_system == "p3-1"]
    runs[0].status = "failed"
    runs[0].failure_reason = "AlgorithmError: exit 1"
    jobs = [
        {
            "run_name": "gone",
            "instance_type": "ml.p3.2xlarge",
            "batch_size": 8192,
            "status": "infeasible",
            "reason": "CUDA out of memory",
        },
        {
            "run_name": "gone2",
            "instance_type": "ml.g4dn.xlarge",
            "batch_size": 256,
            "status": "Failed",
            "reason": "ResourceLimitExceeded",
        },
    ]
    arts = sweep_artefacts(runs, jobs=jobs, spec={"name": "fcn", "workload": {"epochs": 20}})
    rows = {(r["instance_type"], r["batch_size"]): r for r in _rows(arts)}
    assert rows[("ml.p3.2xlarge", "8192")]["status"] == "infeasible"
    assert rows[("ml.g4dn.xlarge", "256")]["status"] == "failed"
    assert "ResourceLimitExceeded" in rows[("ml.g4dn.xlarge", "256")]["notes"]
    first = runs[0].batch_size
    assert rows[("ml.p3.2xlarge", str(first))]["runs"] == "2"
    assert "1 of 3 runs failed" in rows[("ml.p3.2xlarge", str(first))]["notes"]
    # 20 requested epochs, 5 measured: epoch 1 + 19 steady epochs.
    for r in json.loads(arts[layout.SWEEP_JSON])["runs"]:
        if r["status"] == "ok":
            assert r["time_to_train_s"] == pytest.approx(r["first_epoch_s"] + 19 * r["epoch_s"])
    page = arts[layout.REPORT_HTML].decode()
    assert "infeasible" in page and "CUDA out of memory" in page


def test_ddp_runs_with_data_wait_get_stall_figures_and_breakdown_plot(ddp_run):
    runs = [
        ddp_run("s-a", "p3-4", 512, waits=[0.05, 0.0, 0.0, 0.0], compute=0.1),
        ddp_run("s-b", "p3-4", 1024, waits=[0.0, 0.0, 0.0, 0.0], compute=0.2),
    ]
    arts = sweep_artefacts(runs)
    rows = {r["batch_size"]: r for r in _rows(arts)}
    assert float(rows["512"]["data_wait_share"]) == pytest.approx(0.0125 / 0.1125, rel=1e-5)
    assert float(rows["1024"]["data_wait_share"]) == 0.0
    assert layout.plot_path("step-breakdown") in arts
    doc = json.loads(arts[layout.SWEEP_JSON])
    c512 = next(c for c in doc["configurations"] if c["batch_size"] == 512)
    assert c512["aligned_step_s"] == pytest.approx(0.1125)
    assert c512["free_step_s"] == pytest.approx(0.1)
    assert "Loading aligned" in arts[layout.REPORT_HTML].decode()


def test_no_runs_at_all_still_gives_a_report():
    arts = sweep_artefacts(
        [],
        jobs=[
            {
                "run_name": "x",
                "instance_type": "ml.p3.2xlarge",
                "batch_size": 64,
                "status": "failed",
                "reason": "no capacity",
            }
        ],
    )
    assert b"nothing to recommend" in arts[layout.REPORT_HTML]
    assert _rows(arts)[0]["status"] == "failed"


def test_quality_findings_and_parser_problems_are_listed(fcn_runs):
    run_copy = copy.deepcopy(fcn_runs[0])
    run_copy.add_problem("steps-per-epoch", "epoch 1 has 39 steps, expected 40", line=12)
    a = analyse(
        [run_copy],
        quality=[{"run": "result-p3-1-256-e1", "code": "duplicate", "message": "same bytes as e2"}],
    )
    codes = [(w["source"], w["code"]) for w in a.warnings]
    assert ("import", "duplicate") in codes and ("parser", "steps-per-epoch") in codes


def test_without_a_spec_cells_mixing_5_and_30_epoch_runs_compare_at_the_common_count(fcn_runs):
    runs = [copy.deepcopy(r) for r in fcn_runs if r.computing_system == "p3-1" and r.batch_size == 256]
    long = runs[0]
    for i in range(6, 31):  # extend one run to 30 epochs (copies of its epoch 5)
        e = copy.deepcopy(long.epochs[4])
        e.index = i
        long.epochs.append(e)
    long.header.epochs = 30
    a = analyse(runs)
    assert a.epochs == 5
    (row,) = a.rows
    assert row.time_to_train_std_s < 1.0  # all three runs are compared over 5 epochs


def test_runs_of_a_packed_job_get_a_modelled_bill_not_a_share_of_one_overhead(fcn_runs):
    runs = [r for r in fcn_runs if r.computing_system == "p3-1" and r.run_index == 0]
    jobs = [
        {
            "run_name": r.name,
            "job_name": "s-p3-1-packed-e0",
            "instance_type": "ml.p3.2xlarge",
            "batch_size": r.batch_size,
            "status": "completed",
            "billable_s": 50.0,
        }
        for r in runs
    ]
    a = analyse(runs, jobs=jobs)
    assert {m.billable_source for m in a.run_metrics} == {"model"}
    solo = analyse(runs[:1], jobs=jobs[:1])
    assert solo.run_metrics[0].billable_source == "DescribeTrainingJob"


def test_the_gpu_memory_the_container_logged_reaches_the_csv_and_the_table(ddp_run):
    from trainsweep.logs import mllog

    runs = [
        ddp_run("g-a", "p3-4", 512, waits=[0.0] * 4, compute=0.1),
        ddp_run("g-b", "p3-4", 1024, waits=[0.0] * 4, compute=0.2),
    ]
    runs[1].extra[mllog.GPU_MEMORY] = {"peak_reserved_bytes": 12 * 2**30, "total_bytes": 16 * 2**30}
    arts = sweep_artefacts(runs)
    rows = {r["batch_size"]: r for r in _rows(arts)}
    assert float(rows["1024"]["gpu_memory_share"]) == 0.75 and rows["512"]["gpu_memory_share"] == ""
    html = arts[layout.REPORT_HTML].decode()
    assert "<th>GPU memory</th>" in html and '<td data-v="0.75">75%</td>' in html


def test_a_job_that_ended_well_but_left_no_run_is_a_failed_cell_saying_so():
    # job statuses as the sweep records them; none of these jobs left a parsed run
    said = {64: "Completed", 128: "stopped", 256: "timeout", 512: "infeasible", 1024: "Failed"}
    jobs = [
        {"run_name": f"s-p3-1-{bs}-e0", "instance_type": "ml.p3.2xlarge", "batch_size": bs, "status": s}
        for bs, s in said.items()
    ]
    jobs[-1]["reason"] = "AlgorithmError: exit 1"
    rows = {r.batch_size: r for r in analyse([], jobs=jobs).rows}
    assert {bs: r.status for bs, r in rows.items()} == {
        64: "failed",
        128: "failed",
        256: "failed",
        512: "infeasible",
        1024: "failed",
    }
    assert rows[64].notes == "job completed but no log was parsed"
    assert rows[128].notes == "job stopped but no log was parsed"  # was failed with no reason at all
    assert rows[256].notes == "job timeout but no log was parsed"
    assert rows[1024].notes == "AlgorithmError: exit 1"


def test_a_sweep_whose_every_run_failed_draws_no_step_time_distributions():
    jobs = [{"run_name": "a", "instance_type": "ml.p3.2xlarge", "batch_size": 64, "status": "failed"}]
    arts = sweep_artefacts([], jobs=jobs)
    assert layout.plot_path("step-time-distributions") not in arts
    assert layout.plot_path("cost-per-epoch") in arts  # priced: the cell says "failed"
    assert 'id="no-prices"' not in arts[layout.REPORT_HTML].decode()
