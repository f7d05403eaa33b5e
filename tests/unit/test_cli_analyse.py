"""`trainsweep parse`, `summary` and `import` through the real typer app."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.artefacts import run_record_bytes
from trainsweep.cli import app
from trainsweep.logs import parse
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.summary import dumps_seed_json, format_seed_summary, seed_json, seed_summary

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


# ---- through the parser ---------------------------------------------------------------------------


def test_parse_prints_the_run_record_with_the_cell_from_the_name(runner: CliRunner, real_data: Path) -> None:
    log = real_data / FCN / "logs/result-p2-8-512-e1.txt"
    result = runner.invoke(app, ["parse", str(log)])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kind"] == "trainsweep.run"
    assert (record["name"], record["computing_system"], record["batch_size"], record["run_index"]) == (
        "result-p2-8-512-e1",
        "p2-8",
        512,
        1,
    )
    reference = json.loads((real_data / FCN / "execution-times/p2-8/512/e1.json").read_text())
    assert record["epochs"][1]["step_s"] == list(reference["epochs"]["2"]["steps"].values())
    assert result.stdout_bytes == run_record_bytes(parse(log))  # streamed, the bytes of runs/<name>.json


def test_parse_options_override_what_the_name_says(
    runner: CliRunner, tmp_path: Path, real_data: Path
) -> None:
    log = tmp_path / "training.log"
    log.write_bytes((real_data / FCN / "logs/result-p2-8-512-e1.txt").read_bytes())
    result = runner.invoke(
        app, ["parse", str(log), "--vmtype", "g4dn-1", "--batch-size", "512", "--run", "7"]
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert (record["name"], record["computing_system"], record["batch_size"], record["run_index"]) == (
        "training",
        "g4dn-1",
        512,
        7,
    )


def test_summary_of_a_log(runner: CliRunner, real_data: Path) -> None:
    log = real_data / MNIST / "logs/result-p3-1-512-e3.txt"
    result = runner.invoke(app, ["summary", str(log)])
    assert result.exit_code == 0, result.output
    assert result.stdout == seed_summary(parse(log))
    assert result.stdout.startswith("Model save time: -1.000000\n")
    original = runner.invoke(app, ["summary", str(log), "--original"])
    assert original.exit_code == 0, original.output
    assert original.stdout == format_seed_summary(seed_json(parse(log)), original=True)


def test_import_exits_0_and_lists_the_problems_when_some_files_are_bad(
    runner: CliRunner, tmp_path: Path, real_data: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "result-p2-8-512-e1.txt").write_bytes(
        (real_data / FCN / "logs/result-p2-8-512-e1.txt").read_bytes()
    )
    (src / "result-p2-8-512-e2.txt").write_bytes(b"\x00\x01\x02 not a log \xff")
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["import", str(src), "--out", str(out), "--workers", "1"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "log files processed" in result.stdout
    assert "Problems by kind" in result.stdout
    assert "Errors" in result.stdout and "result-p2-8-512-e2.txt" in result.stdout
    assert (out / "execution-times/p2-8/512/e1.json").is_file()
    assert json.loads((out / "quality.json").read_text())["summary"]["files"] == 2


def test_summary_of_a_failed_log_reports_the_problem_on_stderr(runner: CliRunner, real_data: Path) -> None:
    log = real_data / "cloud-ML/_history/7398e0c/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"
    result = runner.invoke(app, ["summary", str(log / "logs/result-g4dn-4-256-e1.txt")])
    assert result.exit_code == 0, result.output
    assert "error:" in result.stderr
    assert result.stdout.startswith("Model save time: -1.000000\n")
    assert "  Number of steps: 0.000000\n" in result.stdout


# ---- the printed run record is json.dumps's text of the whole record, byte for byte ----------------

GOLDEN_LOGS = [
    f"{FCN}/logs/result-p2-8-512-e1.txt",  # Python 2 Keras, a step line per step
    f"{MNIST}/logs/result-p3-1-256-e0.txt",  # tf.keras, accuracy after "Epoch time:"
    "cloud-ML/cnn-mnist/mnist-logs/p3.2xlarge/result-1-256-e1.out",  # EC2: a "Real time" per step
    "cloud-ML/resnet50-cifar/experimental-results/2020-07-CIFAR-on-ec2/logs/result-p2-1-2048-e0.txt",
    "cloud-ML/_history/8078c07/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker/logs/"
    "result-p2-1-256-e1.txt",  # begins mid-epoch
    "cloud-ML/_history/7398e0c/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker/logs/"
    "result-g4dn-4-256-e1.txt",  # a failed job
    "high-res-distributed/mo833-trabalho/experiment_results/c5x/TEST_NODE-TEST_EXPERIMENT_ID-1625080072.5986068.out",
]


def _dict_based_record(log: Path) -> bytes:
    """The record as it was written before streaming: the whole dict, then json.dumps (no jsonstream)."""
    from trainsweep.artefacts import _json_safe

    return (json.dumps(_json_safe(parse(log).to_record()), indent=1, allow_nan=False) + "\n").encode()


@pytest.mark.parametrize("relative", GOLDEN_LOGS, ids=lambda p: Path(p).name)
def test_parse_prints_the_json_dumps_bytes_of_the_record(
    runner: CliRunner, real_data: Path, relative: str
) -> None:
    log = real_data / relative
    result = runner.invoke(app, ["parse", str(log)])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == _dict_based_record(log)


def test_parse_prints_step_times_python_writes_with_an_exponent_as_json_dumps_does(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Among thousands of ordinary step times (encoded in C), those Python writes with an exponent
    (1e-05, which orjson would write 0.00001) keep json.dumps's text."""
    odd = {7: "0.00001", 2_000: "0.0001", 2_999: "0.00009"}  # orjson: 0.00001, 0.0001, 0.00009
    lines = ["Initialization time 0.5", "Epoch 1/1", "Real time: 1600000000.0"]
    lines += [f"{s} step training time: {odd.get(s, f'{0.25 + s * 1e-4:.6f}')}s" for s in range(1, 3_001)]
    lines += ["Validation time: 0.2s", "Real time: 1600000900.0", "Epoch time: 900.0s"]
    log = tmp_path / "result-p3-1-256-e0.txt"
    log.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["parse", str(log)])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == _dict_based_record(log)
    text = result.stdout
    for written in ("1e-05", "0.0001", "9e-05"):
        assert f"\n    {written},\n" in text, written
    assert json.loads(text)["epochs"][0]["step_s"][6] == 1e-05
