"""The ``log_format`` dialect: a spec's own regular expression reads a log no built-in dialect knows."""

from __future__ import annotations

import pytest

from trainsweep.artefacts import run_artefacts
from trainsweep.logs import parse
from trainsweep.logs.model import RunTimings
from trainsweep.logs.pattern import MAX_PROBLEMS_PER_CODE, compile_log_format

STEP_S = r"^\[train\] epoch (?P<epoch>\d+) step (?P<step>\d+) took (?P<step_s>\S+) s"
STAMP = r"^step done at (?P<timestamp>\S+)"


def _log(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


# ---- compile_log_format --------------------------------------------------------------------------


def test_a_pattern_with_a_step_time_or_a_timestamp_group_compiles() -> None:
    assert compile_log_format(STEP_S).groupindex.keys() == {"epoch", "step", "step_s"}
    assert compile_log_format(STAMP).groupindex.keys() == {"timestamp"}


def test_an_invalid_regular_expression_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"not a valid regular expression: missing \), unterminated"):
        compile_log_format(r"took (?P<step_s>[0-9.]+")


def test_a_pattern_without_step_s_or_timestamp_is_refused_with_an_example() -> None:
    with pytest.raises(ValueError, match=r"needs a named group step_s .* or timestamp .*e\.g\."):
        compile_log_format(r"step (?P<step>\d+) took ([0-9.]+)s")


def test_a_misspelt_group_name_is_refused_rather_than_read_as_nothing() -> None:
    with pytest.raises(ValueError, match=r"named group.* epochs that trainsweep does not read"):
        compile_log_format(r"epoch (?P<epochs>\d+) took (?P<step_s>[0-9.]+)")


def test_parse_refuses_a_bad_log_format_before_reading_anything() -> None:
    with pytest.raises(ValueError, match="needs a named group"):
        parse(b"anything\n", log_format="(?P<x>.)")


# ---- reading ---------------------------------------------------------------------------------------


def test_step_s_lines_become_steps_with_their_logged_numbers_and_epochs() -> None:
    log = _log(
        "loading data",
        "[train] epoch 0 step 1 took 0.50 s",
        "[train] epoch 0 step 2 took 0.25 s",
        "validation done",
        "[train] epoch 1 step 1 took 0.30 s",
        "[train] epoch 1 step 2 took 0.20 s",
        "[train] epoch 1 step 3 took 0.10 s",
    )
    run = parse(log, name="mine", log_format=STEP_S)
    assert run.dialect == "log-format" and run.status == "complete"
    assert [(e.index, list(e.step_s), list(e.step_numbers)) for e in run.epochs] == [
        (1, [0.5, 0.25], [1, 2]),
        (2, [0.3, 0.2, 0.1], [1, 2, 3]),
    ]
    assert run.problems == []
    assert run.extra["log_format"] == {"pattern": STEP_S, "matched_lines": 5}


def test_without_an_epoch_group_the_log_is_one_epoch_numbered_by_position() -> None:
    log = _log("it 7 0.5", "it 8 0.25", "it 9 0.125")
    run = parse(log, log_format=r"it \d+ (?P<step_s>[0-9.]+)")
    assert len(run.epochs) == 1
    assert list(run.epochs[0].step_s) == [0.5, 0.25, 0.125]
    assert list(run.epochs[0].step_numbers) == [1, 2, 3]


def test_timestamps_give_the_differences_as_step_times_and_are_kept_as_stamps() -> None:
    log = _log("step done at 100.0", "step done at 100.5", "step done at 101.25", "step done at 102.0")
    run = parse(log, log_format=STAMP)
    assert run.status == "complete"
    assert [list(e.step_s) for e in run.epochs] == [[0.5, 0.75, 0.75]]
    assert list(run.real_time) == [100.0, 100.5, 101.25, 102.0]
    assert run.largest_real_time_delta == 2.0


def test_timestamps_start_a_new_clock_in_each_epoch() -> None:
    # The time between epoch 1's last step and epoch 2's first stamp holds validation: not a step.
    log = _log("e1 t=10.0", "e1 t=11.0", "e1 t=12.5", "e2 t=20.0", "e2 t=21.0")
    run = parse(log, log_format=r"e(?P<epoch>\d+) t=(?P<timestamp>[0-9.]+)")
    assert [(e.index, list(e.step_s), list(e.real_time)) for e in run.epochs] == [
        (1, [1.0, 1.5], [10.0, 11.0, 12.5]),
        (2, [1.0], [20.0, 21.0]),
    ]


def test_with_step_s_and_timestamp_the_step_time_is_read_and_the_stamp_kept() -> None:
    log = _log("1700000000.0 step 0.4", "1700000009.0 step 0.5")
    run = parse(log, log_format=r"(?P<timestamp>[0-9.]+) step (?P<step_s>[0-9.]+)")
    assert list(run.epochs[0].step_s) == [0.4, 0.5]
    assert list(run.real_time) == [1_700_000_000.0, 1_700_000_009.0]


