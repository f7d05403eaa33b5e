"""A sweep over loader workers: each configuration's measured data-wait share next to the one predicted from
the configuration with the fewest workers, in the analysis and in the report."""

from __future__ import annotations

import pytest

from trainsweep import layout
from trainsweep.loader_workers import comparisons, predict_share
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.report import analyse, sweep_artefacts

COMPUTE = 0.1


def _run(name: str, workers: int, wait: float, axis: str = "num_workers", **more: object) -> RunTimings:
    epoch = Epoch(
        index=1,
        step_s=[wait + COMPUTE] * 8,
        epoch_s=(wait + COMPUTE) * 8,
        data_wait_s=[wait] * 8,
        compute_s=[COMPUTE] * 8,
    )
    setting = {axis: workers, **more}
    return RunTimings(name=name, dialect="mllog", batch_size=64, run_index=0, epochs=[epoch],
                      extra={"trainsweep.axes": setting})  # fmt: skip


def _jobs(runs: list[RunTimings]) -> list[dict]:
    return [
        {"run_name": r.name, "instance_type": "local", "status": "completed", "batch_size": 64} for r in runs
    ]


def test_workers_are_predicted_from_the_fewest_workers_configuration() -> None:
    runs = [_run("w0", 0, 0.3), _run("w2", 2, 0.08), _run("w4", 4, 0.01)]
    (group,) = comparisons(analyse(runs, jobs=_jobs(runs)).rows)
    assert [w.workers for w in group] == [0, 2, 4]
    assert [w.measured_share for w in group] == pytest.approx([0.75, 0.08 / 0.18, 0.01 / 0.11])
    # one batch loads in 0.3 s: two workers deliver one every 0.15 s, a wait of 0.05 s a 0.1 s step
    assert group[0].predicted_share is None
    assert group[1].predicted_share == pytest.approx(0.05 / 0.15)
    assert group[1].predicted_step_s == pytest.approx(0.15)
    assert group[2].predicted_share == pytest.approx(0.0)  # four keep ahead of the step


def test_a_baseline_with_workers_loads_one_batch_in_workers_times_its_step() -> None:
    runs = [_run("w1", 1, 0.2), _run("w3", 3, 0.0)]
    base = analyse(runs, jobs=_jobs(runs)).rows[0]
    # one worker keeps pace with a 0.3 s step: a batch takes it 0.3 s; three deliver one every 0.1 s
    assert predict_share(base, 1, 3) == pytest.approx((0.0, 0.1))


def test_a_scripts_own_axis_name_and_other_axes_make_their_own_groups() -> None:
    runs = [_run(f"{d}{w}", w, 0.3 / (w or 1), "workers", dtype=d) for d in ("a", "b") for w in (0, 2)]
    groups = comparisons(analyse(runs, jobs=_jobs(runs)).rows)
    assert [[w.config.axes["dtype"] for w in g] for g in groups] == [["a", "a"], ["b", "b"]]


def test_a_sweep_without_a_workers_axis_has_no_comparison() -> None:
    runs = [_run("a", 0, 0.1, axis="seed"), _run("b", 1, 0.1, axis="seed")]
    assert comparisons(analyse(runs, jobs=_jobs(runs)).rows) == []


def test_the_report_sets_measured_and_predicted_side_by_side() -> None:
    runs = [_run("w0", 0, 0.3), _run("w2", 2, 0.08)]
    page = sweep_artefacts(runs, jobs=_jobs(runs))[layout.REPORT_HTML].decode()
    section = page.split('<section id="loader-workers">')[1].split("</section>")[0]
    assert "Data wait measured" in section and "Data wait predicted" in section
    assert "44.4%" in section and "33.3%" in section  # measured and predicted at two workers
