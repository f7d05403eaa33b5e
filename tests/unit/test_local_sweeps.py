"""Sweep status, resume planning and download/upload (trainsweep.aws.sweeps), against moto S3."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from trainsweep import layout
from trainsweep.aws import resume, sweeps
from trainsweep.jobs import SCHEMA_VERSION as JOBS_SCHEMA_VERSION
from trainsweep.spec import plan_sweep

SWEEP = "demo-20260101-000000"


def _job(bs: int, rep: int, instance_type: str = "local") -> dict[str, Any]:
    """A planned job (``PlannedJob.to_json``) of one cell."""
    name = f"{SWEEP}-local-cpu-{bs}-e{rep}"
    changes = {"job_name": name, "run_names": (name,), "instance_type": instance_type, "batch_sizes": (bs,)}
    return _PLANNED.model_copy(update={**changes, "repetition": rep}).to_json()


def _cell(job: dict[str, Any], status: str, reason: str | None = None) -> dict[str, Any]:
    return {
        "run_name": job["run_names"][0],
        "job_name": job["job_name"],
        "instance_type": job["instance_type"],
        "batch_size": job["batch_sizes"][0],
        "repetition": job["repetition"],
        "status": status,
        "reason": reason,
        "billable_s": 12.0,
    }


SPEC = {"name": "demo", "instance_types": ["local"], "batch_sizes": [32, 64], "repetitions": 2}
_PLANNED = plan_sweep(
    {**SPEC, "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True}}, sweep_id=SWEEP
).jobs[0]


def _doc(jobs: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    """A ``jobs.json`` document listing ``jobs`` (and ``cells`` once aggregated)."""
    return {"schema_version": JOBS_SCHEMA_VERSION, "sweep_id": SWEEP, "jobs": jobs, **rest}


def test_resume_reruns_only_the_failed_cell_and_keeps_the_others() -> None:
    jobs = [_job(32, 0), _job(64, 0), _job(32, 1), _job(64, 1)]
    cells = [_cell(jobs[0], "completed"), _cell(jobs[1], "failed", "boom"), _cell(jobs[2], "completed")]
    doc = _doc(jobs, cells=[*cells, _cell(jobs[3], "completed")])
    have = {j["run_names"][0] for j in jobs} - {jobs[1]["run_names"][0]}
    plan = resume.plan_resume(SPEC, doc, have)
    assert plan.missing == [jobs[1]["run_names"][0]]
    assert plan.specs == [{**SPEC, "instance_types": ["local"], "batch_sizes": [64], "repetitions": 1}]
    assert plan.also_rerun == []
    assert sorted(c["run_name"] for c in plan.kept_cells) == sorted(
        j["run_names"][0] for j in (jobs[0], jobs[2], jobs[3])
    )


def test_a_completed_cell_without_its_run_record_is_rerun() -> None:
    jobs = [_job(32, 0)]
    doc = _doc(jobs, cells=[_cell(jobs[0], "completed")])
    plan = resume.plan_resume(SPEC, doc, set())
    assert plan.missing == [jobs[0]["run_names"][0]]


def test_a_missing_later_repetition_also_reruns_the_earlier_one_and_says_so() -> None:
    jobs = [_job(32, 0), _job(32, 1)]
    doc = _doc(jobs, cells=[_cell(jobs[0], "completed"), _cell(jobs[1], "failed")])
    plan = resume.plan_resume(SPEC, doc, {jobs[0]["run_names"][0]})
    assert plan.specs[0]["repetitions"] == 2
    assert plan.also_rerun == [jobs[0]["run_names"][0]]
    assert plan.kept_cells == []


def test_nothing_to_resume_gives_no_spec() -> None:
    jobs = [_job(32, 0)]
    doc = _doc(jobs, cells=[_cell(jobs[0], "completed")])
    assert resume.plan_resume(SPEC, doc, {jobs[0]["run_names"][0]}).specs == []


def test_merged_cells_prefer_the_new_record() -> None:
    old = [{"run_name": "a", "status": "completed"}, {"run_name": "b", "status": "failed"}]
    new = [{"run_name": "b", "status": "completed"}]
    assert resume.merge_cells(old, new) == [
        {"run_name": "a", "status": "completed"},
        {"run_name": "b", "status": "completed"},
    ]


def test_view_from_documents_counts_final_statuses() -> None:
    jobs = [_job(32, 0), _job(64, 0), _job(128, 0)]
    doc = _doc(
        jobs,
        cells=[
            _cell(jobs[0], "completed"),
            _cell(jobs[1], "infeasible", "CUDA out of memory"),
            _cell(jobs[2], "timeout", "MaxRuntimeExceeded"),
        ],
    )
    view = sweeps.view_from_documents(SWEEP, doc, {jobs[0]["run_names"][0]})
    assert view.counts == {"pending": 0, "running": 0, "done": 1, "failed": 1, "infeasible": 1, "skipped": 0}
    assert view.spend_usd == 0.0  # local instances cost nothing
    assert view.cells[1].detail == "CUDA out of memory"


@pytest.fixture
def s3() -> Any:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="results")
        yield client


def test_download_mirrors_the_sweep_prefix_and_upload_puts_it_back_without_raw_logs(
    s3: Any, tmp_path: Path
) -> None:
    keys = {
        layout.jobs_key(SWEEP): b"{}",
        layout.log_key(SWEEP, "run-a"): b"raw log",
        layout.results_key(SWEEP, layout.run_record_path("run-a")): b'{"x": 1}',
        layout.results_key(SWEEP, layout.REPORT_HTML): b"<html/>",
        "sweeps/other/jobs.json": b"{}",
    }
    for k, v in keys.items():
        s3.put_object(Bucket="results", Key=k, Body=v)
    dest = tmp_path / SWEEP
    files = sweeps.download_sweep(s3, "results", SWEEP, dest)
    assert len(files) == 4
    assert (dest / "logs" / "run-a.log").read_bytes() == b"raw log"
    assert (dest / "results" / "runs" / "run-a.json").read_bytes() == b'{"x": 1}'
    assert not (tmp_path / "other").exists()

    s3.create_bucket(Bucket="fresh")
    assert sweeps.upload_sweep(s3, "fresh", SWEEP, dest) == 3
    uploaded = {o["Key"] for o in s3.list_objects_v2(Bucket="fresh")["Contents"]}
    assert layout.log_key(SWEEP, "run-a") not in uploaded
    assert layout.results_key(SWEEP, layout.REPORT_HTML) in uploaded


def test_downloading_an_unknown_sweep_is_a_clear_error(s3: Any, tmp_path: Path) -> None:
    with pytest.raises(sweeps.SweepNotFoundError, match="no sweep 'nope'"):
        sweeps.download_sweep(s3, "results", "nope", tmp_path)


def test_live_view_reads_plan_run_records_and_final_cells(s3: Any) -> None:
    jobs = [_job(32, 0), _job(64, 0)]
    s3.put_object(
        Bucket="results",
        Key=layout.jobs_key(SWEEP),
        Body=json.dumps(_doc(jobs)).encode(),
    )
    view = sweeps.sweep_view(s3=s3, bucket="results", sweep_id=SWEEP)
    assert view.counts["pending"] == 2
    s3.put_object(
        Bucket="results",
        Key=layout.results_key(SWEEP, layout.run_record_path(jobs[0]["run_names"][0])),
        Body=b"{}",
    )
    view = sweeps.sweep_view(s3=s3, bucket="results", sweep_id=SWEEP)
    assert [c.status for c in view.cells] == ["done", "pending"]
    doc = _doc(jobs, cells=[_cell(jobs[0], "completed"), _cell(jobs[1], "failed", "exit 1")])
    s3.put_object(Bucket="results", Key=layout.jobs_key(SWEEP), Body=json.dumps(doc).encode())
    view = sweeps.sweep_view(s3=s3, bucket="results", sweep_id=SWEEP)
    assert [c.status for c in view.cells] == ["done", "failed"]
    assert sweeps.latest_sweep_id(s3, "results") == SWEEP


def test_a_resumed_execution_asks_for_new_job_names() -> None:
    """A resume's execution input carries its attempt token (plan_sweep renames jobs by it: test_spec)."""
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
        arn = sfn.create_state_machine(name="m", definition=definition, roleArn=role)["stateMachineArn"]
        attempt = sweeps.resume_attempt(0)
        first = sweeps.start_sweep(sfn, arn, {"name": "s"}, "s-1")
        again = sweeps.start_sweep(sfn, arn, {"name": "s"}, "s-1", suffix="resume0", attempt=attempt)
        inputs = [json.loads(sfn.describe_execution(executionArn=a)["input"]) for a in (first, again)]
    assert "attempt" not in inputs[0]
    assert inputs[1]["sweep_id"] == "s-1"
    assert inputs[1]["attempt"] == attempt


