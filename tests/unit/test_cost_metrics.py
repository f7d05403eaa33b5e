"""Per-run and per-configuration cost metrics, and the one iterations-per-dollar formula."""

from __future__ import annotations

from array import array

import pytest

from trainsweep.cost import billing, metrics
from trainsweep.logs import mllog, parse
from trainsweep.logs.model import Epoch, RunHeader, RunTimings

MO833 = "high-res-distributed/mo833-trabalho/experiment_results"


def _mo833_ranks(folder) -> dict[int, RunTimings]:
    """rank -> parsed run, one per-rank log each (the ranks of one instance)."""
    runs = [parse(f) for f in sorted(folder.iterdir())]
    assert all(r.dialect == "mo833" and len(r.ranks) == 1 for r in runs)
    return {next(iter(r.ranks)): r for r in runs}


@pytest.mark.parametrize(("vm", "price", "expected"), [("c4x", 0.199, 6077), ("c5x", 0.170, 11093)])
def test_iterations_per_dollar_reproduces_the_corrected_mo833_figures(real_data, vm, price, expected):
    ranks = _mo833_ranks(real_data / MO833 / vm)
    # The seed took init from rank 0 and the epoch time of the last rank file; the ranks share one instance.
    last = ranks[max(ranks)].epochs[0]
    step_s = last.epoch_s / last.steps
    got = metrics.iterations_per_usd(step_s, price, ranks=len(ranks), fixed_s=ranks[0].init_s)
    assert round(got) == expected


def test_multiplying_dollar_seconds_by_ranks_is_what_inflated_the_seed_figure(real_data):
    ranks = _mo833_ranks(real_data / MO833 / "c5x")
    last = ranks[max(ranks)].epochs[0]
    step_s = last.epoch_s / last.steps
    right = metrics.iterations_per_usd(step_s, 0.170, ranks=3, fixed_s=ranks[0].init_s)
    wrong = metrics.iterations_per_usd(step_s, 0.170 / 3, ranks=3, fixed_s=ranks[0].init_s)
    assert wrong / right == pytest.approx(3, rel=0.01)


def test_iterations_per_dollar_is_unknown_without_price_or_for_free_runs():
    assert metrics.iterations_per_usd(0.5, None) is None
    assert metrics.iterations_per_usd(0.5, 0.0) is None
    assert metrics.iterations_per_usd(None, 1.0) is None


def test_iterations_per_dollar_single_rank_is_seconds_per_dollar_over_step():
    assert metrics.iterations_per_usd(0.25, 3.6) == pytest.approx(1000 / 0.25)


def _epoch(i: int, steps: list[float], epoch_s: float | None = None, val: float = 0.0) -> Epoch:
    return Epoch(
        i, array("d", steps), array("l", range(1, len(steps) + 1)), validation_s=val, epoch_s=epoch_s
    )


def _run(name="r", vm="p3-1", bs=256, epochs=None, **kw) -> RunTimings:
    epochs = epochs or [
        _epoch(1, [5.0] + [0.1] * 9, epoch_s=6.0),
        _epoch(2, [0.3] + [0.1] * 9, epoch_s=1.3),
        _epoch(3, [0.3] + [0.1] * 9, epoch_s=1.3),
    ]
    return RunTimings(name=name, computing_system=vm, batch_size=bs, epochs=epochs, **kw)


def test_steady_step_leaves_out_the_first_step_of_every_epoch():
    m = metrics.run_metrics(_run())
    assert m.step_s == pytest.approx(0.1)
    assert m.samples_per_s == pytest.approx(2560)
    assert m.instance_type == "ml.p3.2xlarge"


def test_epoch_time_leaves_out_epoch_one_and_time_to_train_extrapolates():
    m = metrics.run_metrics(_run(), epochs=10)
    assert m.epoch_s == pytest.approx(1.3)
    assert m.time_to_train_s == pytest.approx(6.0 + 9 * 1.3)
    assert m.billable_s == pytest.approx(billing.FIXED_OVERHEAD_S + 6.0 + 9 * 1.3)
    assert m.billable_source == "model"


def test_a_run_that_did_all_epochs_uses_its_measured_training_time():
    m = metrics.run_metrics(_run(fit_s=8.7), epochs=3)
    assert m.time_to_train_s == 8.7


