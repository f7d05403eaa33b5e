"""Data stalls: per-run wait/compute figures and the FusionFlow what-if reproduction."""

from __future__ import annotations

import csv
import io
from array import array

import numpy as np
import pytest

from trainsweep import stalls
from trainsweep.logs.model import Epoch, RunTimings

FF = "FusionFlow/simulator/no_deps/DDP4GPUFULLTRACE"


@pytest.fixture(scope="module")
def trace(real_data):
    return stalls.read_sim_info(real_data / FF / "FETCH_ALIGN_False_START_ALIGN_False/debug/sim_info.csv")


def _align(word: str) -> stalls.Align:
    return False if word == "False" else word  # type: ignore[return-value]


def test_fusionflow_total_summary_is_reproduced_row_by_row(real_data, trace):
    with (real_data / FF / "total_summary.csv").open() as f:
        expected = list(csv.DictReader(f))
    assert len(expected) == 9
    for row in expected:
        fetch_align, start_align = _align(row["Align"].split("_")[2]), _align(row["Align"].split("_")[5])
        got = stalls.summarise(stalls.simulate_alignment(trace, fetch_align, start_align))
        assert got.label == row["Align"]
        assert got.iterations == 840
        assert got.iteration_s.format() == row["Avg iteration time (sec)"]
        assert got.stall_s.format() == row["Avg training stall time (sec)"]
        assert got.delay_s.format() == row["Avg delay time (sec)"]
        assert got.effective_delay_pct == pytest.approx(float(row["Effective Delay time (%)"]), abs=1e-9)
        assert got.start_diff_s.format() == row["Avg preprocessing start diff (sec)"]
        assert got.fetch_diff_s.format() == row["Avg preprocessing diff (sec)"]


def test_what_if_table_covers_all_nine_alignments(trace):
    labels = {s.label for s in stalls.what_if_table(trace)}
    assert len(labels) == 9


def test_aligning_fetch_start_to_the_earliest_gpu_cuts_the_stall(trace):
    base = stalls.summarise(stalls.simulate_alignment(trace, False, False))
    aligned = stalls.summarise(stalls.simulate_alignment(trace, "min", "min"))
    assert aligned.stall_s.mean < base.stall_s.mean / 10


def test_unknown_alignment_is_refused(trace):
    with pytest.raises(ValueError, match="fetch_align"):
        stalls.simulate_alignment(trace, "max", False)  # type: ignore[arg-type]


def test_a_table_without_gpu_columns_is_refused():
    with pytest.raises(ValueError, match="sim_info"):
        stalls.read_sim_info(io.StringIO(",a,b\n0,1,2\n"))


def _run(waits_by_rank: list[list[float]], comps_by_rank: list[list[float]]) -> RunTimings:
    ranks = {}
    for r, (w, c) in enumerate(zip(waits_by_rank, comps_by_rank, strict=True)):
        steps = [a + b for a, b in zip(w, c, strict=True)]
        ranks[r] = [
            Epoch(1, array("d", steps), array("l", range(1, len(steps) + 1)), array("d", w), array("d", c))
        ]
    return RunTimings(name="r", epochs=ranks[0], ranks=ranks)


def test_run_stall_stats_excludes_warm_up_and_reports_share_and_utilisation():
    # warm-up step (10 s wait) is dropped; then 0.1 s wait + 0.9 s compute per step.
    run = _run([[10.0, 0.1, 0.1, 0.1]], [[5.0, 0.9, 0.9, 0.9]])
    s = stalls.run_stall_stats(run)
    assert s is not None and s.steps == 3
    assert s.data_wait_share == pytest.approx(0.1)
    assert s.utilisation == pytest.approx(0.9)
    assert not s.stalled


def test_a_run_waiting_a_third_of_the_time_is_stalled():
    s = stalls.run_stall_stats(_run([[0, 0.5, 0.5]], [[0, 1.0, 1.0]]))
    assert s is not None and s.stalled and s.utilisation == pytest.approx(2 / 3)


def test_what_if_aligned_and_free_data_for_ranks_that_wait_unevenly():
    # rank 0 waits 0.4 s, rank 1 waits 0 s; both compute 1 s. DDP step = slowest rank = 1.4 s.
    s = stalls.run_stall_stats(_run([[0, 0.4, 0.4], [0, 0.0, 0.0]], [[0, 1.0, 1.0], [0, 1.0, 1.0]]))
    assert s is not None
    assert s.observed_step_s == pytest.approx(1.4)
    assert s.aligned_step_s == pytest.approx(1.2)
    assert s.free_step_s == pytest.approx(1.0)


def test_runs_without_wait_data_have_no_stall_stats():
    run = RunTimings(name="old", epochs=[Epoch(1, array("d", [0.2, 0.2, 0.2]))])
    assert stalls.run_stall_stats(run) is None


def test_mean_std_matches_numpy_sample_std():
    x = np.array([1.0, 2.0, 4.0])
    assert stalls._mean_std(x).std == pytest.approx(np.std(x, ddof=1))
