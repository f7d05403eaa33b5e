"""The dialect table (``trainsweep.logs.dialects``): every reader has one signature, the run's dialect is
the reader with the most steps (a tie to the lower precedence), and a reader added to the table is read
by ``parse`` with no other change."""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import ClassVar

import pytest

from trainsweep.logs import dialects, mllog, parse, resume
from trainsweep.logs.cloudml import CloudMLReader
from trainsweep.logs.limits import ProblemLog
from trainsweep.logs.mlperf import MllogReader
from trainsweep.logs.mo833 import Mo833Reader
from trainsweep.logs.model import Epoch, Problem, RunTimings


def test_the_table_holds_each_built_in_dialect_once_with_its_own_precedence() -> None:
    names = [d.name for d in dialects.DIALECTS]
    assert sorted(names) == ["cloud-ml", "mllog", "mo833"]
    assert len({d.precedence for d in dialects.DIALECTS}) == len(dialects.DIALECTS)
    assert [type(r) for r in dialects.readers()] == list(dialects.DIALECTS)


class _Read:
    """A finished reader that read ``steps`` steps (None: nothing of its dialect)."""

    def __init__(self, name: str, precedence: int, steps: int | None) -> None:
        self.name, self.precedence, self.steps = name, precedence, steps

    def steps_read(self) -> int | None:
        return self.steps


@pytest.mark.parametrize(
    ("read", "chosen"),
    [
        ([("a", 0, 5), ("b", 1, 9)], "b"),  # the most steps, whatever the precedence
        ([("a", 1, 9), ("b", 0, 9)], "b"),  # a tie: the lower precedence
        ([("a", 0, None), ("b", 1, 0)], "b"),  # recognised lines without a step beat nothing
        ([("a", 0, None), ("b", 1, None)], None),
    ],
)
def test_the_run_is_read_in_the_dialect_with_the_most_steps_then_the_lowest_precedence(
    read: list[tuple[str, int, int | None]], chosen: str | None
) -> None:
    found = dialects.choose([_Read(*r) for r in read])  # type: ignore[list-item]
    assert (found.name if found is not None else None) == chosen


def _seed_and_mllog_log(seed_steps: int, mllog_steps: int) -> bytes:
    lines = ["Epoch 1/1"] + [f"{i} step training time: 0.5s" for i in range(1, seed_steps + 1)]
    lines += ["Epoch time: 9.0s"]
    for i in range(1, mllog_steps + 1):
        rec = {"key": mllog.STEP, "value": {"step": i, "step_s": 0.25}, "metadata": {"epoch_num": 1}}
        lines.append(mllog.TOKEN + " " + json.dumps(rec))
    return ("\n".join(lines) + "\n").encode()


def test_a_log_with_as_many_mllog_steps_as_seed_lines_is_read_from_its_mllog_events() -> None:
    run = parse(_seed_and_mllog_log(4, 4), name="both")
    assert run.dialect == "mllog" and list(run.epochs[0].step_s) == [0.25] * 4


def test_a_log_with_more_seed_steps_than_mllog_steps_is_read_from_its_seed_lines() -> None:
    run = parse(_seed_and_mllog_log(5, 4), name="both")
    assert run.dialect == "cloud-ml" and list(run.epochs[0].step_s) == [0.5] * 5


class CsvStepsReader:
    """A dialect written for this test: ``step,<n>,<seconds>`` lines, one epoch."""

    name: ClassVar[str] = "csv-steps"
    precedence: ClassVar[int] = 3
    _LINE = re.compile(rb"\nstep,(\d+),([^\n]*)")

    def __init__(self) -> None:
        self.problems = ProblemLog()
        self.epoch = Epoch(index=1)
        self.lines = 0

    def feed(self, region: bytes, newlines_before: int) -> None:
        for m in self._LINE.finditer(region):
            self.lines += 1
            line = newlines_before + region.count(b"\n", 0, m.start() + 1)
            try:
                seconds = float(m.group(2))
            except ValueError:
                self.problems.add("bad-line", f"step {int(m.group(1))} has no time", line)
                continue
            self.epoch.step_s.append(seconds)
            assert isinstance(self.epoch.step_numbers, array)
            self.epoch.step_numbers.append(int(m.group(1)))

    def finish(self) -> None:
        pass

    def steps_read(self) -> int | None:
        return self.epoch.steps if self.lines else None

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        run.dialect = self.name
        run.epochs = [self.epoch]

    def check(self, run: RunTimings) -> bool:
        return False


def test_a_dialect_added_to_the_table_is_read_by_parse_with_its_problems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dialects, "DIALECTS", (*dialects.DIALECTS, CsvStepsReader))
    log = b"header\nstep,1,0.5\nstep,2,oops\nstep,3,0.25\n"
    run = parse(log, name="csv")
    assert run.dialect == "csv-steps"
    assert list(run.epochs[0].step_s) == [0.5, 0.25] and list(run.epochs[0].step_numbers) == [1, 3]
    assert Problem("bad-line", "step 2 has no time", 3, "warning") in run.problems


def test_every_built_in_reader_lists_its_problems_as_problem_values() -> None:
    log = b"[MO833] Rank,0,Epoch,0,Iteration,0,It. time,x\n:::MLLOG {not json\n1 step training time: 0.1s\n"
    for reader in (CloudMLReader(), Mo833Reader(), MllogReader()):
        reader.feed(b"\n" + log, 0)
        reader.finish()
        assert all(type(p) is Problem for p in reader.problems)
    run = parse(log, name="bad")
    assert {(p.code, p.line) for p in run.problems} >= {("bad-line", 1), ("bad-mllog", 2)}


def test_a_parse_state_of_the_previous_format_is_parsed_again_from_the_start() -> None:
    session = resume.start("run", None)
    session.feed(b"Epoch 1/2\n1 step training time: 0.5s\n")
    header, _, blob = resume.dump(session, b"", "run", None).partition(b"\n")
    old = json.loads(header) | {"format": 1}
    loaded, why = resume.load(json.dumps(old).encode() + b"\n" + blob, "run", None)
    assert loaded is None and "another version of the parser" in why
