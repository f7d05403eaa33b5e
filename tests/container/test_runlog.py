"""The run log a job writes: per-step lines as the parser reads them, in one write each, echoed in order."""

from __future__ import annotations

import math
import time

import pytest

from trainsweep.logs import mllog, parse
from trainsweep.training.runlog import ECHO_HOLD_BYTES, RunLog

TIMES = [
    (0.0125, 0.0, 0.0125),
    (1e-07, 2.5e-05, 123456.789),
    (0.1 + 0.2, 1 / 3, 2.0**-30),
    (5e-324, 1.7976931348623157e308, 0.5),
    (1.7976931348623157e308, 1.7976931348623157e308, 0.5),  # finite, but their sum is not
]


@pytest.mark.parametrize("rank", [0, 3])
@pytest.mark.parametrize(("step_s", "wait_s", "compute_s"), TIMES)
def test_a_step_line_has_the_bytes_the_json_encoder_gives(
    tmp_path, monkeypatch, rank, step_s, wait_s, compute_s
):
    monkeypatch.setattr(time, "time", lambda: 1795512400.745)
    with RunLog(tmp_path / "a.log", rank=rank, echo=False) as log:
        log.step(7, 42, step_s, wait_s, compute_s, legacy=rank == 0)
    value = {"step": 42, "step_s": step_s, "data_wait_s": wait_s, "compute_s": compute_s}
    event = mllog.format_line(mllog.STEP, value, metadata={"rank": rank, "epoch_num": 7})
    legacy = [f"42 step training time: {step_s}s"] if rank == 0 else []
    assert (tmp_path / "a.log").read_text().splitlines() == [event, *legacy]


def test_a_step_time_that_is_not_a_finite_float_goes_through_the_encoder(tmp_path):
    with RunLog(tmp_path / "a.log", echo=False) as log:
        log.step(1, 1, 0, 0, 0, legacy=False)  # ints: written as the encoder writes them
        with pytest.raises(ValueError, match="not JSON compliant"):
            log.step(1, 2, math.nan, 0.0, 0.0, legacy=False)
    assert (
        '"value": {"step": 1, "step_s": 0, "data_wait_s": 0, "compute_s": 0}'
        in (tmp_path / "a.log").read_text()
    )


def test_step_lines_are_echoed_in_order_with_the_next_other_line_or_at_close(tmp_path, capsys):
    log = RunLog(tmp_path / "a.log")
    log.line("Epoch 1/1")
    for n in (1, 2, 3):
        log.step(1, n, 0.5, 0.0, 0.5, legacy=True)
    assert capsys.readouterr().out == "Epoch 1/1\n"  # steps held: no write to stdout per step
    log.line("Epoch time: 1.5s")
    echoed = capsys.readouterr().out.splitlines()
    assert [x for x in echoed if not x.startswith(mllog.TOKEN)] == [
        "1 step training time: 0.5s",
        "2 step training time: 0.5s",
        "3 step training time: 0.5s",
        "Epoch time: 1.5s",
    ]
    log.step(2, 1, 0.25, 0.0, 0.25, legacy=True)
    log.close()
    assert "1 step training time: 0.25s" in capsys.readouterr().out
    # the file has every line as it came, and the parser reads the steps back
    run = parse(tmp_path / "a.log")
    assert [list(e.step_s) for e in run.epochs if len(e.step_s)] == [[0.5, 0.5, 0.5], [0.25]]


def test_a_long_stretch_of_steps_is_echoed_in_blocks(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(time, "monotonic", lambda: 100.0)  # a fast loop: the size says when
    log = RunLog(tmp_path / "a.log")
    n = 0
    while not capsys.readouterr().out:
        n += 1
        log.step(1, n, 0.5, 0.0, 0.5, legacy=True)
    line = len(log.path.read_text()) / n
    assert ECHO_HOLD_BYTES <= n * line < ECHO_HOLD_BYTES + 2 * line
    log.close()


def test_a_slow_loop_echoes_its_steps_at_least_every_second(tmp_path, capsys, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    log = RunLog(tmp_path / "a.log")
    log.step(1, 1, 0.5, 0.0, 0.5, legacy=True)
    assert capsys.readouterr().out == ""
    clock[0] += 1.0
    log.step(1, 2, 0.5, 0.0, 0.5, legacy=True)
    out = capsys.readouterr().out
    assert "1 step training time: 0.5s" in out and "2 step training time: 0.5s" in out
    log.close()
