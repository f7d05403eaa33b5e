"""Very long logs: finished epochs' values beyond the memory budget move to disk and read back the same."""

from __future__ import annotations

import json
import pickle
from array import array
from pathlib import Path

import pytest

from trainsweep.logs import parse, spill
from trainsweep.logs.model import Epoch, JoinedStamps
from trainsweep.summary import dumps_seed_json, format_seed_summary, seed_json

LOG_SUFFIXES = (".txt", ".out", ".log")


def long_log(epochs: int = 6, steps: int = 50) -> bytes:
    lines = [b"python3 mnist_cnn.py --batch-size 64 --num-gpus 1 --epochs %d" % epochs]
    for e in range(1, epochs + 1):
        lines.append(b"Epoch %d/%d" % (e, epochs))
        for s in range(1, steps + 1):
            lines.append(b"Real time: %r" % (1592371754.0 + e * 100 + s * 0.25))
            lines.append(b"%d step training time: %rs" % (s, 0.2 + (e * steps + s) % 7 / 1000))
        lines.append(b"Validation time: 0.5s")
        lines.append(b"Epoch time: %r s" % (steps * 0.2 + 0.5))
    lines.append(b"Real time: 1592399999.5")
    return b"\n".join(lines) + b"\n"


def with_budget(monkeypatch: pytest.MonkeyPatch, budget: int, source, **kw):
    monkeypatch.setattr(spill, "MEMORY_BUDGET_BYTES", budget)
    return parse(source, **kw)


def test_values_beyond_the_budget_go_to_disk_and_read_back_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    log = long_log()
    kept = with_budget(monkeypatch, 1 << 30, log)
    # room for the first two epochs' 50 steps and 50 stamps (400 + 400 bytes each), not the third's
    spilled = with_budget(monkeypatch, 1600, log)
    assert [e.spilled for e in kept.epochs] == [False] * 6
    assert [e.spilled for e in spilled.epochs] == [False, False, True, True, True, True]
    for a, b in zip(kept.epochs, spilled.epochs, strict=True):
        assert type(b.step_s) is array and b.step_s == a.step_s and b.real_time == a.real_time
        assert b.steps == a.steps == 50 and b.stamps == a.stamps == 50
        assert b == a
    assert spilled.to_record() == kept.to_record()
    assert spilled.real_time[-1] == 1592399999.5 and spilled.real_time[150] == kept.real_time[150]
    assert spilled.real_time[-51] == kept.real_time[-51] and spilled.real_time[10:13] == kept.real_time[10:13]
    assert spilled.largest_real_time_delta == kept.largest_real_time_delta
    assert spilled.flat_steps() == kept.flat_steps()


def test_a_spilled_run_pickles_with_its_values(monkeypatch: pytest.MonkeyPatch) -> None:
    run = with_budget(monkeypatch, 0, long_log(3, 5))
    assert all(e.spilled for e in run.epochs)
    back = pickle.loads(pickle.dumps(run))
    assert not any(e.spilled for e in back.epochs)
    assert back.to_record() == run.to_record()


def test_every_real_log_reads_the_same_with_everything_on_disk(
    real_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = [p for p in sorted(real_data.rglob("*")) if p.is_file() and p.suffix in LOG_SUFFIXES]
    on_disk = 0
    for p in logs:
        kept = with_budget(monkeypatch, 1 << 30, p)
        spilled = with_budget(monkeypatch, 0, p)
        on_disk += sum(e.spilled for e in spilled.epochs)
        assert json.dumps(spilled.to_record()) == json.dumps(kept.to_record()), p
        if kept.epochs and kept.computing_system:
            a, b = seed_json(kept), seed_json(spilled)
            assert dumps_seed_json(b) == dumps_seed_json(a), p
            assert format_seed_summary(b) == format_seed_summary(a), p
    assert on_disk > 100


def test_an_epoch_reads_like_before() -> None:
    e = Epoch(1, array("d", [0.5, 0.25]), array("l", [1, 2]), validation_s=0.1, epoch_s=1.0)
    assert e.steps == 2 and e.stamps == 0 and e.real_time == [] and not e.spilled
    assert e == Epoch(1, array("d", [0.5, 0.25]), array("l", [1, 2]), validation_s=0.1, epoch_s=1.0)
    assert e != Epoch(2, array("d", [0.5, 0.25]), array("l", [1, 2]), validation_s=0.1, epoch_s=1.0)
    assert "step_s=array('d', [0.5, 0.25])" in repr(e)
    e.step_s.append(1.0)  # in memory, it is the array itself
    assert e.steps == 3
    with pytest.raises(TypeError):
        hash(e)


def test_joined_stamps_over_spilled_epochs() -> None:
    f = spill.SpillFile()
    a = Epoch(1, real_time=f.put(array("d", [1.0, 2.0])))
    b = Epoch(2, real_time=array("d", [3.0]))
    joined = JoinedStamps([a, b, [4.0, 5.0]])
    assert len(joined) == 5 and list(joined) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert joined[0] == 1.0 and joined[2] == 3.0 and joined[-1] == 5.0 and joined[-5] == 1.0
    assert joined == [1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(IndexError):
        joined[5]
    assert f.size == 16
