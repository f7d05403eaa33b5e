"""The planned-job record: its JSON form, its reader's errors, and the jobs.json document's version."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from trainsweep.jobs import SCHEMA_VERSION, JobRecordError, PlannedJob, job_for_run, jobs_of_document
from trainsweep.spec import plan_sweep

SPEC: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge"],
    "batch_sizes": [64, 128],
    "packing": "per-instance",
    "spot": True,
    "prices": {"ml.p3.2xlarge": 3.6},
}


def _job(**spec: Any) -> PlannedJob:
    return plan_sweep({**SPEC, **spec}, sweep_id="demo-1", bucket="b").jobs[0]


def test_a_job_reads_back_from_its_json_unchanged() -> None:
    job = _job()
    data = json.loads(json.dumps(job.to_json()))
    assert PlannedJob.from_json(data) == job
    # every field, in order; vpc_config only when set (the state machine tests its presence)
    optional = ("vpc_config", "axes", "mlflow_config")
    assert list(data) == [f for f in PlannedJob.model_fields if f not in optional]
    vpc = {"subnets": ["subnet-1"], "security_group_ids": ["sg-1"]}
    in_vpc = _job(training_job={"vpc": vpc})
    assert list(in_vpc.to_json()) == [f for f in PlannedJob.model_fields if f not in optional[1:]]
    assert PlannedJob.from_json(json.loads(json.dumps(in_vpc.to_json()))) == in_vpc
    tracked = _job(tracking={"mlflow": ARN})
    assert list(tracked.to_json()) == [f for f in PlannedJob.model_fields if f not in optional[:2]]
    assert PlannedJob.from_json(json.loads(json.dumps(tracked.to_json()))) == tracked


ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"


def test_a_sagemaker_mlflow_arn_gives_every_job_its_mlflow_config() -> None:
    jobs = plan_sweep(
        {**SPEC, "packing": "per-cell", "tracking": {"mlflow": ARN, "experiment": "resnet-tuning"}},
        sweep_id="demo-1",
        bucket="b",
    ).jobs
    assert len(jobs) == 2
    for job in jobs:
        assert job.mlflow_config == {
            "MlflowResourceArn": ARN,
            "MlflowExperimentName": "resnet-tuning",
            "MlflowRunName": job.job_name,
        }
    app = ARN.replace("mlflow-tracking-server/team", "mlflow-app/app-0a1b2c3d4e5f")
    assert _job(tracking={"mlflow": app}).mlflow_config["MlflowExperimentName"] == "demo"  # the spec's name


def test_a_plan_is_written_at_the_lowest_schema_version_that_holds_it() -> None:
    def version(**more: object) -> int:
        plan = plan_sweep({**SPEC, **more}, sweep_id="demo-1", bucket="b")
        return int(json.loads(plan.jobs_json())["schema_version"])

    assert version() == 1
    assert version(axes={"compile": [False, True]}) == 2
    assert version(tracking={"mlflow": ARN}) == 3  # an older trainsweep refuses it by its version
    assert version(tracking={"mlflow": "http://mlflow.internal:5000"}) == 1  # no field of its own


def test_a_tracking_uri_that_is_not_sagemaker_gives_the_jobs_no_mlflow_config() -> None:
    job = _job(tracking={"mlflow": "http://mlflow.internal:5000"})
    assert job.mlflow_config is None and "mlflow_config" not in job.to_json()


def test_a_job_cannot_be_changed_in_place() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        _job().job_name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.pop("instance_type"), "instance_type: Field required"),
        (lambda d: d.update(instance_count="two"), "instance_count: Input should be a valid integer"),
        (lambda d: d.update(instance_typo="ml.p3.2xlarge"), "instance_typo: Extra inputs are not permitted"),
    ],
)
def test_a_malformed_job_is_refused_with_the_field_that_is_wrong(change: Any, says: str) -> None:
    data = _job().to_json()
    change(data)
    with pytest.raises(JobRecordError, match=f"not a planned job: {says}"):
        PlannedJob.from_json(data)


def test_jobs_json_reads_as_planned_jobs_and_finds_the_job_of_a_log() -> None:
    plan = plan_sweep(SPEC, sweep_id="demo-1", bucket="b")
    jobs = jobs_of_document(json.loads(plan.jobs_json()))
    assert jobs == plan.jobs
    (job,) = jobs
    assert job_for_run(jobs, job.run_names[1]) is job
    assert job_for_run(jobs, job.job_name) is job  # ExportLog's copy is named after the job
    assert job_for_run(jobs, "demo-1-p3-1-32-e0") is None
    assert job.cells == [(job.run_names[0], 64), (job.run_names[1], 128)]


@pytest.mark.parametrize("version", [None, 0, SCHEMA_VERSION + 1])
def test_a_jobs_json_of_another_schema_version_is_refused(version: Any) -> None:
    doc = json.loads(plan_sweep(SPEC, sweep_id="demo-1").jobs_json())
    doc["schema_version"] = version
    expected = f"schema_version {version!r}; this trainsweep reads versions 1, 2, 3$"
    with pytest.raises(JobRecordError, match=expected):
        jobs_of_document(doc)


def test_the_worst_case_pays_every_instance_for_the_runtime_and_the_warm_pool() -> None:
    job = _job(spot=False, instance_count=2, max_runtime_seconds=1800, warm_pool_seconds=1800)
    assert job.worst_case_usd(3.6) == pytest.approx(2 * 3600 / 3600 * 3.6)
    assert job.worst_case_usd(None) is None