def test_known_billable_time_wins_over_the_model_and_spot_savings_show():
    job = {"run_name": "r", "status": "Completed", "billable_s": 60, "training_s": 200}
    m = metrics.run_metrics(_run(), epochs=3, job=job)
    assert (m.billable_s, m.billable_source) == (60, "DescribeTrainingJob")
    assert m.spot_savings_share == pytest.approx(0.7)


def test_header_instance_type_is_used_when_name_says_nothing():
    run = _run(vm=None)
    run.header = RunHeader(instance_type="ml.g4dn.xlarge")
    assert metrics.run_metrics(run).instance_type == "ml.g4dn.xlarge"


def test_a_log_without_steps_is_a_failed_run_with_a_reason():
    m = metrics.run_metrics(RunTimings(name="x", computing_system="p3-1", batch_size=64, status="complete"))
    assert m.status == metrics.FAILED and "no training steps" in m.reason


def test_aggregate_reports_mean_and_spread_over_repetitions():
    runs = [
        metrics.run_metrics(
            _run("a", epochs=[_epoch(1, [1.0] + [0.1] * 4), _epoch(2, [0.2] + [0.1] * 4, 0.6)])
        ),
        metrics.run_metrics(
            _run("b", epochs=[_epoch(1, [1.0] + [0.3] * 4), _epoch(2, [0.2] + [0.3] * 4, 1.4)])
        ),
    ]
    (row,) = metrics.aggregate(runs)
    assert row.runs == 2 and row.status == metrics.OK
    assert row.step_time_s == pytest.approx(0.2)
    assert row.step_time_std_s == pytest.approx(0.1414, abs=1e-4)
    assert row.epoch_time_s == pytest.approx(1.0)
    assert row.usd_per_hour == pytest.approx(3.825)
    assert row.cost_per_epoch_usd == pytest.approx(1.0 * 3.825 / 3600)
    assert row.samples_per_usd == pytest.approx(row.samples_per_s * 3600 / 3.825)
    assert row.cost_to_train_usd == pytest.approx(row.billable_s * 3.825 / 3600)


def test_cells_without_runs_show_as_failed_or_infeasible_with_the_reason():
    rows = metrics.aggregate(
        [],
        extra_cells=[
            ("ml.p3.2xlarge", 4096, "infeasible", "CUDA out of memory"),
            ("ml.p2.xlarge", 256, "failed", "capacity error"),
        ],
    )
    status = {(r.instance_type, r.batch_size): (r.status, r.notes) for r in rows}
    assert status[("ml.p3.2xlarge", 4096)] == ("infeasible", "CUDA out of memory")
    assert status[("ml.p2.xlarge", 256)] == ("failed", "capacity error")


def test_data_wait_figures_flow_into_the_row_and_dollars_waiting():
    ep = [
        Epoch(
            1,
            array("d", [1.0, 1.0, 1.0]),
            array("l", [1, 2, 3]),
            array("d", [0, 0.2, 0.2]),
            array("d", [1, 0.8, 0.8]),
        ),
        Epoch(
            2,
            array("d", [1.0, 1.0, 1.0]),
            array("l", [1, 2, 3]),
            array("d", [0.2] * 3),
            array("d", [0.8] * 3),
            epoch_s=3,
        ),
    ]
    run = RunTimings(name="w", computing_system="p3-1", batch_size=32, epochs=ep)
    (row,) = metrics.aggregate([metrics.run_metrics(run, epochs=2)])
    assert row.data_wait_share == pytest.approx(0.2)
    assert row.utilisation == pytest.approx(0.8)
    assert row.usd_waiting == pytest.approx(0.2 * row.time_to_train_s * 3.825 / 3600)


def test_local_runs_cost_nothing_and_have_no_per_dollar_figures():
    run = _run(vm=None)
    run.header = RunHeader(instance_type="local")
    (row,) = metrics.aggregate([metrics.run_metrics(run)])
    assert row.usd_per_hour == 0.0 and row.cost_to_train_usd == 0.0
    assert row.samples_per_usd is None and row.iterations_per_usd is None


@pytest.mark.parametrize("status", ["timeout", "partial"])
def test_a_job_stopped_early_still_counts_with_a_note(status):
    job = {"run_name": "r", "status": status, "billable_s": 3600}
    m = metrics.run_metrics(_run(), epochs=10, job=job)
    assert m.status == metrics.OK and status in m.reason
    assert m.billable_source == "model"  # the job's bill covers 3 epochs, not the 10 to train
    (row,) = metrics.aggregate([m])
    assert "stopped early" in row.notes


