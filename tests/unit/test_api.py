"""The Python API (``from trainsweep import plan, run, status, load, ...``): what the CLI does, from code.

Local and cloud runs through the API are in tests/e2e/test_notebook.py (the example notebook) and
tests/unit/test_download_models.py, its import cost in tests/processes/test_api_import.py; here: plans,
errors, status and the results of a sweep as pandas and HTML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import trainsweep
from trainsweep.cli import app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
runner = CliRunner()


def _log(step_s: float, epochs: int = 2, steps: int = 5) -> str:
    """A small seed-style log (Keras callback prints) whose steady step takes ``step_s``."""
    lines = ["Initialization time 0.5", "Train on 1280 samples, validate on 100 samples"]
    t = 1_600_000_000.0
    for e in range(1, epochs + 1):
        lines += [f"Epoch {e}/{epochs}", f"Real time: {t}"]
        lines += [
            f"{s} step training time: {2.0 if (e, s) == (1, 1) else step_s:.6f}s" for s in range(1, steps + 1)
        ]
        t += 3.0
        lines += ["Validation time: 0.200000s", f"Real time: {t}", f"Epoch time: {3.0 if e == 1 else 0.9}s"]
    return "\n".join([*lines, "Duracao do treinamento: 4.4", "Training complete."]) + "\n"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Results made by ``trainsweep import`` of three runs on two instance types."""
    logs = tmp_path_factory.mktemp("logs")
    for name, step in (("p3-1-256", 0.1), ("p3-1-512", 0.15), ("p2-1-256", 0.3)):
        (logs / f"result-{name}-e0.txt").write_text(_log(step))
    out = tmp_path_factory.mktemp("imported")
    result = runner.invoke(app, ["import", str(logs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_plan_is_the_plan_the_cli_prints() -> None:
    planned = trainsweep.plan(QUICKSTART)
    printed = json.loads(runner.invoke(app, ["plan", str(QUICKSTART), "--json"]).output)
    assert [j["job_name"].split("-", 3)[-1] for j in planned.to_dict()["jobs"]] == [
        j["job_name"].split("-", 3)[-1] for j in printed["jobs"]
    ]
    assert planned.worst_case_cost_usd == printed["worst_case_cost_usd"] == 0.0
    assert planned.job_count == 3


def test_plan_of_an_invalid_spec_raises_a_spec_error_naming_the_field() -> None:
    from trainsweep.errors import SpecError

    with pytest.raises(SpecError) as caught:
        trainsweep.plan(
            {"name": "t", "workload": {"model": "mnist-cnn", "epochs": 0}, "instance_types": ["local"]}
        )
    assert any(field == "workload.epochs" for field, _ in caught.value.errors)


def test_a_cloud_run_without_a_stack_raises_what_the_cli_says(tmp_path: Path) -> None:
    from moto import mock_aws

    from trainsweep.errors import TrainsweepError

    spec = {
        "name": "t",
        "workload": {"model": "mnist-cnn", "epochs": 1},
        "instance_types": ["ml.g4dn.xlarge"],
        "batch_sizes": [32],
    }
    with mock_aws(), pytest.raises(TrainsweepError, match="stack 'Missing' not found"):
        trainsweep.run(
            spec, stack="Missing", region="us-east-1", out=tmp_path, events=trainsweep.SweepEvents()
        )


def test_load_reads_sweep_csv_with_its_types(imported: Path) -> None:
    results = trainsweep.load(imported)
    table = results.table
    assert len(table) == 3
    assert sorted(table["instance_type"]) == ["ml.p2.xlarge", "ml.p3.2xlarge", "ml.p3.2xlarge"]
    assert str(table["batch_size"].dtype) == "Int64" and str(table["runs"].dtype) == "int64"
    assert table["step_time_s"].dtype == "float64" and table["step_time_s"].notna().all()
    assert table["data_wait_share"].isna().all()  # empty in the CSV: missing, not ""
    assert (table["notes"] == "").all()  # empty text stays text
    fastest = table.sort_values("step_time_s").iloc[0]
    assert (fastest["instance_type"], fastest["batch_size"]) == ("ml.p3.2xlarge", 256)
    doc = json.loads((imported / "sweep.json").read_text())
    assert results.recommendation_text == doc["recommendation"]["text"] and results.recommendation_text
    assert results.runs is not None and len(results.runs) == 3
    assert results.report == imported / "report.html"


def test_load_finds_a_sweep_by_id_in_the_results_folder(imported: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "demo-20260101-000000" / "results"
    sweep.mkdir(parents=True)
    (sweep / "sweep.csv").write_bytes((imported / "sweep.csv").read_bytes())
    results = trainsweep.load("demo-20260101-000000", results=tmp_path)
    assert len(results.table) == 3 and results.recommendation == {}


def test_load_of_a_sweep_without_results_says_where_it_looked(tmp_path: Path) -> None:
    from trainsweep.errors import TrainsweepError

    with pytest.raises(TrainsweepError, match=r"no sweep\.csv in .*not been aggregated"):
        trainsweep.load(tmp_path)


def test_the_html_view_shows_the_recommendation_and_the_table(imported: Path) -> None:
    html = trainsweep.load(imported)._repr_html_()
    assert "<b>Recommendation</b>" in html and "Use ml.p2.xlarge with batch size 256" in html
    assert html.count("<tr") == 4  # header and three configurations
    assert "<th>samples_per_s</th>" in html and "<th>data_wait_share</th>" not in html  # empty: left out


def test_the_html_view_escapes_what_it_shows(imported: Path) -> None:
    from trainsweep.sweeps.results import results_html

    results = trainsweep.load(imported)
    results.recommendation = {"text": ["<script>alert(1)</script>"]}
    assert "<script>" not in results_html(results) and "&lt;script&gt;" in results_html(results)


def _view(cells: list[Any]) -> Any:
    from trainsweep.aws.sweeps import SweepView

    return SweepView("demo-1", "SUCCEEDED", cells)


def test_a_run_shows_how_it_ended_and_its_results(imported: Path, tmp_path: Path) -> None:
    from trainsweep.aws.sweeps import CellView

    dest = tmp_path / "demo-1"
    (dest / "results").mkdir(parents=True)
    for name in ("sweep.csv", "sweep.json"):
        (dest / "results" / name).write_bytes((imported / name).read_bytes())
    done = trainsweep.SweepRun(
        "demo-1", dest, "SUCCEEDED", _view([CellView("r", "j", "local", 32, 0, "done")])
    )
    assert done.succeeded
    html = done._repr_html_()
    assert "demo-1</code> succeeded: 1 done" in html and "Use ml.p2.xlarge" in html
    failed = trainsweep.SweepRun("demo-2", tmp_path / "demo-2", "FAILED", None, error="States.Runtime: boom")
    assert not failed.succeeded
    html = failed._repr_html_()
    assert "ended FAILED" in html and "States.Runtime: boom" in html and "no results to show" in html


def _planned(instance_type: str, sweep_id: str) -> dict[str, Any]:
    """The jobs document the planner writes for one mnist-cnn cell of ``instance_type``."""
    spec = {
        "name": "demo",
        "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True},
        "instance_types": [instance_type],
        "batch_sizes": [32],
    }
    from trainsweep.spec import plan_sweep

    return plan_sweep(spec, sweep_id=sweep_id).to_dict()


def test_status_reads_a_downloaded_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "demo-20260101-000000"
    (sweep / "results" / "runs").mkdir(parents=True)
    doc = _planned("local", "demo-20260101-000000")
    job = doc["jobs"][0]
    assert job["job_name"] == "demo-20260101-000000-local-cpu-32-e0"
    doc["cells"] = [{"run_name": job["job_name"], "status": "completed", "reason": None, "billable_s": 3}]
    (sweep / "jobs.json").write_text(json.dumps(doc))
    (sweep / "results" / "runs" / f"{job['job_name']}.json").write_text("{}")
    got = trainsweep.status(results=tmp_path)
    assert got.downloaded and got.parse_failures is None
    assert got.view.sweep_id == "demo-20260101-000000" and got.view.counts["done"] == 1


def test_watch_follows_a_cloud_sweep_until_its_execution_ends() -> None:
    import boto3
    from moto import mock_aws

    sweep_id = "demo-20260101-000000"
    job = f"{sweep_id}-g4dn-1-32-e0"
    jobs = _planned("ml.g4dn.xlarge", sweep_id)
    assert [j["job_name"] for j in jobs["jobs"]] == [job]
    seen: list[tuple[str | None, dict[str, int]]] = []

    class Seen(trainsweep.SweepEvents):
        def update(self, view: Any) -> None:
            seen.append((view.execution_status, view.counts))

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions")
        machine = sfn.create_state_machine(
            name="sweep",
            definition=json.dumps(
                {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 4, "End": True}}}
            ),
            roleArn="arn:aws:iam::123456789012:role/sfn",
        )["stateMachineArn"]
        stack = {
            "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "results"}}},
            "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}, "StateMachineArn": {"Value": machine}},
        }
        boto3.client("cloudformation").create_stack(StackName="Trainsweep", TemplateBody=json.dumps(stack))
        boto3.client("s3").put_object(
            Bucket="results", Key=f"sweeps/{sweep_id}/jobs.json", Body=json.dumps(jobs)
        )
        sfn.start_execution(stateMachineArn=machine, name=sweep_id, input="{}")
        view = trainsweep.watch(events=Seen(), poll_s=0.2)
        got = trainsweep.status(sweep_id, results=Path("/nonexistent"))
    assert view.sweep_id == sweep_id and view.execution_status == "SUCCEEDED"
    assert seen[0][0] == "RUNNING" and seen[-1][0] == "SUCCEEDED"
    assert seen[-1][1]["pending"] == 1  # the job never reached SageMaker
    assert not got.downloaded and got.view.execution_status == "SUCCEEDED" and got.parse_failures is None
