"""The end of ``trainsweep run`` with ``tracking``: the sweep's results exported to MLflow, and a failure
to export said in MLflow's words with nothing else lost. The local sweep itself is replaced by one that
leaves real results (the MNIST seed experiment through ``trainsweep import``); the whole path runs in
tests/e2e/test_local_tracking.py."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.aws import sweeps
from trainsweep.cli import app
from trainsweep.spec import load_spec, plan_sweep
from trainsweep.sweeps import local
from trainsweep.sweeps.result import SweepEvents, SweepRun
from trainsweep.sweeps.track import export_tracked

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra (requirements.txt installs it)")

ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"
MNIST = REAL_DATA / "cloud-ML/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"
runner = CliRunner()
SWEEP_ID = "tracked-20260101-000000"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("mnist")
    shutil.copytree(MNIST / "logs", work / "src" / "logs")
    out = work / "imported"
    result = runner.invoke(app, ["import", str(work / "src"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return out


def _spec(tmp_path: Path, uri: str, **tracking: Any) -> Path:
    spec = {
        "name": "tracked",
        "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True},
        "instance_types": ["local"],
        "batch_sizes": [64],
        "tracking": {"mlflow": uri, **tracking},
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture
def finished_sweep(monkeypatch: pytest.MonkeyPatch, imported: Path) -> list[Path]:
    """``run --local`` runs no embedded AWS: its sweep ends succeeded with the imported results in its
    folder. Returns the folders it wrote."""
    written: list[Path] = []

    def run_local_sweep(spec_source: Any, *, out_root: Path, **_: Any) -> SweepRun:
        plan = plan_sweep(json.loads(Path(spec_source).read_text()), sweep_id=SWEEP_ID)
        (job,) = plan.jobs
        doc = {"schema_version": 1, "sweep_id": SWEEP_ID, "jobs": [job.to_json()]}
        view = sweeps.view_from_documents(SWEEP_ID, doc, set(job.run_names))
        dest = out_root / SWEEP_ID
        shutil.copytree(imported, dest / layout.RESULTS_DIR)  # a downloaded sweep's results/
        written.append(dest)
        return SweepRun(SWEEP_ID, dest, "SUCCEEDED", view, downloaded=True)

    monkeypatch.setattr(local, "run_local_sweep", run_local_sweep)
    return written


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_sweep_with_tracking_lands_in_the_spec_s_experiment(
    finished_sweep: list[Path], mlflow_tracking_uri: str, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, mlflow_tracking_uri)
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    progress = f"Exporting sweep {SWEEP_ID} to MLflow at {mlflow_tracking_uri} (experiment tracked)"
    assert progress in result.stderr
    assert "4 configuration run(s) created" in result.stderr
    client = mlflow.MlflowClient(tracking_uri=mlflow_tracking_uri)
    experiment = client.get_experiment_by_name("tracked")  # the spec's name: no experiment given
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("trainsweep.kind") == "sweep"]
    assert parent.data.tags["trainsweep.sweep"] == SWEEP_ID
    assert len(runs) == 5


def test_an_unreachable_tracking_server_fails_the_run_in_mlflow_s_words_and_keeps_the_results(
    finished_sweep: list[Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own back-off takes minutes
    uri = f"http://127.0.0.1:{_free_port()}"
    spec = _spec(tmp_path, uri, experiment="team-sweeps")
    result = runner.invoke(app, ["run", str(spec), "--local", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    said = " ".join(result.stderr.split())
    assert f"the MLflow export to {uri} failed: MlflowException: API request to {uri}/api/" in said
    assert "Connection refused" in said or "Max retries exceeded" in said  # MLflow's (and urllib3's) words
    (dest,) = finished_sweep
    assert f"trainsweep export mlflow {dest} --tracking-uri {uri} --experiment team-sweeps" in said
    assert (dest / layout.RESULTS_DIR / layout.SWEEP_CSV).is_file()  # nothing else lost
    assert (dest / layout.RESULTS_DIR / layout.REPORT_HTML).is_file()
    assert f"Results: {dest}/" in said


def test_a_sweep_without_a_results_table_exports_nothing_and_says_so(tmp_path: Path) -> None:
    notes: list[str] = []

    class Events(SweepEvents):
        def note(self, text: str) -> None:
            notes.append(text)

    spec = json.loads(_spec(tmp_path, "http://127.0.0.1:1").read_text())
    run = SweepRun(SWEEP_ID, tmp_path / "empty", "FAILED", None, downloaded=True)
    export_tracked(run, load_spec(spec), Events())
    assert notes == [f"nothing exported to MLflow: sweep {SWEEP_ID} has no results table"]
    assert run.tracking_error is None and run.tracked is None