def test_resume_attempts_are_short_distinct_tokens() -> None:
    tokens = {sweeps.resume_attempt(i, now=1.8e9 + t) for i in range(3) for t in (0, 0.1, 5)}
    assert len(tokens) == 9
    assert all(len(t) <= 8 and t.isalnum() and t.islower() for t in tokens)


def test_an_unaggregated_run_whose_record_says_it_did_not_finish_is_rerun() -> None:
    """Ctrl-C: no final cells; a SIGTERM-stopped run has a record, but not a finished one."""
    jobs = [_job(32, 0), _job(64, 0)]
    doc = _doc(jobs)
    names = [j["run_names"][0] for j in jobs]
    plan = resume.plan_resume(SPEC, doc, set(names), finished={names[0]})
    assert plan.missing == [names[1]]
    assert [(c["run_name"], c["status"]) for c in plan.kept_cells] == [(names[0], "completed")]
    assert sweeps.record_outcome({"status": "failed", "failure_reason": "stopped by SIGTERM"}) == (
        False,
        "stopped by SIGTERM",
    )
    assert sweeps.record_outcome({"status": "partial"}) == (False, "log status: partial")
    assert sweeps.record_outcome({"status": "complete"}) == (True, None)


def test_spec_differences_name_the_changed_fields_but_not_what_uploading_rewrites() -> None:
    saved = {
        "name": "demo",
        "data": f"s3://bucket/{layout.data_prefix(SWEEP)}",
        "workload": {"model": "mnist-cnn", "epochs": 2, "source_dir": None},
        "max_runtime_seconds": 600,
    }
    given = {**saved, "data": "file:///tmp/data", "workload": {**saved["workload"], "epochs": 3}}
    assert resume.spec_differences(saved, given, SWEEP) == ["workload.epochs"]
    assert resume.spec_differences(saved, {**saved, "data": "file:///tmp/data"}, SWEEP) == []


