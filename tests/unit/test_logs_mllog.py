"""``:::MLLOG`` logs (what the trainsweep container writes): per-rank steps, header, prediction, failure."""

from __future__ import annotations

import math

from trainsweep.logs import mllog, parse


def test_mllog_steps_fill_data_wait_and_compute_per_rank(mllog_log) -> None:
    run = parse(mllog_log(epochs=2, steps=3, ranks=2))
    assert run.dialect == "mllog"
    assert run.status == "complete" and run.problems == []
    assert sorted(run.ranks) == [0, 1]
    assert run.ranks[0] is run.epochs
    ep = run.ranks[1][0]
    assert (ep.index, list(ep.step_numbers)) == (1, [1, 2, 3])
    assert list(ep.step_s) == [1.5] * 3
    assert list(ep.data_wait_s) == [0.1] * 3  # type: ignore[arg-type]
    assert list(ep.compute_s) == [1.4] * 3  # type: ignore[arg-type]
    assert [e.steps for e in run.epochs] == [3, 3]


def test_mllog_epoch_values_and_run_times_are_read(mllog_log) -> None:
    run = parse(mllog_log(epochs=2))
    assert [(e.validation_s, e.validation_accuracy, e.epoch_s) for e in run.epochs] == [
        (0.25, 0.51, 2.0),
        (0.25, 0.52, 2.0),
    ]
    assert (run.init_s, run.fit_s) == (1.5, 4.5)
    assert run.epochs[0].start_time is not None and run.epochs[0].end_time > run.epochs[0].start_time
    assert run.real_time == sorted(run.real_time) and len(run.real_time) == 2 + 2 * 2


def test_the_human_readable_echo_lines_are_not_counted_twice(mllog_log) -> None:
    run = parse(mllog_log(epochs=2, steps=3, legacy=True))
    assert run.steps_total == 6


def test_mllog_header_events_fill_the_header(mllog_log) -> None:
    h = parse(mllog_log(ranks=2)).header
    assert (h.batch_size, h.train_samples, h.epochs, h.instance_type, h.gpus, h.world_size) == (
        64,
        192,
        2,
        "ml.g4dn.xlarge",
        1,
        2,
    )


def test_zero_based_epoch_numbers_are_shifted_to_the_seed_numbering(mllog_log) -> None:
    run = parse(mllog_log(epochs=2, epoch_base=0))
    assert [e.index for e in run.epochs] == [1, 2]


def test_the_early_stop_prediction_is_kept(mllog_log) -> None:
    pred = {"predicted_total_s": 123.4, "steps_seen": 40}
    run = parse(mllog_log(epochs=1, prediction=pred))
    assert run.prediction == pred


def test_a_failure_event_makes_the_run_failed_with_its_reason(mllog_log) -> None:
    run = parse(mllog_log(epochs=1, failure={"reason": "CUDA out of memory", "kind": "oom"}))
    assert run.status == "failed"
    assert run.failure_reason == "CUDA out of memory"
    assert run.extra["failure_kind"] == "oom"
    assert [p.code for p in run.problems] == ["failed"]


def test_a_malformed_mllog_line_is_reported_with_its_line_and_skipped(mllog_log) -> None:
    lines = mllog_log(epochs=1, steps=3, legacy=False).split(b"\n")
    lines.insert(3, b':::MLLOG {"key": "trainsweep.step", "value": {broken')
    run = parse(b"\n".join(lines))
    assert [(p.code, p.line) for p in run.problems] == [("bad-mllog", 4)]
    assert run.steps_total == 3


def test_mllog_lines_with_a_launcher_prefix_are_read() -> None:
    line = mllog.format_line(mllog.STEP, {"step": 1, "step_s": 0.5}, metadata={"epoch_num": 1, "rank": 0})
    run = parse(("0: " + line + "\n").encode())
    assert list(run.epochs[0].step_s) == [0.5]
    assert run.epochs[0].data_wait_s is None


def test_unknown_mllog_keys_go_to_extra() -> None:
    run = parse((mllog.format_line("opt_base_learning_rate", 0.1) + "\n").encode())
    assert run.extra == {"opt_base_learning_rate": 0.1}


