"""The spec's ``tracking`` field: the forms of ``tracking.mlflow`` it takes, and its refusal where the MLflow
client is missing (``trainsweep plan`` and the sweep drivers)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.cli.plan import EXIT_INVALID
from trainsweep.errors import SpecError
from trainsweep.spec import load_spec
from trainsweep.tracking import check_client, is_sagemaker_arn

runner = CliRunner()
SPEC: dict[str, Any] = {
    "name": "tracked",
    "workload": {"model": "mnist-cnn", "epochs": 1},
    "instance_types": ["ml.g4dn.xlarge"],
    "batch_sizes": [64],
}
SERVER = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/team-server"
APP = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-a1b2c3d4e5f6"


def _errors(tracking: Any) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        load_spec({**SPEC, "tracking": tracking})
    return caught.value.errors


@pytest.mark.parametrize(
    "uri",
    ["http://127.0.0.1:5000", "https://mlflow.example.com/", "file:///srv/mlruns", "databricks", SERVER, APP],
)
def test_tracking_takes_a_tracking_uri_or_a_sagemaker_mlflow_arn(uri: str) -> None:
    spec = load_spec({**SPEC, "tracking": {"mlflow": uri}})
    assert spec.tracking is not None and spec.tracking.mlflow == uri
    assert spec.tracking.experiment_name(spec.name) == "tracked"  # default: the sweep's name
    assert spec.to_dict()["tracking"] == {"mlflow": uri, "experiment": None}


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("mlflow.example.com:5000/x", "is not a tracking URI"),  # no scheme: a host is not a scheme
        ("./mlruns", "is not a tracking URI"),
        (r"C:\mlruns", "is not a tracking URI"),
        ("arn:aws:sagemaker:us-east-1:123456789012:training-job/x", "is not a SageMaker MLflow ARN"),
        ("arn:aws:sagemaker:us-east-1:1234:mlflow-tracking-server/x", "is not a SageMaker MLflow ARN"),
        ("https://me:secret@mlflow.example.com", "MLFLOW_TRACKING_USERNAME"),
    ],
)
def test_a_tracking_uri_of_no_known_form_is_refused_on_its_field(uri: str, says: str) -> None:
    ((where, message),) = _errors({"mlflow": uri})
    assert where == "tracking.mlflow" and says in message
    assert "secret" not in message


def test_tracking_needs_mlflow_and_knows_no_other_field() -> None:
    assert ("tracking", "'mlflow' is a required property") in _errors({"experiment": "x"})
    ((where, message),) = _errors({"mlflow": "http://h:1", "project": "x"})
    assert where == "tracking" and "'project' was unexpected" in message
    assert any(w == "tracking.experiment" for w, _ in _errors({"mlflow": "http://h:1", "experiment": ""}))


def test_a_spec_without_tracking_keeps_the_spec_json_it_had() -> None:
    assert "tracking" not in load_spec(SPEC).to_dict()


def test_sagemaker_arns_are_told_from_other_uris() -> None:
    assert is_sagemaker_arn(SERVER) and is_sagemaker_arn(APP)
    assert not is_sagemaker_arn("http://127.0.0.1:5000")
    assert not is_sagemaker_arn(SERVER.replace("mlflow-tracking-server", "mlflow-server"))


@pytest.fixture
def without_mlflow(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the mlflow extra were not installed: ``import mlflow`` fails."""
    monkeypatch.setitem(sys.modules, "mlflow", None)


def test_without_the_mlflow_extra_tracking_is_refused_with_the_install_command(without_mlflow: None) -> None:
    spec = load_spec({**SPEC, "tracking": {"mlflow": "http://127.0.0.1:5000"}})  # the form is fine
    with pytest.raises(SpecError) as caught:
        check_client(spec.tracking)
    ((where, message),) = caught.value.errors
    assert where == "tracking.mlflow"
    assert "pip install 'trainsweep[mlflow]'" in message
    check_client(load_spec(SPEC).tracking)  # no tracking: nothing to install


def test_a_sagemaker_arn_also_needs_sagemakers_mlflow_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.setitem(sys.modules, "sagemaker_mlflow", None)
    spec = load_spec({**SPEC, "tracking": {"mlflow": SERVER}})
    with pytest.raises(SpecError, match="pip install sagemaker-mlflow"):
        check_client(spec.tracking)
    check_client(load_spec({**SPEC, "tracking": {"mlflow": "http://127.0.0.1:5000"}}).tracking)


def test_plan_refuses_tracking_without_the_mlflow_extra(without_mlflow: None, tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "tracking": {"mlflow": "http://127.0.0.1:5000"}}))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == EXIT_INVALID, result.output
    assert "tracking.mlflow" in result.stderr and "pip install 'trainsweep[mlflow]'" in result.stderr
    assert result.stdout == ""


def test_the_python_api_s_plan_refuses_tracking_without_the_mlflow_extra(without_mlflow: None) -> None:
    import trainsweep

    with pytest.raises(SpecError, match=r"pip install 'trainsweep\[mlflow\]'"):
        trainsweep.plan({**SPEC, "tracking": {"mlflow": "http://127.0.0.1:5000"}})
    assert trainsweep.plan(SPEC).jobs


@pytest.mark.parametrize("where", [["--local"], []], ids=["local", "cloud"])
def test_run_refuses_tracking_without_the_mlflow_extra_before_anything_starts(
    without_mlflow: None, tmp_path: Path, where: list[str]
) -> None:
    spec = {**SPEC, "tracking": {"mlflow": "http://127.0.0.1:5000"}}
    if where:
        spec.update(instance_types=["local"], workload={**SPEC["workload"], "synthetic": True})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(path), *where, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "tracking.mlflow" in result.stderr and "pip install 'trainsweep[mlflow]'" in result.stderr
    assert not out.exists()  # no sweep was claimed, started or downloaded
