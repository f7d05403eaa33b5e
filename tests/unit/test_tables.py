"""``sweep.parquet`` and ``runs.parquet``: typed tables beside ``sweep.csv`` for notebooks
(``trainsweep import``, ``trainsweep report`` and every download of a sweep's results)."""

from __future__ import annotations

import json
import shutil
from array import array
from pathlib import Path
from typing import Any

import boto3
import pandas as pd
import pytest
from moto import mock_aws
from typer.testing import CliRunner

import trainsweep
from trainsweep import layout
from trainsweep.aws import sweeps
from trainsweep.cli import app
from trainsweep.cost.metrics import CSV_COLUMNS
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.tables import STEP_COLUMNS, steps_frame

ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"
MNIST = REAL_DATA / "cloud-ML/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MNIST seed experiment's logs through ``trainsweep import`` (the CLI); its output folder."""
    work = tmp_path_factory.mktemp("tables")
    shutil.copytree(MNIST / "logs", work / "src" / "logs")
    out = work / "out"
    result = CliRunner().invoke(app, ["import", str(work / "src"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return out


def _records(root: Path) -> dict[str, dict[str, Any]]:
    docs = (json.loads(p.read_text()) for p in sorted((root / layout.RUNS_DIR).glob("*.json")))
    return {d["name"]: d for d in docs}


def test_an_import_writes_sweep_parquet_with_the_csv_columns_typed(imported: Path) -> None:
    table = pd.read_parquet(imported / layout.SWEEP_PARQUET)
    assert list(table.columns) == list(CSV_COLUMNS)
    pd.testing.assert_frame_equal(table, trainsweep.load(imported).table)
    assert table["batch_size"].dtype == "Int64"
    assert table["step_time_s"].dtype == "float64"
    assert pd.api.types.is_string_dtype(table["instance_type"])
    assert set(table["batch_size"]) == {256, 512, 1024, 2048}


def test_an_import_writes_runs_parquet_with_every_step_of_every_run(imported: Path) -> None:
    steps = pd.read_parquet(imported / layout.RUNS_PARQUET)
    assert list(steps.columns) == list(STEP_COLUMNS)
    records = _records(imported)
    assert set(steps["run"]) == set(records)
    for name, record in records.items():
        mine = steps[steps["run"] == name]
        logged = [
            (e["index"], n, s)
            for e in record["epochs"]
            for n, s in zip(e["step_numbers"], e["step_s"], strict=True)
        ]
        assert list(zip(mine["epoch"], mine["step"], mine["step_time_s"], strict=True)) == logged, name
        assert set(mine["batch_size"]) == {record["batch_size"]}
    assert set(steps["instance_type"]) == {"ml.p3.2xlarge"}
    assert steps["data_wait_s"].isna().all()  # the seed logs do not split a step


def test_runs_parquet_carries_data_wait_and_compute_where_the_log_splits_the_step() -> None:
    split = Epoch(
        1,
        step_s=array("d", [0.5, 0.25]),
        step_numbers=range(1, 3),
        data_wait_s=array("d", [0.125, 0.0625]),
        compute_s=array("d", [0.375, 0.1875]),
    )
    plain = Epoch(2, step_s=array("d", [0.3]), step_numbers=range(1, 2))
    run = RunTimings(name="job-a", batch_size=64, epochs=[split, plain])
    run.header.instance_type = "ml.g5.xlarge"
    frame = steps_frame([run, RunTimings(name="job-b")])
    assert frame["data_wait_s"].tolist()[:2] == [0.125, 0.0625]
    assert frame["compute_s"].tolist()[:2] == [0.375, 0.1875]
    assert frame["data_wait_s"].isna().tolist() == [False, False, True]
    assert frame["epoch"].tolist() == [1, 1, 2]
    assert frame["instance_type"].tolist() == ["ml.g5.xlarge"] * 3
    assert frame["batch_size"].dtype == "Int64"
    assert steps_frame([]).columns.tolist() == list(STEP_COLUMNS)


def test_a_downloaded_sweep_gets_both_tables_from_its_results(imported: Path, tmp_path: Path) -> None:
    sweep_id = "demo-20260101-000000"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        for p in sorted(imported.rglob("*")):
            rel = p.relative_to(imported).as_posix()
            if p.is_file() and not rel.endswith(".parquet"):  # the Lambda functions write none
                s3.put_object(Bucket="results", Key=layout.results_key(sweep_id, rel), Body=p.read_bytes())
        files = sweeps.download_sweep(s3, "results", sweep_id, tmp_path / sweep_id)
    results = tmp_path / sweep_id / layout.RESULTS_DIR
    assert {results / layout.SWEEP_PARQUET, results / layout.RUNS_PARQUET} <= set(files)
    for name in (layout.SWEEP_PARQUET, layout.RUNS_PARQUET):
        pd.testing.assert_frame_equal(pd.read_parquet(results / name), pd.read_parquet(imported / name))


def test_trainsweep_report_rewrites_the_tables_with_the_csv(imported: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(imported, folder)
    (folder / layout.SWEEP_PARQUET).unlink()
    (folder / layout.RUNS_PARQUET).unlink()
    result = CliRunner().invoke(app, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(
        pd.read_parquet(folder / layout.SWEEP_PARQUET), trainsweep.load(folder).table
    )
    assert len(pd.read_parquet(folder / layout.RUNS_PARQUET)) == len(
        pd.read_parquet(imported / layout.RUNS_PARQUET)
    )
