"""``trainsweep plan`` and ``trainsweep schema`` through the real typer app."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.cli.plan import EXIT_INVALID, EXIT_OVER_BUDGET
from trainsweep.spec import format_duration, json_schema

runner = CliRunner()

SPEC = {
    "name": "cli-demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"],
    "batch_sizes": [256, 512],
    "max_runtime_seconds": 1800,
    "max_concurrency": 3,
}


@pytest.fixture(autouse=True)
def _shipped_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Price from the shipped catalogue only, never from a user's refreshed cache."""
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def write_spec(tmp_path: Path):  # type: ignore[no-untyped-def]
    def write(name: str = "spec.yaml", **overrides: object) -> Path:
        path = tmp_path / name
        doc = {**SPEC, **overrides}
        path.write_text(json.dumps(doc) if name.endswith(".json") else yaml.safe_dump(doc))
        return path

    return write


def test_plan_shows_every_job_name_and_the_worst_case(write_spec) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec())], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    job_rows = [line for line in lines if "cli-demo-" in line and "ml." in line]
    assert len(job_rows) == 4
    for vm, bs in [("p3-1", 256), ("p3-1", 512), ("g4dn-1", 256), ("g4dn-1", 512)]:
        assert any(f"-{vm}-{bs}-e0" in row for row in job_rows)
    assert "4 jobs" in result.output
    assert "Worst-case cost:" in result.output
    assert "Worst-case time: 1h 00m (2 waves of up to 3 concurrent jobs)" in result.output


def test_plan_keeps_job_names_whole_on_a_narrow_terminal(write_spec) -> None:  # type: ignore[no-untyped-def]
    path = write_spec(name="a-rather-long-sweep-name", packing="per-instance")
    result = runner.invoke(app, ["plan", str(path), "--json"])
    doc = json.loads(result.stdout)
    narrow = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0
    # the sweep id comes from the clock: the second invocation may fall in the next second
    narrow_id = re.search(r"Sweep (\S+):", narrow.stdout).group(1)  # type: ignore[union-attr]
    for job in doc["jobs"]:
        assert job["job_name"].replace(doc["sweep_id"], narrow_id) in narrow.stdout


def test_plan_json_is_the_plan(write_spec) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec("s.json")), "--json", "--bucket", "bkt"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["job_count"] == 4
    assert doc["worst_case_seconds"] == 3600
    job = doc["jobs"][0]
    assert layout.parse_job_name(job["job_name"]) == layout.CellName("p3-1", 256, 0)
    assert job["hyperparameters"]["trainsweep-log-bucket"] == "bkt"
    prices = doc["hourly_usd"]
    expected = sum(0.5 * prices[j["instance_type"]] for j in doc["jobs"])
    assert doc["worst_case_cost_usd"] == pytest.approx(expected, abs=0.01)


def test_plan_errors_name_each_offending_field_and_exit_2(write_spec) -> None:  # type: ignore[no-untyped-def]
    path = write_spec(batch_sizes=[256, -1], instance_types=["ml.p3.2xlarg"], colour="red")
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == EXIT_INVALID
    assert "batch_sizes[1]:" in result.stderr
    assert "instance_types[0]:" in result.stderr and "ml.p3.2xlarge" in result.stderr
    assert "colour: unknown field" in result.stderr
    assert result.stdout == ""


def test_plan_of_a_missing_file_says_so(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(tmp_path / "missing.yaml")])
    assert result.exit_code == EXIT_INVALID
    assert "does not exist" in result.stderr


def test_plan_over_budget_shows_the_plan_then_refuses_with_both_numbers(write_spec) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec(budget_usd=0.5))], env={"COLUMNS": "200"})
    assert result.exit_code == EXIT_OVER_BUDGET
    assert "Worst-case cost:" in result.stdout
    assert "exceeds budget_usd 0.50 USD" in result.stderr


def test_plan_with_a_contradicting_region_points_at_region(write_spec) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec(region="eu-west-1")), "--region", "us-east-1"])
    assert result.exit_code == EXIT_INVALID
    assert "region:" in result.stderr


def test_schema_prints_the_generated_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json_schema()


def test_schema_out_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["schema", "--out", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text()) == json_schema()


@pytest.mark.parametrize(
    ("seconds", "text"), [(45, "45s"), (750, "12m 30s"), (3600, "1h 00m"), (11100, "3h 05m")]
)
def test_durations_read_naturally(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


def test_plan_warns_about_a_hyperparameter_the_built_in_workload_does_not_read(write_spec) -> None:  # type: ignore[no-untyped-def]
    # The seeds passed `file-output`; the built-in workloads ignore it: say so, do not accept it silently.
    spec = write_spec(
        workload={"model": "mnist-cnn", "epochs": 2, "hyperparameters": {"file-output": "x.txt"}}
    )
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == 0, result.output
    assert (
        "Warning: workload.hyperparameters.file-output: the built-in workload mnist-cnn does not read it"
        in (result.stderr)
    )
    doc = json.loads(runner.invoke(app, ["plan", str(spec), "--json"]).stdout)
    assert len(doc["warnings"]) == 1 and "file-output" in doc["warnings"][0]


def test_plan_does_not_warn_about_a_hyperparameter_the_built_in_workload_reads(write_spec) -> None:  # type: ignore[no-untyped-def]
    spec = write_spec(
        workload={"model": "mnist-cnn", "epochs": 2, "hyperparameters": {"learning-rate": 0.01}}
    )
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == 0, result.output
    assert "Warning" not in result.stderr


def test_version_alone_prints_the_version_and_exits_0() -> None:
    from trainsweep import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == __version__