def test_an_unknown_vmtype_keeps_its_name_and_gets_no_price():
    (row,) = metrics.aggregate([metrics.run_metrics(_run(vm="x9-1"))])
    assert row.instance_type == "x9-1" and row.usd_per_hour is None
    assert row.cost_to_train_usd is None and "no price for x9-1" in row.notes


def test_a_run_longer_than_asked_contributes_its_first_epochs():
    m = metrics.run_metrics(_run(fit_s=8.6), epochs=2)
    assert m.time_to_train_s == pytest.approx(6.0 + 1.3)


def test_known_bill_of_a_run_with_other_epochs_is_not_used():
    job = {"run_name": "r", "status": "Completed", "billable_s": 500}
    m = metrics.run_metrics(_run(), epochs=2, job=job)
    assert m.billable_source == "model"


def _early_stopped_run(epochs_requested: int = 90) -> RunTimings:
    """What an early-stop job logs: one partial epoch, then the prediction of the full run."""
    from trainsweep.predict import Prediction

    pred = Prediction(
        epochs=epochs_requested, steps_per_epoch=196, step_s=0.25, step_half_width_rel=0.01,
        train_epoch_s=49.0, validation_s=3.0, epoch_s=52.0, epoch_low_s=51.0, epoch_high_s=53.0,
        total_s=epochs_requested * 52.0 + 8.0, total_low_s=0.0, total_high_s=0.0, warmup_excess_s=8.0,
        steps_watched=30, stop_reason="precision", interval=0.9, precision=0.02,
    )  # fmt: skip
    partial = _epoch(1, [8.0] + [0.25] * 29)  # no Epoch time: the job stopped inside epoch 1
    run = _run(epochs=[partial], header=RunHeader(epochs=epochs_requested))
    run.prediction = pred.to_dict()
    return run


def test_an_early_stopped_run_is_judged_by_its_prediction_of_the_full_run():
    m = metrics.run_metrics(_early_stopped_run(90))
    assert m.prediction_used
    assert m.epoch_s == pytest.approx(52.0)  # not the 30 partial steps it ran
    assert m.time_to_train_s == pytest.approx(90 * 52.0 + 8.0)
    assert m.billable_s == pytest.approx(billing.FIXED_OVERHEAD_S + 90 * 52.0 + 8.0)
    assert m.billable_source == "model"


def test_an_early_stopped_run_predicts_the_spec_epochs_when_they_differ():
    m = metrics.run_metrics(_early_stopped_run(90), epochs=10)
    assert m.time_to_train_s == pytest.approx(90 * 52.0 + 8.0 - 80 * 52.0)


def test_a_run_that_trained_every_epoch_ignores_a_prediction():
    run = _run()
    run.prediction = _early_stopped_run(3).prediction
    m = metrics.run_metrics(run, epochs=3)
    assert not m.prediction_used
    assert m.epoch_s == pytest.approx(1.3)


def _step_run(total_s: float) -> RunTimings:
    """What an early-stopped step-based run logs: the start of its one stretch, and the prediction."""
    from trainsweep.predict import Prediction

    pred = Prediction(
        epochs=1, steps_per_epoch=5000, step_s=0.2, step_half_width_rel=0.01,
        train_epoch_s=1000.0, validation_s=40.0, epoch_s=1040.0, epoch_low_s=1030.0, epoch_high_s=1050.0,
        total_s=total_s, total_low_s=0.0, total_high_s=0.0, warmup_excess_s=total_s - 1040.0,
        steps_watched=40, stop_reason="precision", interval=0.9, precision=0.02,
    )  # fmt: skip
    run = _run(epochs=[_epoch(1, [3.0] + [0.2] * 39)], header=RunHeader(epochs=1, steps=5000))
    run.prediction = pred.to_dict()
    return run


def test_a_step_based_runs_time_to_train_is_its_steps_times_the_step_plus_the_one_off_time():
    m = metrics.run_metrics(_step_run(1046.0), epochs=10)  # a spec's epochs do not multiply a stretch
    assert m.prediction_used
    assert m.time_to_train_s == pytest.approx(1046.0)
    assert m.steps_per_epoch == 5000 and m.step_s == pytest.approx(0.2)


