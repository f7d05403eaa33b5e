"""``status`` and ``run`` read a sweep's jobs with one paged list and describe only what runs; a throttled
call is retried and never shown as "pending"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from trainsweep import layout
from trainsweep.aws import jobstatus, resume, sweeps
from trainsweep.errors import TrainsweepError
from trainsweep.jobs import SCHEMA_VERSION, PlannedJob

from .conftest import CLOUD_STACK

SWEEP = "demo-20260101-000000"
NOW = datetime(2026, 1, 1, 1, tzinfo=UTC)


def _jobs(n: int) -> list[dict[str, Any]]:
    """``n`` planned jobs of one g5 instance, as the planner writes them (one batch size each)."""
    out = []
    for i in range(n):
        name = f"{SWEEP}-g5-1-{i}-e0"
        job = PlannedJob(
            sweep_id=SWEEP, job_name=name, run_names=(name,), instance_type="ml.g5.xlarge", instance_count=1,
            vmtype="g5-1", batch_sizes=(i + 1,), repetition=0, hyperparameters={}, max_runtime_seconds=3600,
            spot=False, max_wait_seconds=None, checkpoint_s3_uri=None, data_s3_uri=None, image_uri=None,
            output_s3_uri=None, region="us-east-1",
        )  # fmt: skip
        out.append(job.to_json())
    return out


def _doc(jobs: list[dict[str, Any]], **more: Any) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, **more, "jobs": jobs})


class FakeSageMaker:
    """SageMaker's answers for a sweep: ``status`` per created job; counts every call."""

    def __init__(self, status: dict[str, str], throttle_describe: bool = False) -> None:
        self.status = status
        self.throttle_describe = throttle_describe
        self.calls: list[str] = []

    def list_training_jobs(self, **kw: Any) -> dict[str, Any]:
        self.calls.append("list")
        names = sorted(n for n in self.status if kw["NameContains"] in n)
        start = int(kw.get("NextToken") or 0)
        page = names[start : start + kw["MaxResults"]]
        out: dict[str, Any] = {
            "TrainingJobSummaries": [
                {"TrainingJobName": n, "TrainingJobStatus": self.status[n], "CreationTime": NOW} for n in page
            ]
        }
        if start + kw["MaxResults"] < len(names):
            out["NextToken"] = str(start + kw["MaxResults"])
        return out

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        self.calls.append("describe")
        if self.throttle_describe:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "Describe"
            )
        return {
            "TrainingJobName": TrainingJobName,
            "TrainingJobStatus": self.status[TrainingJobName],
            "SecondaryStatus": "Training",
            "TrainingStartTime": NOW,
        }


@pytest.fixture
def s3() -> Any:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="results")
        yield client


def _view(s3: Any, sm: Any, seen: dict[str, Any] | None = None) -> sweeps.SweepView:
    return sweeps.sweep_view(
        s3=s3, bucket="results", sweep_id=SWEEP, sagemaker=sm, now=lambda: NOW, jobs_seen=seen
    )


def test_a_poll_lists_the_sweeps_jobs_and_describes_only_those_not_seen_ended(s3: Any) -> None:
    jobs = _jobs(150)  # two pages of the list
    s3.put_object(Bucket="results", Key=layout.jobs_key(SWEEP), Body=_doc(jobs).encode())
    status = {j["job_name"]: "Completed" for j in jobs[:100]} | {
        j["job_name"]: "InProgress" for j in jobs[100:104]
    }
    sm = FakeSageMaker(status)
    seen: dict[str, Any] = {}
    view = _view(s3, sm, seen)
    assert view.counts["done"] == 100 and view.counts["running"] == 4 and view.counts["pending"] == 46
    assert sm.calls.count("list") == 2 and sm.calls.count("describe") == 104  # never the 46 not created
    sm.calls.clear()
    _view(s3, sm, seen)
    assert sm.calls == ["list", "list", *["describe"] * 4]  # the ended jobs are known


def test_a_throttled_describe_is_retried_and_the_running_job_stays_running(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobstatus.time, "sleep", lambda _: None)
    jobs = _jobs(2)
    s3.put_object(Bucket="results", Key=layout.jobs_key(SWEEP), Body=_doc(jobs).encode())
    sm = FakeSageMaker({jobs[0]["job_name"]: "InProgress"}, throttle_describe=True)
    view = _view(s3, sm)
    assert [c.status for c in view.cells] == ["running", "pending"]
    assert sm.calls.count("describe") == jobstatus.ATTEMPTS


