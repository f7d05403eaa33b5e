"""Per-run artefacts: paths from the layout, deterministic bytes, the step-time plot."""

from __future__ import annotations

import json
from array import array

import pytest

from trainsweep import layout
from trainsweep.artefacts import run_artefacts, run_record_bytes
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.plots.run import step_times_figure, step_times_png
from trainsweep.summary import dumps_seed_json, seed_json, seed_summary

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_run(n_epochs: int = 3, **kwargs) -> RunTimings:
    run = RunTimings(name=kwargs.pop("name", "result-p3-1-512-e2"), **kwargs)
    for i in range(n_epochs):
        steps = [2.0 if i == 0 else 0.1] + [0.1 + 0.001 * k for k in range(20)]
        run.epochs.append(
            Epoch(
                index=i + 1,
                step_s=array("d", steps),
                step_numbers=array("l", range(1, len(steps) + 1)),
                validation_s=0.2,
                epoch_s=sum(steps) + 0.2,
            )
        )
    return run


@pytest.fixture
def cell_run() -> RunTimings:
    return make_run(computing_system="p3-1", batch_size=512, run_index=2, total_s=12.0, init_s=1.0)


def test_a_run_with_a_known_cell_gets_the_seed_outputs_and_its_record(cell_run: RunTimings) -> None:
    out = run_artefacts(cell_run)
    assert set(out) == {
        layout.execution_times_path("p3-1", 512, 2, "json"),
        layout.execution_times_path("p3-1", 512, 2, "summary"),
        layout.execution_times_path("p3-1", 512, 2, "png"),
        layout.run_record_path("result-p3-1-512-e2"),
    }
    assert set(out) >= {"execution-times/p3-1/512/e2.json", "runs/result-p3-1-512-e2.json"}


def test_the_seed_files_hold_the_seed_json_and_summary(cell_run: RunTimings) -> None:
    out = run_artefacts(cell_run)
    assert out["execution-times/p3-1/512/e2.json"].decode() == dumps_seed_json(seed_json(cell_run))
    assert out["execution-times/p3-1/512/e2.summary"].decode() == seed_summary(cell_run)
    assert out["execution-times/p3-1/512/e2.png"].startswith(PNG_SIGNATURE)


def test_the_run_record_reads_back_into_the_same_run(cell_run: RunTimings) -> None:
    record = json.loads(run_artefacts(cell_run)["runs/result-p3-1-512-e2.json"])
    back = RunTimings.from_record(record)
    assert back.flat_steps() == cell_run.flat_steps()
    assert (back.computing_system, back.batch_size, back.run_index) == ("p3-1", 512, 2)


def test_the_same_run_gives_the_same_bytes(cell_run: RunTimings) -> None:
    assert run_artefacts(cell_run) == run_artefacts(make_run(**_cell_kwargs(cell_run)))


def _cell_kwargs(run: RunTimings) -> dict:
    return {
        "computing_system": run.computing_system,
        "batch_size": run.batch_size,
        "run_index": run.run_index,
        "total_s": run.total_s,
        "init_s": run.init_s,
    }


@pytest.mark.parametrize("missing", ["computing_system", "batch_size", "run_index"], ids=lambda m: f"no-{m}")
def test_a_run_without_vmtype_bs_and_index_only_gets_its_record(cell_run: RunTimings, missing: str) -> None:
    setattr(cell_run, missing, None)
    assert list(run_artefacts(cell_run)) == ["runs/result-p3-1-512-e2.json"]


def test_non_finite_values_still_give_valid_json(cell_run: RunTimings) -> None:
    cell_run.epochs[1].step_s[3] = float("inf")
    cell_run.real_time = [1.0, float("nan")]
    text = run_record_bytes(cell_run).decode()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text)["real_time"] == [1.0, None]
    seed = run_artefacts(cell_run)["execution-times/p3-1/512/e2.json"]
    assert len(json.loads(seed)["epochs"]["2"]["steps"]) == 20


def test_step_time_plot_has_one_line_per_epoch_and_labelled_axes(cell_run: RunTimings) -> None:
    fig = step_times_figure(cell_run)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 3
    assert ax.get_xlabel() == "Step within epoch"
    assert ax.get_ylabel() == "Step time (s)"
    assert ax.get_yscale() == "log"
    assert "p3-1" in ax.get_title() and "512" in ax.get_title()
    assert list(ax.get_lines()[1].get_ydata()) == list(cell_run.epochs[1].step_s)


def test_step_time_plot_of_many_epochs_has_no_overlong_legend() -> None:
    fig = step_times_figure(make_run(30))
    assert fig.axes[0].get_legend() is None
    assert len(fig.axes[0].get_lines()) == 30


def test_step_time_plot_of_a_run_without_steps_says_so() -> None:
    run = RunTimings(name="empty")
    fig = step_times_figure(run)
    assert any("no step times" in t.get_text() for t in fig.axes[0].texts)
    assert step_times_png(run).startswith(PNG_SIGNATURE)


def test_a_log_without_step_times_gets_no_seed_timings(cell_run: RunTimings) -> None:
    cell_run.epochs = []
    cell_run.status = "failed"
    assert list(run_artefacts(cell_run)) == ["runs/result-p3-1-512-e2.json"]


def test_a_trainsweep_container_log_gets_seed_outputs_from_rank_0(mllog_log) -> None:
    from trainsweep.logs import parse

    run = parse(mllog_log(epochs=2, steps=3, ranks=2), name="sweep1-g4dn-1-64-e0")
    out = run_artefacts(run)
    seed = json.loads(out["execution-times/g4dn-1/64/e0.json"])
    assert seed["epochs"]["1"] == {
        "steps": {"1": 0.5, "2": 0.5, "3": 0.5},  # rank 0 (rank 1 took 1.5 s a step)
        "validation_accuracy": 0.51,
        "validation_time": 0.25,
        "epoch_time": 2.0,
    }
    assert (seed["init"], seed["fit_time"], seed["batch_size"]) == (1.5, 4.5, "64")
    record = json.loads(out["runs/sweep1-g4dn-1-64-e0.json"])
    assert sorted(record["ranks"]) == ["1"]  # rank 0 is the record's own epochs
    assert "Number of steps: 6.000000" in out["execution-times/g4dn-1/64/e0.summary"].decode()
