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
from trainsweep.cli.plan import EXIT_INVALID, EXIT_OVER_BUDGET, EXIT_TOO_LARGE
from trainsweep.cost.prices import hourly_usd
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


# ---- unbounded specs (issue 11, item 3) --------------------------------------------------------------

_HEAD = "name: t\nworkload: {model: mnist-cnn, epochs: 1}\ninstance_types: [local]\nbatch_sizes: [32]\n"


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return _HEAD + "\n".join(lines) + "\n"


@pytest.mark.timeout(60)
def test_plan_refuses_a_yaml_alias_bomb_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(_alias_bomb())  # 13 lines; 9**9 values once expanded
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "too large" in result.output or "more than 100,000 values" in result.output
    assert "YAML aliases" in result.output


def test_plan_refuses_more_aliases_than_the_budget(tmp_path: Path) -> None:
    spec = tmp_path / "aliases.yaml"
    spec.write_text(_HEAD + "x: &x 1\ny: [" + ", ".join(["*x"] * 101) + "]\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "more than 100 YAML aliases" in result.output


@pytest.mark.parametrize("name", ["deep.json", "deep.yaml"])
@pytest.mark.parametrize("depth", [40, 5000])
def test_plan_refuses_a_deeply_nested_spec_without_a_traceback(tmp_path: Path, name: str, depth: int) -> None:
    spec = tmp_path / name
    spec.write_text('{"name": ' + "[" * depth + "]" * depth + "}\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "nested deeper than 32 levels" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_plan_refuses_a_self_referring_yaml_value(tmp_path: Path) -> None:
    spec = tmp_path / "loop.yaml"
    spec.write_text(_HEAD + "x: &x [1, *x]\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "contains itself" in result.output


def test_plan_refuses_a_duplicate_key_in_json_as_in_yaml(tmp_path: Path) -> None:
    doc = json.dumps({**SPEC, "batch_sizes": [256]})
    spec = tmp_path / "dup.json"
    spec.write_text(doc[:-1] + ', "batch_sizes": [512]}')
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "key 'batch_sizes' is given twice" in result.output


@pytest.mark.parametrize("key", ["? [a, b]", "? {a: 1}"])
def test_plan_refuses_a_list_or_mapping_as_a_yaml_key_without_a_traceback(tmp_path: Path, key: str) -> None:
    # found by benchmarks/fuzz_inputs.py (seed 11): the duplicate-key check raised TypeError: unhashable
    spec = tmp_path / "key.yaml"
    spec.write_text(_HEAD + key + "\n: 1\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "a key must be a name" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_plan_refuses_a_spec_file_over_a_mebibyte(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text(_HEAD + "# " + "x" * (1024 * 1024) + "\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "bytes (at most 1,048,576)" in result.output


# ---- plans the cloud refuses (issue 11, item 5) ------------------------------------------------------


@pytest.mark.slow
def test_plan_says_run_would_refuse_a_grid_over_ten_thousand_jobs(write_spec) -> None:  # type: ignore[no-untyped-def]
    spec = write_spec(batch_sizes=list(range(1, 102)), repetitions=50)  # 2 types x 101 x 50
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_TOO_LARGE, result.output
    assert "`trainsweep run` would refuse it" in result.output
    assert "10100 cells" in result.output and "split the grid" in result.output


def test_plan_of_a_grid_that_fits_is_not_refused(write_spec) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec(batch_sizes=list(range(1, 21)), repetitions=3))])
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_plan_of_a_five_thousand_job_grid_is_not_refused(write_spec) -> None:  # type: ignore[no-untyped-def]
    # The jobs are read from S3 by the Distributed Maps: the workflow state no longer bounds the grid.
    result = runner.invoke(app, ["plan", str(write_spec(batch_sizes=list(range(1, 101)), repetitions=25))])
    assert result.exit_code == 0, result.output
    assert "5000 jobs" in result.output.replace(",", "")


@pytest.mark.parametrize("value", [".inf", "Infinity", ".nan"])
def test_an_infinite_budget_is_refused(tmp_path: Path, value: str) -> None:
    spec = tmp_path / ("spec.json" if value == "Infinity" else "spec.yaml")
    if value == "Infinity":
        spec.write_text(json.dumps(SPEC)[:-1] + ', "budget_usd": Infinity}')
    else:
        spec.write_text(yaml.safe_dump(SPEC) + f"budget_usd: {value}\n")
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "budget_usd" in result.output and "finite" in result.output


def test_run_refuses_a_grid_too_large_for_the_workflow_before_anything_starts(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\ninstance_types: [local]\n"
        f"batch_sizes: {list(range(1, 102))}\nrepetitions: 100\n"
    )
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "error: this sweep (10100 jobs, 10100 cells)" in result.output
    assert "split the grid" in result.output
    assert "the sweep's execution ended" not in result.output  # refused up front, not by PlanSweep
    assert not (tmp_path / "out").exists()


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


# ---- issue 13 item 2: a region the catalogue does not price -----------------------------------------


def test_a_budget_in_an_unpriced_region_names_the_types_and_the_prices_override(write_spec) -> None:  # type: ignore[no-untyped-def]
    spec = write_spec(region="eu-west-1", budget_usd=100)
    result = runner.invoke(app, ["plan", str(spec)], env={"COLUMNS": "300"})
    assert result.exit_code == EXIT_INVALID, result.output
    text = " ".join(result.output.split())
    assert "no price known for ml.p3.2xlarge, ml.g4dn.xlarge in eu-west-1" in text
    assert "prices: {ml.p3.2xlarge: <USD per hour>, ml.g4dn.xlarge: <USD per hour>}" in text


def test_spec_prices_price_the_plan_and_check_the_budget(write_spec) -> None:  # type: ignore[no-untyped-def]
    prices = {"ml.p3.2xlarge": 4.0, "ml.g4dn.xlarge": 1.0}
    ok = runner.invoke(
        app, ["plan", "--json", str(write_spec(region="eu-west-1", budget_usd=100, prices=prices))]
    )
    assert ok.exit_code == 0, ok.output
    plan = json.loads(ok.output)
    assert plan["hourly_usd"] == prices and plan["unpriced_instance_types"] == []
    # 2 batch sizes x 1800 s per type: (4.0 + 1.0) * 2 * 0.5 h
    assert plan["worst_case_cost_usd"] == 5.0
    over = runner.invoke(app, ["plan", str(write_spec(region="eu-west-1", budget_usd=4, prices=prices))])
    assert over.exit_code == EXIT_OVER_BUDGET, over.output
    # an override wins over the shipped catalogue in a region it prices too
    cheap = runner.invoke(app, ["plan", "--json", str(write_spec(prices={"ml.p3.2xlarge": 1.5}))])
    assert json.loads(cheap.output)["hourly_usd"]["ml.p3.2xlarge"] == 1.5


@pytest.mark.parametrize(
    ("prices", "field"),
    [
        ({"ml.g5.xlarge": 1.0}, "prices.ml.g5.xlarge"),
        ({"ml.p3.2xlarge": 0}, "prices.ml.p3.2xlarge"),
        ({"ml.p3.2xlarge": "cheap"}, "prices.ml.p3.2xlarge"),
    ],
)
def test_a_bad_prices_override_is_refused_with_its_field(write_spec, prices, field) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["plan", str(write_spec(prices=prices))], env={"COLUMNS": "300"})
    assert result.exit_code == EXIT_INVALID, result.output
    assert field in result.output


def test_plan_of_a_two_phase_sweep_shows_its_scan_and_bounds_the_confirm_phase(write_spec) -> None:  # type: ignore[no-untyped-def]
    path = write_spec(
        target={"metric": "eval_accuracy", "value": 0.9}, phases=["scan", "confirm"], confirm_top_k=1
    )
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "early-stop" in result.output and "packing per-instance" in result.output
    spec = yaml.safe_load(path.read_text())
    dearest = max(hourly_usd(t, "us-east-1") or 0.0 for t in spec["instance_types"])
    worst = dearest * spec.get("max_runtime_seconds", 3600) / 3600 * spec.get("repetitions", 1)
    assert (
        "then a confirm sweep trains the scan's best 1 configuration(s) in full mode to eval_accuracy 0.9"
        in " ".join(result.output.split())
    )
    assert f"worst case at most {worst:,.2f} USD" in " ".join(result.output.split())
