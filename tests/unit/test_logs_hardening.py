"""Issue 11 (items 4, 7, 8), through ``trainsweep parse`` as users run it: no silent wrong numbers, no
record that depends on how the bytes were chunked, bounded structure on crafted logs, exponents in C."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.logs import limits, native, parse


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def parse_cli(runner: CliRunner, tmp_path: Path, data: bytes, name: str = "result-p3-1-64-e0.txt") -> dict:
    log = tmp_path / name
    log.write_bytes(data)
    result = runner.invoke(app, ["parse", str(log)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def steps(record: dict) -> list[tuple[int, float]]:
    return [(n, t) for e in record["epochs"] for n, t in zip(e["step_numbers"], e["step_s"], strict=True)]


def problems(record: dict, code: str) -> list[int | None]:
    return [p["line"] for p in record["problems"] if p["code"] == code]


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i, k = [], 0, 0
    while i < len(data):
        out.append(data[i : i + sizes[k % len(sizes)]])
        i, k = i + sizes[k % len(sizes)], k + 1
    return out


# ---- item 4: silent wrong numbers -------------------------------------------------------------------

UNPAIRED = (
    b"Epoch 1/1\n"
    b"1 step training time: 0.5s\n"
    b"step training time: 0.7s\n"  # no step number
    b"3 step training time: \n"  # no value
    b"4 step training time: 0.25s\n"
    b"Epoch time: 2s\n"
)


@pytest.mark.parametrize("pure_python", [False, True], ids=["c-scanner", "python-path"])
def test_a_step_line_without_its_number_or_value_is_dropped_and_reported(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pure_python: bool
) -> None:
    if pure_python:
        monkeypatch.setattr(native, "scan_stretch", None)
        monkeypatch.setattr(native, "scan_stretches", None)
    record = parse_cli(runner, tmp_path, UNPAIRED)
    assert steps(record) == [(1, 0.5), (4, 0.25)]  # was: step 3 took 0.7 s (number and time of two lines)
    assert problems(record, "bad-line") == [3, 4]


def test_the_same_bytes_give_the_same_record_however_they_are_chunked(
    runner: CliRunner, tmp_path: Path
) -> None:
    whole = parse_cli(runner, tmp_path, UNPAIRED)
    for size in range(1, len(UNPAIRED) + 1):
        pieces = parse(chunked(UNPAIRED, [size]), name="result-p3-1-64-e0.txt").to_record()
        assert pieces == whole, size


@pytest.mark.parametrize(
    "value",
    [b"0x1p3s", b"1_000s", b"-0", b"-0.0s", b"0.5sextra", b"0.5 ms", b"1e", b"infinity"],
)
def test_only_plain_decimals_and_exponents_are_step_times(
    runner: CliRunner, tmp_path: Path, value: bytes
) -> None:
    record = parse_cli(
        runner, tmp_path, b"Epoch 1/1\n1 step training time: 0.5s\n2 step training time: " + value + b"\n"
    )
    assert steps(record) == [(1, 0.5)]  # was: 0.0 for 0x1p3s, 1.0 for 1_000s, -0.0 kept
    assert problems(record, "bad-line") + problems(record, "absurd-value") == [3]


def test_a_log_cut_inside_its_last_step_time_does_not_record_the_prefix(
    runner: CliRunner, tmp_path: Path
) -> None:
    full = b"Epoch 1/1\n1 step training time: 0.5s\n2 step training time: 0.0123s\n"
    cut = full[: full.index(b"0.0123") + 3]  # "2 step training time: 0.0": a growing log read mid-write
    record = parse_cli(runner, tmp_path, cut)
    assert steps(record) == [(1, 0.5)]  # was: step 2 took 0.0 s
    [problem] = [p for p in record["problems"] if p["code"] == "bad-line"]
    assert problem["line"] == 3 and "ends inside" in problem["message"]
    # The same line with its newline is read; a last line without its line end is never trusted whole.
    assert steps(parse_cli(runner, tmp_path, full)) == [(1, 0.5), (2, 0.0123)]


def test_a_cut_last_stamp_and_mo833_line_are_dropped(runner: CliRunner, tmp_path: Path) -> None:
    record = parse_cli(
        runner, tmp_path, b"Epoch 1/1\nReal time: 1592371754.45\n1 step training time: 0.5s\nReal time: 15923"
    )
    assert record["real_time"] == [1592371754.45]
    mo = (
        b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,3.5\n"
        b"[MO833] Rank,0,Epoch,0,Iteration,1,It. time,1.2"
    )
    record = parse_cli(runner, tmp_path, mo, name="mo.out")
    assert steps(record) == [(1, 1.5)] and problems(record, "bad-line") == [2]


# ---- item 7: absurd structure is flagged, not built ----------------------------------------------------


def test_millions_of_tiny_epochs_are_flagged_not_built(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_EPOCHS", 50)
    for module in ("cloudml", "mo833", "mlperf", "pattern"):
        monkeypatch.setattr(f"trainsweep.logs.{module}.MAX_EPOCHS", 50)
    data = b"".join(b"Epoch %d/9999\n1 step training time: 0.5s\nEpoch time: 1s\n" % i for i in range(1, 301))
    record = parse_cli(runner, tmp_path, data)
    assert len(record["epochs"]) == 50
    [problem] = [p for p in record["problems"] if p["code"] == "absurd-structure"]
    assert "the 250 epochs after them" in problem["message"]


def test_a_million_mo833_ranks_are_flagged_not_built(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trainsweep.logs.mo833.MAX_RANKS", 10)
    data = b"".join(
        b"[MO833] Rank,%d,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,3.5\n" % r for r in range(40)
    )
    record = parse_cli(runner, tmp_path, data, name="mo.out")
    assert sorted(int(r) for r in record["ranks"]) == list(range(1, 10))  # rank 0 is run.epochs
    assert problems(record, "absurd-structure") == list(range(11, 41))


def test_a_million_bad_lines_are_counted_not_listed(runner: CliRunner, tmp_path: Path) -> None:
    data = b"Epoch 1/1\n1 step training time: 0.5s\n" + b"step training time: 1s\n" * 5000
    record = parse_cli(runner, tmp_path, data)
    bad = [p for p in record["problems"] if p["code"] == "bad-line"]
    assert len(bad) == limits.MAX_PROBLEMS_PER_CODE + 1
    more = [p["message"] for p in bad if p["line"] is None]
    assert more == [f"{5000 - limits.MAX_PROBLEMS_PER_CODE} more bad-line problems are not listed"]


# ---- item 8: exponents stay on the fast path ----------------------------------------------------------


def test_exponent_step_times_are_read_by_the_c_scanner(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = native.scan_stretches
    assert scan is not None
    answers = []

    def spy(*args):
        answers.extend(scan(*args))
        return answers[-len(args[1]) // 2 :]

    monkeypatch.setattr(native, "scan_stretches", spy)
    data = b"Epoch 1/1\n" + b"".join(
        b"%d step training time: 1.5e-02s\nReal time: 1.6e9\n" % i for i in range(1, 50)
    )
    record = parse_cli(runner, tmp_path, data)
    read = [a for a in answers if a is not None]  # None: a stretch with nothing to read
    assert read and all(a is not False for a in read)  # was: False (the Python path) for every stretch
    assert record["epochs"][0]["step_s"] == [0.015] * 49 and record["real_time"] == [1.6e9] * 49


def test_run_level_values_are_not_read_as_their_first_digits(runner: CliRunner, tmp_path: Path) -> None:
    data = b"Epoch 1/1\n1 step training time: 0.5s\nEpoch time: 0x1p3s\nTempo do fit: 1_000\n"
    record = parse_cli(runner, tmp_path, data)
    assert record["epochs"][0]["epoch_s"] is None and record["fit_s"] is None  # were 0.0 and 1.0
    assert problems(record, "ends-early")  # the epoch is not closed by a line that was not read


def test_mllog_other_keys_are_bounded_in_number_and_size(runner: CliRunner, tmp_path: Path) -> None:
    step = (
        b':::MLLOG {"key": "trainsweep.step", "value": {"step": 1, "step_s": 0.5}, '
        b'"metadata": {"epoch_num": 1}}\n'
    )
    keys = b"".join(b':::MLLOG {"key": "k%d", "value": %d}\n' % (i, i) for i in range(150))
    big = b':::MLLOG {"key": "huge", "value": [' + b"1," * 100_000 + b"1]}\n"
    record = parse_cli(runner, tmp_path, step + big + keys, name="mllog.log")
    assert len(record["extra"]) == 100 and "huge" not in record["extra"]  # was: 151 keys, a 100,001-list
    assert steps(record) == [(1, 0.5)]
    assert len(problems(record, "absurd-structure")) == 1 + 50


def test_a_log_format_value_must_be_a_plain_number_and_the_cut_last_line_is_not_read() -> None:
    pattern = r"^step (?P<step>\d+) took (?P<step_s>\S+)$"
    run = parse(b"step 1 took 0.5\nstep 2 took 1_000\nstep 3 took 0.0", log_format=pattern)
    assert [list(e.step_s) for e in run.epochs] == [[0.5]]  # was: [0.5, 1000.0, 0.0]
    assert [(p.code, p.line) for p in run.problems if p.code == "bad-value"] == [
        ("bad-value", 2),
        ("bad-value", 3),
    ]


def test_which_problems_are_listed_does_not_depend_on_chunking(runner: CliRunner, tmp_path: Path) -> None:
    """Over 100 bad lines of one code: the listed ones are the first by line, whatever the stretches
    (a stretch's step lines are read before its stamps). Found by benchmarks/fuzz_inputs.py."""
    data = b"Epoch 1/1\n" + b"".join(b"%d step training time: 1x\nReal time: 5x\n" % i for i in range(1, 120))
    whole = parse_cli(runner, tmp_path, data)
    assert [line for line in problems(whole, "bad-line") if line][:3] == [2, 3, 4]
    for size in (7, 100, 333, 1000):
        assert parse(chunked(data, [size]), name="result-p3-1-64-e0.txt").to_record() == whole, size
