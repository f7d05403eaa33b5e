"""Downloads fetch a sweep's results and logs; its jobs' models, outputs and checkpoints only with --models,
the size said before the transfer (``trainsweep download``, the end of ``trainsweep run``), against moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

SWEEP = "demo-20260101-000000"
JOB = f"{SWEEP}-g4dn-1-32-e0"
BUCKET = "results-bucket"
MODEL_BYTES = 3 * 1024 * 1024 + 1  # 3.0 MiB
runner = CliRunner()

MACHINE = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


def _put_sweep(s3: Any, sweep_id: str) -> None:
    """What a finished cloud sweep leaves: its documents, a log, results, and what SageMaker wrote."""
    job = f"{sweep_id}-g4dn-1-32-e0"
    objects = {
        layout.spec_key(sweep_id): b"{}",
        layout.jobs_key(sweep_id): b"{}",
        layout.log_key(sweep_id, job): b"a log line\n",
        layout.results_key(sweep_id, layout.REPORT_HTML): b"<html/>",
        f"{layout.output_prefix(sweep_id)}{job}/output/model.tar.gz": b"m" * MODEL_BYTES,
        f"{layout.output_prefix(sweep_id)}{job}/output/output.tar.gz": b"o" * 10,
        f"{layout.checkpoint_prefix(sweep_id, job)}step-100.pt": b"c" * 20,
    }
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)


@pytest.fixture
def deployed() -> Any:
    """A deployed stack: its bucket, and a state machine that succeeds at once (Step Functions executes
    it: one made by moto's CloudFormation would not run)."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        machine = boto3.client("stepfunctions", region_name="us-east-1").create_state_machine(
            name="sweep", definition=json.dumps(MACHINE), roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        stack = {
            "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": BUCKET}}},
            "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}, "StateMachineArn": {"Value": machine}},
        }
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(stack)
        )
        yield boto3.client("s3", region_name="us-east-1")


def _model_files(dest: Path) -> list[str]:
    return sorted(
        p.relative_to(dest).as_posix()
        for p in dest.rglob("*")
        if p.is_file() and p.relative_to(dest).parts[0] in ("output", "checkpoints")
    )


def test_download_leaves_models_and_checkpoints_in_s3_and_says_their_size(
    deployed: Any, tmp_path: Path
) -> None:
    _put_sweep(deployed, SWEEP)
    dest = tmp_path / "out"
    result = runner.invoke(app, ["download", SWEEP, "--to", str(dest)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert (dest / "logs" / f"{JOB}.log").read_bytes() == b"a log line\n"
    assert (dest / "results" / "report.html").is_file() and (dest / "spec.json").is_file()
    assert _model_files(dest) == []
    out = " ".join(result.output.split())
    assert "Downloading 4 files (22 B); models and checkpoints (3 files, 3.0 MiB) stay in S3" in out
    assert "--models fetches them" in out
    assert "Downloaded 4 files" in out


def test_download_with_models_fetches_them_too(deployed: Any, tmp_path: Path) -> None:
    _put_sweep(deployed, SWEEP)
    dest = tmp_path / "out"
    result = runner.invoke(app, ["download", SWEEP, "--to", str(dest), "--models"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert _model_files(dest) == [
        f"checkpoints/{JOB}/step-100.pt",
        f"output/{JOB}/output/model.tar.gz",
        f"output/{JOB}/output/output.tar.gz",
    ]
    assert (dest / "output" / JOB / "output" / "model.tar.gz").stat().st_size == MODEL_BYTES
    out = " ".join(result.output.split())
    assert "Downloading 7 files (3.0 MiB), models and checkpoints (3 files, 3.0 MiB) included" in out


@pytest.mark.parametrize("models", [False, True])
def test_the_end_of_a_cloud_run_fetches_models_only_with_models(
    deployed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: bool
) -> None:
    from trainsweep.aws import sweeps
    from trainsweep.sweeps import cloud

    started = sweeps.start_sweep

    def start_and_finish(sfn: Any, machine: str, spec: dict[str, Any], sweep_id: str, **kw: Any) -> str:
        _put_sweep(deployed, sweep_id)  # the sweep's jobs and Lambdas, at once
        return started(sfn, machine, spec, sweep_id, **kw)

    monkeypatch.setattr(sweeps, "start_sweep", start_and_finish)
    monkeypatch.setattr(cloud, "POLL_S", 0.1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: demo\nworkload: {model: mnist-cnn, epochs: 1}\ninstance_types: [ml.g4dn.xlarge]\n"
        "batch_sizes: [32]\n"
    )
    out = tmp_path / "results"
    args = ["run", str(spec), "--out", str(out), *(["--models"] if models else [])]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert "Results:" in result.output, result.output
    (dest,) = list(out.iterdir())
    assert (dest / "logs").is_dir() and (dest / "results" / "report.html").is_file()
    assert len(_model_files(dest)) == (3 if models else 0)
    said = "models and checkpoints (3 files, 3.0 MiB) " + ("included" if models else "stay in S3")
    assert said in " ".join(result.output.split()), result.output
