"""``trainsweep import`` of logs whose folder, file name or header carries a setting of the axes: the
setting becomes the run's, the logs of every setting make one sweep, and sweep.csv has a column per axis."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from typer.testing import CliRunner

from tests.unit.axis_logs import EPOCHS, REPETITIONS, seed_log, write_axis_logs
from tests.unit.conftest import _mllog_lines as mllog_lines
from trainsweep import layout
from trainsweep.cli import app
from trainsweep.logs import mllog


def _import(src: Path, out: Path) -> None:
    result = CliRunner().invoke(app, ["import", str(src), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output


def _table(root: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((root / layout.SWEEP_CSV).read_text())))


def test_folders_named_for_a_setting_make_one_sweep_with_a_column_per_axis(tmp_path: Path) -> None:
    _import(write_axis_logs(tmp_path / "src"), tmp_path / "out")
    root = tmp_path / "out" / "exp"  # the dtype=... folders are not results roots of their own
    table = _table(root)
    header = list(table[0])
    assert header[header.index("batch_size") + 1] == "dtype"
    got = {(t["instance_type"], t["dtype"], int(t["batch_size"])): int(t["runs"]) for t in table}
    assert got == {cell: REPETITIONS for cell in EPOCHS}
    record = json.loads((root / layout.run_record_path("result-g5-1-256-e0,dtype=bfloat16")).read_text())
    assert record["extra"]["trainsweep.axes"] == {"dtype": "bfloat16"}
    assert (root / "execution-times" / "dtype=bfloat16" / "g5-1" / "256" / "e0.json").is_file()
    assert (root / "execution-times" / "dtype=float32" / "g5-1" / "256" / "e0.json").is_file()


def test_a_file_name_carries_its_own_setting_and_values_are_typed(tmp_path: Path) -> None:
    logs = tmp_path / "src" / "logs"
    logs.mkdir(parents=True)
    (logs / "result-g5-1-256-e0,dtype=bfloat16,compile=true.txt").write_text(seed_log(256, (10.0, 8.0)))
    (logs / "result-g5-1-256-e0,dtype=float32,compile=false.txt").write_text(seed_log(256, (20.0, 15.0)))
    _import(tmp_path / "src", tmp_path / "out")
    table = _table(tmp_path / "out")
    assert {(t["dtype"], t["compile"], t["batch_size"]) for t in table} == {
        ("bfloat16", "true", "256"),
        ("float32", "false", "256"),
    }
    name = "result-g5-1-256-e0,dtype=bfloat16,compile=true"
    record = json.loads((tmp_path / "out" / layout.run_record_path(name)).read_text())
    assert record["extra"]["trainsweep.axes"] == {"dtype": "bfloat16", "compile": True}
    assert record["computing_system"] == "g5-1" and record["batch_size"] == 256  # read without the setting


def _container_log(dtype: str) -> bytes:
    """A trainsweep container log whose run says its setting (the ``trainsweep.axes`` event)."""
    event = mllog.format_line("trainsweep.axes", {"dtype": dtype}, metadata={"rank": 0}, time_ms=1.7e12)
    return event.encode() + b"\n" + mllog_lines()


def test_the_logs_own_setting_wins_over_its_folders_and_a_contradiction_is_flagged(tmp_path: Path) -> None:
    folder = tmp_path / "src" / "dtype=float32" / "logs"
    folder.mkdir(parents=True)
    (folder / "result-g4dn-1-64-e0.txt").write_bytes(_container_log("bfloat16"))
    _import(tmp_path / "src", tmp_path / "out")
    quality = json.loads((tmp_path / "out" / layout.QUALITY_JSON).read_text())
    (entry,) = quality["files"]
    (flag,) = [p for p in entry["problems"] if p["code"] == "axes-contradict-name"]
    assert "the log says dtype=bfloat16, its name dtype=float32" in flag["message"]
    assert [t["dtype"] for t in _table(tmp_path / "out")] == ["bfloat16"]


def test_logs_without_a_setting_import_as_before(tmp_path: Path) -> None:
    logs = tmp_path / "src" / "logs"
    logs.mkdir(parents=True)
    (logs / "result-g5-1-256-e0.txt").write_text(seed_log(256, (10.0, 8.0)))
    (logs / "dtype-notes=x.txt").write_text("not a log\n")
    _import(tmp_path / "src", tmp_path / "out")
    assert "dtype" not in _table(tmp_path / "out")[0]
    assert (tmp_path / "out" / layout.run_record_path("result-g5-1-256-e0")).is_file()
