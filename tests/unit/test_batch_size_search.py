"""``batch_sizes: auto``: the spec's expansion and the supervisor's stopping rule (out of memory, plateau)."""

from __future__ import annotations

from typing import Any

import pytest

from trainsweep.errors import SpecError
from trainsweep.spec import load_spec, plan_sweep
from trainsweep.training.launch import parse_script_config
from trainsweep.training.supervisor import SKIPPED, BatchSizeSearch, CellResult

BASE: dict[str, Any] = {
    "name": "auto",
    "workload": {"model": "mnist-cnn", "synthetic": True},
    "instance_types": ["ml.g4dn.xlarge", "ml.p3.2xlarge"],
}


def _ok(bs: int, samples_per_s: float) -> CellResult:
    return CellResult(f"r-{bs}", bs, "ok", None, 0, {"step_s": bs / samples_per_s})


def test_auto_is_the_doubling_sequence_in_one_packed_early_stop_job_per_instance_type():
    spec = load_spec({**BASE, "batch_sizes": {"auto": {"min": 16, "max": 200}}})
    assert spec.batch_sizes == [16, 32, 64, 128]
    assert (spec.mode, spec.packing) == ("early-stop", "per-instance")
    plan = plan_sweep(spec, sweep_id="auto-1")
    assert [j.batch_sizes for j in plan.jobs] == [(16, 32, 64, 128)] * 2
    assert all(j.hyperparameters["batch-size-search"] == "0.03" for j in plan.jobs)
    assert load_spec(spec.to_dict()).batch_sizes == [16, 32, 64, 128]  # what PlanSweep re-reads
    assert load_spec({**BASE, "batch_sizes": "auto"}).batch_sizes[0] == 8


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"batch_sizes": {"auto": {"min": 64, "max": 32}}}, "batch_sizes.auto", "larger than max"),
        ({"batch_sizes": "auto", "packing": "per-cell"}, "batch_sizes", "packing: per-instance"),
        ({"batch_sizes": "auto", "mode": "full"}, "batch_sizes", "mode: early-stop"),
        ({"batch_sizes": [8, 0]}, "batch_sizes[1]", "less than the minimum of 1"),
    ],
)
def test_bad_auto_batch_sizes_are_clear_errors(extra, field, says):
    with pytest.raises(SpecError) as err:
        load_spec({**BASE, **extra})
    assert any(f == field and says in m for f, m in err.value.errors), err.value.errors


def test_the_search_stops_after_two_doublings_that_each_gain_less_than_the_stated_share():
    search = BatchSizeSearch(0.03)
    for bs, rate in ((8, 100.0), (16, 180.0), (32, 184.0)):  # +80 %, then +2.2 %: one flat doubling
        search.add(_ok(bs, rate))
        assert search.stop is None
    search.add(_ok(64, 185.0))  # +2.7 % over the best: the second flat doubling in a row
    assert search.stop is not None and search.stop[0] == SKIPPED
    assert "less than 3 % gain for two doublings, up to batch size 64" in search.stop[1]
    record = search.record()
    assert record["feasible"] == [8, 64] and record["stopped"] == "plateau"
    assert record["out_of_memory_at"] is None


def test_a_scripts_accumulated_batches_count_in_the_curve():
    search = BatchSizeSearch(0.03)
    step = {"step_s": 0.5, "batches_per_step": 4.0}  # a step every 4 batches of 16: 64 samples a step
    search.add(CellResult("r-16", 16, "ok", None, 0, step))
    assert search.record()["curve"] == [{"batch_size": 16, "samples_per_s": pytest.approx(128.0)}]


def test_a_gain_resets_the_plateau_count():
    search = BatchSizeSearch(0.03)
    for bs, rate in ((8, 100.0), (16, 101.0), (32, 150.0), (64, 151.0)):
        search.add(_ok(bs, rate))
    assert search.stop is None  # flat, gain, flat: never two flat doublings in a row


def test_out_of_memory_ends_the_search_and_names_the_edge():
    search = BatchSizeSearch(0.03)
    search.add(_ok(8, 100.0))
    search.add(CellResult("r-16", 16, "oom", "out of memory at batch size 16: ...", 3))
    assert search.stop is not None and search.stop[0] == "oom"
    assert "batch size 16 ran out of memory" in search.stop[1]
    assert search.record() == {
        "curve": [{"batch_size": 8, "samples_per_s": pytest.approx(100.0)}],
        "feasible": [8, 8],
        "largest_feasible": 8,
        "out_of_memory_at": 16,
        "beyond_training_set_at": None,
        "stopped": "out of memory",
    }


def test_a_batch_the_script_cannot_use_ends_the_search_as_out_of_memory_does():
    search = BatchSizeSearch(0.03)
    search.add(_ok(8, 100.0))
    reason = "batch size 64 is beyond what this script can train: its DataLoader holds 50 samples per rank"
    search.add(CellResult("r-64", 64, "infeasible", reason, 3))
    assert search.stop is not None and search.stop[0] == "infeasible"
    assert "batch size 64 is one the script cannot train" in search.stop[1]
    assert (search.record()["beyond_training_set_at"], search.record()["stopped"]) == (64, "training set")


def test_once_a_cell_said_its_training_set_size_no_larger_batch_is_passed_to_the_script():
    search = BatchSizeSearch(0.03)
    assert search.refuse(64) is None  # nothing known yet
    search.add(_ok(16, 100.0), train_samples=50)
    assert search.refuse(32) is None
    reason = search.refuse(64)
    assert reason is not None and reason.startswith(
        "not run: batch size 64 is beyond what the script can train: its training set has 50 samples"
    )


def test_auto_batch_sizes_search_a_scripts_batch_sizes_too():
    workload = {"entry_point": "tests/container/conftest.py", "epochs": 1}
    spec = load_spec({**BASE, "workload": workload, "batch_sizes": {"auto": {"min": 16, "max": 64}}})
    plan = plan_sweep(spec, sweep_id="auto-2")
    hyper = dict(plan.jobs[0].hyperparameters)
    assert hyper["trainsweep-batch-size-search"] == "0.03"
    assert hyper["trainsweep-batch-sizes"] == "16,32,64"
    assert "batch-size-search" not in hyper  # the script's own arguments stay its own
    assert parse_script_config(hyper).search_min_gain == pytest.approx(0.03)
