"""`trainsweep parse`, `summary` and `import` through the real typer app."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.artefacts import run_record_bytes
from trainsweep.cli import app
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.summary import dumps_seed_json, seed_json, seed_summary

FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
MNIST = "cloud-ML/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def make_run() -> RunTimings:
    run = RunTimings(name="result-p3-1-256-e0", computing_system="p3-1", batch_size=256, run_index=0)
    for i in range(3):
        steps = [1.5 if i == 0 else 0.1, 0.1, 0.12, 0.11]
        run.epochs.append(
            Epoch(
                i + 1, array("d", steps), array("l", range(1, 5)), validation_s=0.3, epoch_s=sum(steps) + 0.3
            )
        )
    run.total_s = 4.0
    return run


# ---- summary -----------------------------------------------------------------------------------


def test_summary_of_a_reference_seed_json_with_original_reproduces_the_reference(
    runner: CliRunner, real_data: Path
) -> None:
    ref = real_data / MNIST / "execution-times/p3-1/256/e0.json"
    result = runner.invoke(app, ["summary", str(ref), "--original"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ref.with_suffix(".summary").read_text()


def test_summary_of_a_seed_json_without_original_shows_na_for_a_missing_init(
    runner: CliRunner, real_data: Path
) -> None:
    ref = real_data / MNIST / "execution-times/p3-1/256/e0.json"  # init -1.0: the original regex failed
    result = runner.invoke(app, ["summary", str(ref)])
    assert result.exit_code == 0, result.output
    assert "Initialization time: -1.000000\n - n/a % of the total training time.\n" in result.stdout


def test_summary_of_a_run_record(runner: CliRunner, tmp_path: Path) -> None:
    record = tmp_path / "run.json"
    record.write_bytes(run_record_bytes(make_run()))
    result = runner.invoke(app, ["summary", str(record)])
    assert result.exit_code == 0, result.output
    assert result.stdout == seed_summary(make_run())


def test_summary_of_our_own_seed_json(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "e0.json"
    path.write_text(dumps_seed_json(seed_json(make_run())))
    result = runner.invoke(app, ["summary", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == seed_summary(make_run())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"kind": "trainsweep.quality"}', "not a run record"),
        ('{"kind": "trainsweep.run", "schema_version": 99, "name": "x"}', "schema version 99"),
        ('{"hello": 1}', "no 'epochs'"),
        ('{"epochs": {"1": {"steps": {"1": "fast"}}}}', "malformed seed JSON"),
    ],
    ids=["other-kind", "future-record", "unrelated-json", "bad-step-value"],
)
def test_summary_rejects_json_it_cannot_summarise_with_a_clear_error(
    runner: CliRunner, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    result = runner.invoke(app, ["summary", str(path)])
    assert result.exit_code == 1
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_summary_of_a_missing_file_says_so(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["summary", str(tmp_path / "nope.txt")])
    assert result.exit_code == 1
    assert "does not exist" in result.stderr


def test_parse_of_a_folder_points_to_import(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", str(tmp_path)])
    assert result.exit_code == 1
    assert "trainsweep import" in result.stderr


# ---- import: could not run -----------------------------------------------------------------------


def test_import_of_a_missing_folder_fails_with_a_clear_message(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "does not exist" in result.stderr
    assert not (tmp_path / "out").exists()


def test_import_of_a_file_instead_of_a_folder_fails(runner: CliRunner, tmp_path: Path) -> None:
    f = tmp_path / "result-p3-1-256-e0.txt"
    f.write_text("Epoch 1/1\n")
    result = runner.invoke(app, ["import", str(f), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "not a folder" in result.stderr


def test_import_needs_an_output_folder(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["import", str(tmp_path)])
    assert result.exit_code == 2
    assert "--out" in result.output


def test_import_of_an_empty_folder_succeeds_with_nothing_to_do(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    result = runner.invoke(app, ["import", str(tmp_path / "src"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    quality = json.loads((tmp_path / "out/quality.json").read_text())
    assert quality["summary"]["files"] == 0
