"""Paths, log text and names reach the terminal and the plots as they are (issue 11, item 2).

rich markup would read ``[/opt/ml/input/data/train]`` as a closing tag (MarkupError) and matplotlib
``$\\q$`` as mathtext (ValueError): each test goes through the command users run.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.unit.test_import import make_log
from trainsweep import layout
from trainsweep.cli import app
from trainsweep.jobs import SCHEMA_VERSION as JOBS_SCHEMA_VERSION
from trainsweep.spec import plan_sweep

runner = CliRunner()
WIDE = {"COLUMNS": "300"}  # one table row per line
FAILED_LOG = (
    b"Initialization time 0.5\nTrain on 1280 samples, validate on 100 samples\nEpoch 1/2\n"
    b"Real time: 1600000000.0\n1 step training time: 0.1s\nTraceback (most recent call last):\n"
    b'  File "train.py", line 1\nFileNotFoundError: [/opt/ml/input/data/train] is empty\n'
)


def test_import_of_a_folder_named_run_bracket_prints_the_log_text_as_it_is(tmp_path: Path) -> None:
    src = tmp_path / "run["
    src.mkdir()
    (src / "result-p3-1-256-e0.txt").write_bytes(make_log())
    (src / "result-p3-1-512-e0.txt").write_bytes(FAILED_LOG)
    out = tmp_path / "out[/x"
    result = runner.invoke(app, ["import", str(src), "--out", str(out), "--workers", "1"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "FileNotFoundError: [/opt/ml/input/data/train] is empty" in result.output
    assert f"Results in {out}" in result.output
    assert (out / layout.REPORT_HTML).is_file()
    assert (out / layout.run_record_path("result-p3-1-256-e0")).is_file()


def test_a_dollar_sign_in_a_log_name_is_text_in_the_plots_and_the_report_is_written(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    src.mkdir()
    (src / "result-p3-1-64-e0-$\\q$.txt").write_bytes(make_log())
    out = tmp_path / "out"
    result = runner.invoke(app, ["import", str(src), "--out", str(out), "--workers", "1"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output, result.output  # "note: sweep artefacts for . failed: ..."
    assert (out / layout.REPORT_HTML).is_file()
    assert list((out / layout.PLOTS_DIR).glob("*.png"))


def test_parse_names_a_missing_path_with_brackets_as_it_is() -> None:
    result = runner.invoke(app, ["parse", "no[/]such.log"])
    assert result.exit_code == 1
    assert "error: no[/]such.log does not exist" in result.output


def test_status_shows_a_failure_reason_with_brackets_as_it_is(tmp_path: Path) -> None:
    sweep = "demo-20260101-000000"
    run = f"{sweep}-local-cpu-32-e0"
    spec = {"name": "demo", "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True}}
    job = plan_sweep({**spec, "instance_types": ["local"], "batch_sizes": [32]}, sweep_id=sweep).jobs[0]
    assert job.run_names == (run,)
    reason = "FileNotFoundError: [/opt/ml/input/data/train] is empty"
    cell = {"run_name": run, "status": "failed", "reason": reason, "billable_s": 3}
    folder = tmp_path / sweep
    folder.mkdir()
    (folder / layout.JOBS_JSON).write_text(
        json.dumps(
            {
                "schema_version": JOBS_SCHEMA_VERSION,
                "sweep_id": sweep,
                "jobs": [job.to_json()],
                "cells": [cell],
            }
        )
    )
    result = runner.invoke(app, ["status", sweep, "--results", str(tmp_path)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert reason in result.output
