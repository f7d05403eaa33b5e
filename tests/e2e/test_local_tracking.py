"""End to end: ``trainsweep run SPEC --local`` with ``tracking`` pointing at a real MLflow tracking server
(``mlflow server`` on a loopback port, started by tests/conftest.py): at the end of the sweep its cells are
runs in the spec's experiment, checked through MLflow's own client as a user would see them in its UI."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

from .conftest import write_mnist, write_spec

pytestmark = pytest.mark.slow
mlflow = pytest.importorskip("mlflow", reason="the mlflow extra (requirements.txt installs it)")


def test_a_local_sweep_with_tracking_lands_in_mlflow(tmp_path: Path, mlflow_tracking_uri: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_mnist(data / "mnist.npz", train=64, test=32)
    tracking = {"mlflow": mlflow_tracking_uri, "experiment": "e2e-tracking"}
    spec = write_spec(tmp_path, data, name="tracked", batch_sizes=[16, 32], tracking=tracking)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (sweep,) = [d for d in out.iterdir() if d.is_dir()]
    assert f"Exporting sweep {sweep.name} to MLflow at {mlflow_tracking_uri}" in result.stderr

    client = mlflow.MlflowClient(tracking_uri=mlflow_tracking_uri)
    experiment = client.get_experiment_by_name("e2e-tracking")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("trainsweep.kind") == "sweep"]
    assert parent.data.tags["trainsweep.sweep"] == sweep.name
    assert parent.info.status == "FINISHED"
    assert "trainsweep.recommendation.pick" in parent.data.tags
    parent_files = {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {layout.REPORT_HTML, layout.SWEEP_CSV, layout.SWEEP_JSON} <= parent_files

    children = {int(r.data.params["batch_size"]): r for r in runs if r is not parent}
    assert sorted(children) == [16, 32]
    for batch_size, cell in children.items():
        assert cell.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert cell.data.params["instance_type"] == "local"
        assert cell.data.tags["trainsweep.status"] == "ok", (batch_size, cell.data.tags)
        assert cell.info.status == "FINISHED"
        assert cell.data.metrics["step_time_s"] > 0
        assert cell.data.metrics["samples_per_s"] > 0
        records = client.list_artifacts(cell.info.run_id, layout.RUNS_DIR)
        assert len(records) == 1 and records[0].path.endswith(".json")