def test_a_log_format_wins_over_the_sniffed_dialects() -> None:
    log = _log(
        "Epoch 1/1",
        "1 step training time: 9.0s",
        "2 step training time: 9.0s",
        "3 step training time: 9.0s",
        "mine 0.5",
        "Epoch time: 27.0",
    )
    assert parse(log).dialect == "cloud-ml"
    run = parse(log, log_format=r"^mine (?P<step_s>[0-9.]+)$")
    assert run.dialect == "log-format"
    assert [list(e.step_s) for e in run.epochs] == [[0.5]]


def test_crlf_line_ends_and_lines_split_across_chunks_are_read_with_their_line_numbers() -> None:
    log = b"header\r\nstep 0.5\r\nstep oops\r\nstep 0.25\r\n"
    chunks = [log[i : i + 5] for i in range(0, len(log), 5)]
    run = parse(chunks, log_format=r"^step (?P<step_s>\S+)$")
    assert list(run.epochs[0].step_s) == [0.5, 0.25]
    assert [(p.code, p.line) for p in run.problems] == [("bad-value", 3)]


# ---- problems --------------------------------------------------------------------------------------


def test_a_log_the_pattern_never_matches_says_so_and_why_there_are_no_timings() -> None:
    run = parse(_log("Epoch 1/1", "1 step training time: 0.5s"), log_format=STEP_S)
    assert run.status == "unreadable"
    assert [(p.code, p.severity) for p in run.problems] == [("no-match", "error")]
    assert run.failure_reason == "the log_format pattern matched no line of the log"
    assert run.epochs == []
    record = run.to_record()
    assert record["status"] == "unreadable" and "matched no line" in record["failure_reason"]


def test_an_empty_log_is_empty_not_unmatched() -> None:
    run = parse(b"", log_format=STEP_S)
    assert run.status == "empty"
    assert [p.code for p in run.problems] == ["empty"]


def test_a_value_that_is_not_a_number_is_a_problem_with_its_line_and_the_rest_is_read() -> None:
    log = _log(
        "[train] epoch 0 step 1 took 0.50 s",
        "[train] epoch 0 step 2 took fast s",
        "[train] epoch 0 step 3 took 0.25 s",
    )
    run = parse(log, log_format=STEP_S)
    assert run.status == "complete"
    assert list(run.epochs[0].step_s) == [0.5, 0.25]
    assert list(run.epochs[0].step_numbers) == [1, 3]
    ((code, message, line, severity),) = [(p.code, p.message, p.line, p.severity) for p in run.problems]
    assert (code, line, severity) == ("bad-value", 2, "warning")
    assert "step_s 'fast' is not a number" in message


def test_a_step_number_that_is_not_an_integer_keeps_the_step_numbered_by_position() -> None:
    log = _log("step 1 0.5", "step two 0.25")
    run = parse(log, log_format=r"step (?P<step>\S+) (?P<step_s>[0-9.]+)")
    assert list(run.epochs[0].step_s) == [0.5, 0.25]
    assert list(run.epochs[0].step_numbers) == [1, 2]
    assert [(p.code, p.line) for p in run.problems] == [("bad-value", 2)]


def test_absurd_values_are_dropped_as_in_the_other_dialects() -> None:
    log = _log("t -0.5", "t nan", "t 0.5", "at 10", "at 9", "at 9.5")
    run = parse(log, log_format=r"^(?:t (?P<step_s>\S+)|at (?P<timestamp>\S+))$")
    assert list(run.epochs[0].step_s) == [0.5, 0.5]
    assert [(p.code, p.line) for p in run.problems] == [
        ("absurd-value", 1),
        ("absurd-value", 2),
        ("absurd-value", 5),
    ]


def test_matched_lines_without_any_step_time_are_no_training_with_the_reason() -> None:
    run = parse(_log("step done at 5.0"), log_format=STAMP)
    assert run.status == "failed"
    assert [p.code for p in run.problems] == ["no-training"]
    assert (
        run.failure_reason is not None and "matched 1 line(s) but none gave a step time" in run.failure_reason
    )


def test_a_pattern_that_misreads_every_line_lists_a_bounded_number_of_problems() -> None:
    log = _log(*(f"step x{i}" for i in range(MAX_PROBLEMS_PER_CODE + 50)))
    run = parse(log, log_format=r"step (?P<step_s>\S+)")
    listed = [p for p in run.problems if p.code == "bad-value"]
    assert len(listed) == MAX_PROBLEMS_PER_CODE + 1
    assert listed[0].line is None and "50 more lines" in listed[0].message


# ---- downstream ------------------------------------------------------------------------------------


def test_a_log_format_run_round_trips_its_record_and_yields_the_seed_artefacts() -> None:
    log = _log(*(f"[train] epoch {e} step {s} took 0.{s}5 s" for e in (0, 1) for s in range(1, 5)))
    run = parse(log, name="demo-20260101-000000-p3-1-64-e0", log_format=STEP_S)
    again = RunTimings.from_record(run.to_record())
    assert [list(e.step_s) for e in again.epochs] == [list(e.step_s) for e in run.epochs]
    files = run_artefacts(run)
    assert "execution-times/p3-1/64/e0.json" in files
    assert "execution-times/p3-1/64/e0.summary" in files