def test_an_absurd_step_time_in_mllog_is_dropped() -> None:
    good = mllog.format_line(mllog.STEP, {"step": 1, "step_s": 0.5}, metadata={"epoch_num": 1})
    bad = mllog.format_line(mllog.STEP, {"step": 2, "step_s": -1}, metadata={"epoch_num": 1})
    run = parse((good + "\n" + bad + "\n").encode())
    assert [(p.code, p.line) for p in run.problems] == [("absurd-value", 2)]
    assert run.steps_total == 1


def test_an_instance_type_contradicting_the_name_is_reported(mllog_log) -> None:
    run = parse(mllog_log(), name="sweep-p3-1-64-e0")
    assert [p.message for p in run.problems] == [
        "the name says instance type ml.p3.2xlarge, the log says ml.g4dn.xlarge"
    ]


def test_fewer_epochs_than_the_epoch_count_is_partial_unless_stopped_early(mllog_log) -> None:
    data = mllog_log(epochs=3)
    cut = data.index(b'"epoch_num": 3')
    cut = data.rindex(b"\n", 0, cut) + 1
    run = parse(data[:cut])
    assert run.status == "partial" and [p.code for p in run.problems] == ["ends-early"]


def _without(data: bytes, *keys: str) -> bytes:
    """The log without the lines of these MLLOG keys."""
    drop = [f'"key": "{k}"'.encode() for k in keys]
    return b"".join(ln for ln in data.splitlines(keepends=True) if not any(d in ln for d in drop))


def test_a_run_that_ends_without_run_stop_misses_a_required_event(mllog_log) -> None:
    run = parse(_without(mllog_log(epochs=2), mllog.RUN_STOP))
    assert run.status == "partial"
    assert [(p.code, p.message) for p in run.problems] == [
        (
            "missing-events",
            "the log lacks run_stop, which every complete run holds: the process ended before it wrote "
            "the run's end",
        )
    ]


def test_every_required_event_is_checked(mllog_log) -> None:
    for key in mllog.required_events(early_stopped=False):
        if key in (mllog.STEP, mllog.RUN_START):
            continue  # without them the log is not a run trainsweep's writer started: not checked
        run = parse(_without(mllog_log(epochs=1), key))
        assert [p.code for p in run.problems] == ["missing-events"], key
        assert key in run.problems[0].message


def test_an_early_stopped_run_needs_its_prediction_not_its_epoch_ends(mllog_log) -> None:
    stopped = _without(mllog_log(epochs=1, prediction={"epoch_s": 1.0}), mllog.EPOCH_STOP)
    assert parse(stopped).problems == []
    run = parse(_without(mllog_log(epochs=1), mllog.EPOCH_STOP))
    assert [p.code for p in run.problems] == ["missing-events"] and "epoch_stop" in run.problems[0].message


def test_a_failed_run_or_a_fragment_is_not_checked_for_required_events(mllog_log) -> None:
    failed = _without(mllog_log(epochs=1, failure={"reason": "boom", "kind": "error"}), mllog.INIT_START)
    assert [p.code for p in parse(failed).problems] == ["failed"]
    fragment = _without(mllog_log(epochs=1), mllog.RUN_START, mllog.RUN_STOP)
    assert parse(fragment).problems == []


def test_missing_data_wait_values_are_nan_not_zero() -> None:
    a = mllog.format_line(mllog.STEP, {"step": 1, "step_s": 0.5}, metadata={"epoch_num": 1})
    b = mllog.format_line(
        mllog.STEP, {"step": 2, "step_s": 0.5, "data_wait_s": 0.2}, metadata={"epoch_num": 1}
    )
    ep = parse((a + "\n" + b + "\n").encode()).epochs[0]
    assert math.isnan(ep.data_wait_s[0]) and ep.data_wait_s[1] == 0.2  # type: ignore[index]


def test_an_eval_accuracy_without_a_value_is_no_accuracy_and_no_problem() -> None:
    step = mllog.format_line(mllog.STEP, {"step": 1, "step_s": 0.5}, metadata={"epoch_num": 1})
    acc = mllog.format_line(mllog.EVAL_ACCURACY, None, metadata={"epoch_num": 1})
    run = parse((step + "\n" + acc + "\n").encode())
    assert run.problems == [] and run.epochs[0].validation_accuracy is None
