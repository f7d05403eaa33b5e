"""``trainsweep export mlflow`` against a real MLflow tracking server (``mlflow server`` on a loopback
port with a SQLite store, started and stopped by tests/conftest.py), checked through MLflow's own client."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra (requirements.txt installs it)")

ROOT = Path(__file__).resolve().parents[2]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"
MNIST = REAL_DATA / "cloud-ML/cnn-mnist/experimental-results/2020-07-MNIST-on-sagemaker"
runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tracking_uri(mlflow_tracking_uri: str) -> str:
    """The session's MLflow tracking server (``mlflow_tracking_uri`` in tests/conftest.py)."""
    return mlflow_tracking_uri


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MNIST seed experiment through ``trainsweep import``: 4 configurations, 4 repetitions each."""
    work = tmp_path_factory.mktemp("mnist")
    shutil.copytree(MNIST / "logs", work / "src" / "logs")
    out = work / "mnist-2020-07"
    result = runner.invoke(app, ["import", str(work / "src"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return out


def _export(folder: Path, uri: str) -> None:
    result = runner.invoke(app, ["export", "mlflow", str(folder), "--tracking-uri", uri])
    assert result.exit_code == 0, result.output


def test_a_sweep_lands_as_one_parent_run_and_one_child_run_per_configuration(
    imported: Path, tracking_uri: str
) -> None:
    _export(imported, tracking_uri)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name("mnist-2020-07")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("trainsweep.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4 == len(runs) - 1
    assert parent.data.tags["trainsweep.recommendation.pick"] == "ml.p3.2xlarge/1/2048/sagemaker"
    assert "cheapest" in parent.data.tags["trainsweep.recommendation"]
    parent_files = {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {layout.REPORT_HTML, layout.SWEEP_CSV, layout.SWEEP_JSON, layout.PLOTS_DIR} <= parent_files

    by_batch = {int(r.data.params["batch_size"]): r for r in children}
    assert sorted(by_batch) == [256, 512, 1024, 2048]
    cell = by_batch[256]
    assert cell.data.params["instance_type"] == "ml.p3.2xlarge"
    assert cell.data.params["runs"] == "4"
    assert cell.info.status == "FINISHED"
    assert cell.data.tags["trainsweep.status"] == "ok"
    assert cell.data.metrics["step_time_s"] == pytest.approx(0.00645854)  # sweep.csv's row
    assert cell.data.metrics["step_time_std_s"] > 0  # the spread over the repetitions
    assert {"samples_per_s", "cost_to_train_usd", "time_to_train_s", "eval_accuracy"} <= set(
        cell.data.metrics
    )
    series = client.get_metric_history(cell.info.run_id, "epoch_time_s.rep0")
    assert [m.step for m in series] == list(range(1, len(series) + 1)) and len(series) > 1
    records = {Path(f.path).name for f in client.list_artifacts(cell.info.run_id, layout.RUNS_DIR)}
    assert records == {p.name for p in (imported / layout.RUNS_DIR).glob("result-p3-1-256-*.json")}


def test_exporting_again_duplicates_no_run_and_no_value(imported: Path, tracking_uri: str) -> None:
    _export(imported, tracking_uri)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name("mnist-2020-07")
    before = {r.info.run_id: r.data.metrics for r in client.search_runs([experiment.experiment_id])}
    histories = {rid: len(client.get_metric_history(rid, "epoch_time_s.rep0")) for rid in before}
    _export(imported, tracking_uri)
    after = {r.info.run_id: r.data.metrics for r in client.search_runs([experiment.experiment_id])}
    assert after == before
    assert {rid: len(client.get_metric_history(rid, "epoch_time_s.rep0")) for rid in after} == histories
    for rid in after:
        assert len(client.get_metric_history(rid, "step_time_s")) <= 1


def test_an_unreachable_server_is_an_error_in_mlflow_s_words(
    imported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own back-off takes minutes
    result = runner.invoke(
        app, ["export", "mlflow", str(imported), "--tracking-uri", f"http://127.0.0.1:{_free_port()}"]
    )
    assert result.exit_code == 1
    assert "MLflow export to http://127.0.0.1:" in result.output


def test_without_mlflow_the_export_says_how_to_install_it(
    imported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    result = runner.invoke(app, ["export", "mlflow", str(imported), "--tracking-uri", "http://127.0.0.1:1"])
    assert result.exit_code == 1
    assert "pip install 'trainsweep[mlflow]'" in result.output


H200_DTYPE = ROOT / "benchmarks" / "data" / "gpu-h200" / "resnet50-dtype"


def test_a_sweep_with_an_axis_lands_one_child_run_per_setting_with_its_own_runs(
    tmp_path: Path, tracking_uri: str
) -> None:
    # the built-in ResNet-50 over dtype x 3 batch sizes on an H200: the same (instance, batch size) twice
    out = tmp_path / "resnet50-dtype"
    result = runner.invoke(app, ["import", str(H200_DTYPE), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    _export(out, tracking_uri)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("resnet50-dtype").experiment_id])
    children = [r for r in runs if r.data.tags.get("trainsweep.kind") != "sweep"]
    by_key = {r.data.tags["trainsweep.cell"]: r for r in children}
    assert len(children) == 6 == len(by_key)
    bf16 = by_key["local_gpu/1/512/local/dtype=bfloat16"]
    assert bf16.data.params["dtype"] == "bfloat16"
    assert bf16.data.tags["trainsweep.mfu_note"] == "against 1 x H200 bf16 peak 989.5 TFLOPS"
    assert bf16.data.metrics["samples_per_s"] == pytest.approx(8436.01, rel=1e-4)
    fp32 = by_key["local_gpu/1/512/local/dtype=float32"]
    assert fp32.data.metrics["samples_per_s"] == pytest.approx(7248.61, rel=1e-4)
    for run in (bf16, fp32):  # each child holds its own setting's run record, not the other's
        (record,) = client.list_artifacts(run.info.run_id, layout.RUNS_DIR)
        assert run.data.params["dtype"] in Path(record.path).name
    parent = next(r for r in runs if r.data.tags.get("trainsweep.kind") == "sweep")
    assert parent.data.tags["trainsweep.recommendation.pick"] in by_key
