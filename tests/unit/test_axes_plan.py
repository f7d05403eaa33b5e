"""``axes:`` in the spec: refused at plan time when wrong, expanded into cells that carry their setting."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep import hyperparameters as hp
from trainsweep import layout
from trainsweep.cli import app
from trainsweep.cli.plan import EXIT_INVALID
from trainsweep.jobs import PlannedJob, jobs_of_document
from trainsweep.spec import SAGEMAKER_NAME_MAX, plan_sweep

runner = CliRunner()
NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

BUILTIN: dict[str, Any] = {
    "name": "axes-demo",
    "workload": {"model": "mnist-cnn", "epochs": 1},
    "axes": {"dtype": ["float32", "bfloat16"], "compile": [False, True]},
    "instance_types": ["ml.p4d.24xlarge", "ml.g5.xlarge"],
    "batch_sizes": [64, 128],
}
COMMAND: dict[str, Any] = {
    "name": "cmd-axes",
    "workload": {
        "command": "python train.py --batch-size {batch_size} --dtype {dtype}",
        "source_dir": "s3://bucket/src.tar.gz",
    },
    "axes": {"dtype": ["float32", "bfloat16"]},
    "instance_types": ["ml.g5.xlarge"],
    "batch_sizes": [32],
}


@pytest.fixture(autouse=True)
def _shipped_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path / "cache"))


def _plan_cli(tmp_path: Path, doc: dict[str, Any], *args: str) -> Any:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return runner.invoke(app, ["plan", str(path), *args], env={"COLUMNS": "250"})


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(base))
    for key, value in changes.items():
        if key == "workload":
            doc["workload"].update(value)
        else:
            doc[key] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        (_with(BUILTIN, axes={"batch-size": [1, 2]}), "axes.batch-size", "trainsweep's own settings"),
        (_with(BUILTIN, axes={"batch_size": [1, 2]}), "axes.batch_size", "trainsweep's own settings"),
        (_with(BUILTIN, axes={"epochs": [1, 2]}), "axes.epochs", "trainsweep's own settings"),
        (_with(BUILTIN, axes={"trainsweep-x": [1]}), "axes.trainsweep-x", "trainsweep's own settings"),
        (_with(BUILTIN, axes={"dtype": []}), "axes.dtype", "at least one value"),
        (_with(BUILTIN, axes={}), "axes", "at least one axis"),
        (_with(BUILTIN, axes={"seed": [1, "two"]}), "axes.seed", "values of one type only"),
        (_with(BUILTIN, axes={"compile": [True, 1]}), "axes.compile", "values of one type only"),
        (_with(BUILTIN, axes={"learning-rate": [0.1, 0.01]}), "axes.learning-rate", "cannot be carried"),
        (_with(BUILTIN, axes={"dtype": ["float32", "float32"]}), "axes.dtype", "listed twice"),
        (_with(BUILTIN, axes={"dtype": ["float64"]}), "axes.dtype", "must be one of float32"),
        (_with(BUILTIN, axes={"momentum": ["a", "b"]}), "axes.momentum", "does not read it"),
        (
            _with(BUILTIN, instance_types=["ml.g4dn.xlarge", "ml.g5.xlarge"]),
            "axes.dtype",
            "ml.g4dn.xlarge (7.5) would train in another precision",
        ),
        (_with(BUILTIN, axes={"seed": list(range(2501))}), "axes", "at most 10,000"),
        (_with(BUILTIN, batch_sizes="auto", axes={"seed": [1, 2]}), "axes", "batch_sizes: auto"),
        (
            _with(BUILTIN, phases=["scan", "confirm"], target={"metric": "eval_accuracy", "value": 0.9}),
            "axes",
            "phases: [scan, confirm]",
        ),
        (
            _with(BUILTIN, workload={"hyperparameters": {"seed": 3}}, axes={"seed": [1, 2]}),
            "axes.seed",
            "also set in workload.hyperparameters",
        ),
        (
            _with(BUILTIN, workload={"synthetic": True}, axes={"num_workers": [0, 2]}),
            "axes.num_workers",
            "synthetic batches are made on the device",
        ),
        (
            _with(BUILTIN, workload={"synthetic": True, "hyperparameters": {"num_workers": 2}}, axes=None),
            "workload.hyperparameters.num_workers",
            "set workload.synthetic: false and give the sweep data",
        ),
        (_with(COMMAND, axes={"dtype": ["float32"], "lr": ["1e-3"]}), "axes.lr", "command has no {lr}"),
        (_with(COMMAND, axes={"dtype": ["float32"], "gpus": [1, 2]}), "axes.gpus", "trainsweep's own"),
        (_with(COMMAND, workload={"command": "python train.py --x {nope}"}), "workload.command", "nope"),
    ],
)
def test_plan_refuses_bad_axes_naming_the_field(tmp_path: Path, doc: dict, field: str, words: str) -> None:
    result = runner.invoke(app, ["plan", str(_write(tmp_path, doc))])
    assert result.exit_code == EXIT_INVALID, result.output
    assert field in result.output and words in result.output, result.output


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _plan(doc: dict[str, Any], **kwargs: Any):  # type: ignore[no-untyped-def]
    return plan_sweep(doc, now=NOW, price=lambda t, r: 1.0, **kwargs)


def test_per_cell_jobs_carry_each_setting_in_name_record_and_hyperparameters() -> None:
    plan = _plan(BUILTIN)
    assert plan.job_count == 2 * 2 * 4  # instance types x batch sizes x settings
    names = [j.job_name for j in plan.jobs]
    assert len(set(names)) == len(names)
    job = next(j for j in plan.jobs if "bfloat16-true-p4d-8-128-e0" in j.job_name)
    assert job.axes == ({"dtype": "bfloat16", "compile": True},)
    assert job.hyperparameters[hp.DTYPE] == "bfloat16" and job.hyperparameters[hp.COMPILE] == "true"
    assert json.loads(job.hyperparameters[hp.AXES]) == [{"dtype": "bfloat16", "compile": True}]
    cell = layout.parse_job_name(job.job_name)
    assert cell is not None and (cell.vmtype, cell.batch_size, cell.run) == ("p4d-8", 128, 0)


def test_a_packed_job_scans_every_setting_and_batch_size_on_one_instance() -> None:
    plan = _plan(_with(BUILTIN, packing="per-instance", instance_types=["ml.g5.xlarge"]))
    (job,) = plan.jobs
    assert job.batch_sizes == (64, 128) * 4
    assert [s["dtype"] for s in job.axes] == ["float32"] * 4 + ["bfloat16"] * 4
    assert job.setting(job.run_names[-1]) == {"dtype": "bfloat16", "compile": True}
    assert hp.DTYPE not in job.hyperparameters  # varies by cell: only the per-cell list carries it
    assert len(json.loads(job.hyperparameters[hp.AXES])) == len(job.run_names) == 8


def test_jobs_json_with_axes_is_version_2_and_reads_back() -> None:
    plan = _plan(BUILTIN)
    doc = json.loads(plan.jobs_json())
    assert doc["schema_version"] == 2
    assert jobs_of_document(doc) == plan.jobs
    without = json.loads(_plan(_with(BUILTIN, axes=None)).jobs_json())
    assert without["schema_version"] == 1 and all("axes" not in j for j in without["jobs"])


def test_long_settings_keep_names_within_sagemakers_limit_and_unique() -> None:
    long = ["a" * 30 + str(i) for i in range(3)]
    doc = _with(COMMAND, name="x" * 40, axes={"model": long, "dtype": ["float32", "bfloat16"]})
    doc["workload"]["command"] += " --model {model}"
    plan = _plan(doc, attempt="r1")
    names = [n for j in plan.jobs for n in (j.job_name, *j.run_names)]
    assert len(set(names)) == len(names) == 2 * 6
    assert max(map(len, names)) <= SAGEMAKER_NAME_MAX
    assert {PlannedJob.from_json(j.to_json()).axes[0]["model"] for j in plan.jobs} == set(long)


def test_values_that_would_read_alike_in_a_name_get_distinct_names() -> None:
    doc = _with(COMMAND, axes={"a": ["x-y", "x"], "b": ["z", "y-z"]})
    doc["workload"]["command"] = "python train.py --a {a} --b {b}"
    names = [j.job_name for j in _plan(doc).jobs]
    assert len(set(names)) == 4


def test_a_command_gets_each_cells_values_as_its_placeholders() -> None:
    (f32, bf16) = _plan(COMMAND).jobs
    assert f32.hyperparameters["dtype"] == "float32" and bf16.hyperparameters["dtype"] == "bfloat16"


def test_plan_shows_the_settings_and_counts_them(tmp_path: Path) -> None:
    result = _plan_cli(tmp_path, _with(BUILTIN, instance_types=["ml.g5.xlarge"]))
    assert result.exit_code == 0, result.output
    assert "dtype=bfloat16 compile=true" in result.output
    assert "8 jobs (8 runs: 1 instance type × 2 batch sizes × 4 settings (dtype × compile)" in result.output


def test_spec_json_of_a_sweep_without_axes_has_no_axes_key() -> None:
    assert "axes" not in _plan(_with(BUILTIN, axes=None)).spec.to_dict()
    assert _plan(BUILTIN).spec.to_dict()["axes"] == BUILTIN["axes"]