def test_a_step_based_run_that_ran_every_step_is_judged_by_its_measured_time():
    run = _run(epochs=[_epoch(1, [3.0] + [0.2] * 99, epoch_s=25.0)], header=RunHeader(epochs=1, steps=100))
    run.fit_s = 25.5
    m = metrics.run_metrics(run, epochs=10)
    assert not m.prediction_used
    assert m.time_to_train_s == pytest.approx(25.5)


def _gpu(peak: object, total: object = 80 * 2**30) -> dict:
    return {mllog.GPU_MEMORY: {"peak_allocated_bytes": 1, "peak_reserved_bytes": peak, "total_bytes": total}}


def test_gpu_memory_share_is_the_peak_reserved_over_the_device_and_the_row_keeps_the_largest():
    runs = [
        metrics.run_metrics(_run(name=f"r{i}", run_index=i, extra=_gpu(peak)))
        for i, peak in enumerate([20 * 2**30, 60 * 2**30])
    ]
    assert [m.gpu_memory_share for m in runs] == [0.25, 0.75]
    (row,) = metrics.aggregate(runs)
    assert row.gpu_memory_share == 0.75
    assert metrics.run_metrics(_run()).gpu_memory_share is None  # no GPU: no event


@pytest.mark.parametrize("extra", [_gpu("a lot"), _gpu(-1), _gpu(1, 0), {mllog.GPU_MEMORY: [1, 2]}])
def test_a_malformed_gpu_memory_event_gives_no_share(extra):
    assert metrics.run_metrics(_run(extra=extra)).gpu_memory_share is None


def test_the_gpu_memory_event_reaches_the_share_through_the_parser():
    value = {"peak_allocated_bytes": 3 * 2**30, "peak_reserved_bytes": 4 * 2**30, "total_bytes": 16 * 2**30}
    lines = [
        mllog.format_line(mllog.EPOCH_START, event_type=mllog.START, metadata={"epoch_num": 1}),
        mllog.format_line(mllog.STEP, {"step": 1, "step_s": 0.5}, metadata={"epoch_num": 1}),
        mllog.format_line(mllog.STEP, {"step": 2, "step_s": 0.25}, metadata={"epoch_num": 1}),
        mllog.format_line(mllog.EPOCH_STOP, event_type=mllog.END, metadata={"epoch_num": 1}),
        mllog.format_line(mllog.GPU_MEMORY, value),
    ]
    run = parse(("\n".join(lines) + "\n").encode(), name="result-g4dn-1-64-e1.txt")
    assert run.dialect == "mllog" and run.extra[mllog.GPU_MEMORY] == value
    assert metrics.run_metrics(run).gpu_memory_share == 0.25


def test_rows_of_several_instances_cost_every_instance_and_show_their_scaling_efficiency():
    # Same type and global batch size on 1 and 2 instances: 2 instances step in 0.06 s, not 0.05.
    one = metrics.run_metrics(_run("one", vm="p3-1"), epochs=3)
    two = metrics.run_metrics(
        _run("two", vm="p3-1x2", epochs=[_epoch(i, [0.3] + [0.06] * 9, epoch_s=0.9) for i in (1, 2, 3)]),
        epochs=3,
    )
    assert (one.instance_count, two.instance_count) == (None, 2)
    rows = metrics.aggregate([one, two])
    assert [(r.machine, r.instance_count, r.vmtype) for r in rows] == [
        ("ml.p3.2xlarge", 1, "p3-1"),
        ("ml.p3.2xlarge x2", 2, "p3-1x2"),
    ]
    r1, r2 = rows
    assert r1.scaling_efficiency is None
    assert r2.scaling_efficiency == pytest.approx((256 / 0.06) / (2 * 256 / 0.1))  # 83 %
    price = r1.usd_per_hour
    assert r2.usd_per_hour == price  # the price of one instance; costs count both
    assert r2.cost_to_train_usd == pytest.approx(r2.billable_s * price * 2 / 3600)
    assert r2.iterations_per_usd == pytest.approx(metrics.iterations_per_usd(0.06, price * 2))


def test_a_job_record_says_the_instance_count_of_its_run():
    m = metrics.run_metrics(_run("r", vm="p3-1"), job={"instance_type": "ml.p3.2xlarge", "instance_count": 4})
    assert m.instance_count == 4
    (row,) = metrics.aggregate([m])
    assert row.instance_count == 4 and row.scaling_efficiency is None  # no one-instance row to compare