def test_a_throttled_list_keeps_what_was_seen(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobstatus.time, "sleep", lambda _: None)
    jobs = _jobs(1)
    s3.put_object(Bucket="results", Key=layout.jobs_key(SWEEP), Body=_doc(jobs).encode())
    sm = FakeSageMaker({jobs[0]["job_name"]: "InProgress"})
    seen: dict[str, Any] = {}
    assert [c.status for c in _view(s3, sm, seen).cells] == ["running"]

    def throttled(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "List")

    sm.list_training_jobs = throttled  # type: ignore[method-assign]
    assert [c.status for c in _view(s3, sm, seen).cells] == ["running"]


def test_other_errors_are_not_taken_for_pending(s3: Any) -> None:
    jobs = _jobs(1)
    s3.put_object(Bucket="results", Key=layout.jobs_key(SWEEP), Body=_doc(jobs).encode())

    class Denied(FakeSageMaker):
        def list_training_jobs(self, **kw: Any) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "List")

    with pytest.raises(
        TrainsweepError, match=r"cannot read the sweep's training jobs from SageMaker: .*AccessDenied"
    ):
        _view(s3, Denied({}))


# ---- status prefers the cloud to a copy downloaded mid-run; resume waits for its aggregation -------------


@pytest.mark.slow
def test_status_asks_the_cloud_before_a_copy_downloaded_mid_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from trainsweep.cli import app

    jobs = _jobs(2)
    stale = tmp_path / SWEEP
    stale.mkdir()
    (stale / layout.JOBS_JSON).write_text(_doc(jobs, sweep_id=SWEEP))  # not aggregated
    final = [
        {"run_name": j["run_names"][0], "status": "completed", "reason": None, "billable_s": 30.0}
        for j in jobs
    ]
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="Trainsweep", TemplateBody=json.dumps(CLOUD_STACK)
        )
        boto3.client("s3").put_object(
            Bucket="results-bucket", Key=layout.jobs_key(SWEEP), Body=_doc(jobs, sweep_id=SWEEP, cells=final)
        )
        result = CliRunner().invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["done"] == 2  # the downloaded copy says pending


def test_a_stale_copy_is_shown_when_the_cloud_cannot_answer(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from trainsweep.cli import app

    stale = tmp_path / SWEEP
    stale.mkdir()
    (stale / layout.JOBS_JSON).write_text(_doc(_jobs(2), sweep_id=SWEEP))
    with mock_aws():  # no stack deployed
        result = CliRunner().invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["pending"] == 2


def test_resume_waits_for_its_aggregation_and_never_sends_it_twice() -> None:
    config = resume.aggregate_client(boto3.Session(region_name="us-east-1")).meta.config
    assert config.read_timeout == resume.AGGREGATE_READ_TIMEOUT_S > 10 * 60  # AggregateSweep's timeout
    assert config.retries["total_max_attempts"] == 1


# ---- resume redrives an interrupted execution first ---------------------------------------------------


class FakeSfn:
    def __init__(self, status: str, refuse: bool = False) -> None:
        self.status, self.refuse, self.redriven = status, refuse, []

    def get_paginator(self, _: str) -> Any:
        execution = {"name": SWEEP, "executionArn": f"arn:x:execution:m:{SWEEP}", "startDate": NOW}
        return type("P", (), {"paginate": lambda self, **_: [{"executions": [execution]}]})()

    def describe_execution(self, executionArn: str) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        return {"status": self.status}

    def redrive_execution(self, executionArn: str) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        if self.refuse:
            raise ClientError({"Error": {"Code": "ExecutionNotRedrivable", "Message": "too old"}}, "Redrive")
        self.redriven.append(executionArn)
        return {}


@pytest.mark.parametrize("status", ["ABORTED", "FAILED", "TIMED_OUT"])
def test_resume_redrives_a_stopped_or_failed_execution_and_watches_it(status: str) -> None:
    sfn = FakeSfn(status)
    watched: list[str] = []
    ended = resume.redrive_interrupted(
        sfn, "arn:x:stateMachine:m", SWEEP, lambda arn: watched.append(arn) or "SUCCEEDED"
    )  # type: ignore[arg-type]
    assert ended == "SUCCEEDED" and sfn.redriven == watched == [f"arn:x:execution:m:{SWEEP}"]


def test_resume_goes_on_without_a_redrive_when_there_is_none_to_do() -> None:
    for sfn in (FakeSfn("SUCCEEDED"), FakeSfn("ABORTED", refuse=True)):
        assert resume.redrive_interrupted(sfn, "arn:x:stateMachine:m", SWEEP, lambda arn: "X") is None  # type: ignore[arg-type]
        assert sfn.redriven == []