def test_a_lambda_error_cause_becomes_one_line_and_other_causes_keep_their_error_name() -> None:
    cause = json.dumps(
        {
            "errorMessage": "this sweep (10000 jobs) is too large\nsecond line",
            "errorType": "SweepTooLargeError",
            "stackTrace": ['  File "/var/task/handler.py", line 1\n'] * 50,
        }
    )
    assert (
        sweeps.failure_line("SweepTooLargeError", cause)
        == "SweepTooLargeError: this sweep (10000 jobs) is too large"
    )
    assert (
        sweeps.failure_line("States.Timeout", "the state\\n timed out")
        == "States.Timeout: the state\\n timed out"
    )
    assert sweeps.failure_line("States.Runtime", None) == "States.Runtime"
    assert len(sweeps.failure_line("E", "x" * 5000)) == sweeps.ERROR_LINE_MAX


def test_resuming_a_sweep_of_some_cells_reruns_them_with_a_spec_that_plans_them() -> None:
    from trainsweep.spec import plan_sweep

    spec = {
        "name": "demo",
        "workload": {"model": "mnist-cnn", "synthetic": True},
        "instance_types": ["local"],
        "batch_sizes": [32, 64, 128],
        "cells": [
            {"instance_type": "local", "batch_size": 32},
            {"instance_type": "local", "batch_size": 128},
        ],
    }
    jobs = [_job(32, 0), _job(128, 0)]
    doc = _doc(jobs, cells=[_cell(jobs[0], "completed"), _cell(jobs[1], "failed")])
    plan = resume.plan_resume(spec, doc, {jobs[0]["run_names"][0]})
    (reduced,) = plan.specs
    # the reduced grid is the missing cell itself; the original cells (32 is outside it) would be refused
    assert (reduced["batch_sizes"], reduced["cells"]) == ([128], None)
    assert [list(j.run_names) for j in plan_sweep(reduced, sweep_id=SWEEP).jobs] == [jobs[1]["run_names"]]


def test_download_leaves_the_jobs_models_and_checkpoints_unless_asked(s3: Any, tmp_path: Path) -> None:
    job = f"{SWEEP}-g5-1-32-e0"
    keys = {
        layout.jobs_key(SWEEP): b"{}",
        layout.log_key(SWEEP, job): b"raw log",
        f"{layout.output_prefix(SWEEP)}{job}/output/model.tar.gz": b"m" * 2048,
        f"{layout.checkpoint_prefix(SWEEP, job)}last.pt": b"c" * 100,
    }
    for k, v in keys.items():
        s3.put_object(Bucket="results", Key=k, Body=v)
    listed = sweeps.list_sweep(s3, "results", SWEEP)
    assert sorted(listed.files) == sorted([(layout.jobs_key(SWEEP), 2), (layout.log_key(SWEEP, job), 7)])
    assert listed.size(listed.models) == 2148
    plain = sweeps.download_sweep(s3, "results", SWEEP, tmp_path / "plain")
    assert sorted(p.relative_to(tmp_path / "plain").as_posix() for p in plain) == [
        "jobs.json",
        f"logs/{job}.log",
    ]
    assert not (tmp_path / "plain" / "output").exists() and not (tmp_path / "plain" / "checkpoints").exists()
    every = sweeps.download_sweep(s3, "results", SWEEP, tmp_path / "all", models=True)
    assert len(every) == 4
    assert (tmp_path / "all" / "output" / job / "output" / "model.tar.gz").read_bytes() == b"m" * 2048
