"""The schema-versioned run record."""

from __future__ import annotations

from array import array

import pytest

from trainsweep.logs.model import Epoch, RecordVersionError, RunTimings


def _run() -> RunTimings:
    e = Epoch(1, array("d", [2.5, 0.25, 0.26]), array("l", [1, 2, 3]), validation_s=0.5, epoch_s=3.6)
    return RunTimings("result-p3-1-256-e0", dialect="x", computing_system="p3-1", batch_size=256, epochs=[e])


def test_a_run_record_reads_back_equal():
    run = _run()
    run.add_problem("odd", "something odd", line=3)
    back = RunTimings.from_record(run.to_record())
    assert back.to_record() == run.to_record()
    assert back.flat_steps() == array("d", [2.5, 0.25, 0.26])


def test_a_record_of_an_unknown_schema_version_is_rejected():
    rec = _run().to_record()
    rec["schema_version"] = 99
    with pytest.raises(RecordVersionError, match="99"):
        RunTimings.from_record(rec)


def test_non_finite_scalars_are_written_as_null():
    run = _run()
    run.total_s = float("nan")
    assert run.to_record()["total_s"] is None
