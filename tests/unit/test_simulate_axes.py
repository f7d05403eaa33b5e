"""``trainsweep simulate`` over axes: each (instance type, batch size, setting) is a configuration, a
packed job scans every setting's batch sizes on one instance, and the picks name the setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.unit.axis_logs import (
    EPOCHS,
    G5,
    G6,
    REPETITIONS,
    time_to_train,
    write_axis_logs,
    write_long_axis_logs,
)
from trainsweep.cli import app

runner = CliRunner()


def _spec(tmp_path: Path, **fields: object) -> Path:
    spec = {
        "name": "sim-axes",
        "workload": {"model": "mnist-cnn", "epochs": 2},
        "axes": {"dtype": ["float32", "bfloat16"]},
        "instance_types": [G5, G6],
        "batch_sizes": [256, 512],
        "repetitions": 1,
        "packing": "per-instance",
        **fields,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _simulate(*args: str) -> dict:
    result = runner.invoke(app, ["simulate", *args, "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_axis_logs(tmp_path_factory.mktemp("axes"))


def test_each_setting_is_a_configuration_and_a_packed_job_scans_them_all(tmp_path: Path, logs: Path) -> None:
    out = _simulate(str(_spec(tmp_path)), "--from", str(logs))
    # one packed job per instance type runs the first repetition of every (setting, batch size)
    assert out["strategy"]["jobs"] == 2 and out["strategy"]["runs"] == len(EPOCHS)
    assert out["exhaustive"]["jobs"] == len(EPOCHS) * REPETITIONS
    fastest = min(EPOCHS, key=lambda c: time_to_train(*c))
    truth = out["truth"]["fastest"]
    assert (truth["instance_type"], truth["axes"]["dtype"], truth["batch_size"]) == fastest
    assert out["picks"]["fastest"]["axes"] == truth["axes"] and out["regret_time"] == pytest.approx(0.0)
    assert not out["cells_without_logs"] and not out["logs_unused"] and not out["logs_outside_spec"]


def test_a_setting_without_logs_is_named_with_its_axes(tmp_path: Path, logs: Path) -> None:
    spec = _spec(tmp_path, axes={"dtype": ["float32", "bfloat16", "float16"]})
    out = _simulate(str(spec), "--from", str(logs))
    missing = {(c["instance_type"], c["axes"]["dtype"], c["batch_size"]) for c in out["cells_without_logs"]}
    assert missing == {(t, "float16", b) for t in (G5, G6) for b in (256, 512)}


def test_a_spec_without_the_logs_axes_pools_them_and_says_so(tmp_path: Path, logs: Path) -> None:
    spec = _spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    del data["axes"]
    spec.write_text(yaml.safe_dump(data))
    out = _simulate(str(spec), "--from", str(logs))
    assert any("settings of axes (dtype) the spec does not sweep" in n for n in out["notes"])
    assert "axes" not in out["picks"]["fastest"]


def test_a_log_without_a_setting_of_the_specs_axes_is_not_used(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_axis_logs(src / "compile=false")  # dtype and compile
    write_axis_logs(src / "plain", slower=0.25)  # dtype only
    spec = _spec(tmp_path, axes={"dtype": ["float32", "bfloat16"], "compile": [False, True]})
    out = _simulate(str(spec), "--from", str(src))
    assert len(out["logs_unused"]) == len(EPOCHS) * REPETITIONS
    assert all(u["path"].startswith("plain/") for u in out["logs_unused"])
    assert all("does not give each of the spec's axes" in u["reason"] for u in out["logs_unused"])
    assert out["truth"]["fastest"]["axes"]["compile"] is False


def test_the_race_over_axes_is_refused(tmp_path: Path, logs: Path) -> None:
    result = runner.invoke(
        app, ["simulate", str(_spec(tmp_path)), "--from", str(logs), "--race", "--workers", "1"]
    )
    assert result.exit_code != 0
    assert "remove axes from the spec to race" in result.output


def test_early_stop_packed_over_axes_meets_the_cost_goal_on_made_up_logs(tmp_path: Path) -> None:
    """The strategy the goal names (early stop, one packed job per instance type, one repetition) over
    a dtype axis costs at most a tenth of the exhaustive grid (three full repetitions, one job each) and
    its picks' regret is within the spread between repetitions. Made-up logs: the seed logs have no axes."""
    logs = write_long_axis_logs(tmp_path / "src")
    spec = _spec(tmp_path, workload={"model": "mnist-cnn", "epochs": 20}, mode="early-stop")
    out = _simulate(str(spec), "--from", str(logs))
    assert out["exhaustive"]["runs"] == len(EPOCHS) * 3 and out["strategy"]["jobs"] == 2
    assert out["strategy"]["early_stopped_runs"] == len(EPOCHS)
    assert out["cost_ratio"] <= 0.10
    spread = out["repetition_spread"]
    assert out["regret_time"] <= spread["time_of_true_fastest"]
    assert out["regret_cost"] <= spread["cost_of_true_cheapest"]
    assert out["picks"]["fastest"]["axes"] == out["truth"]["fastest"]["axes"]
