"""moto's interpreter runs ``sagemaker:createTrainingJob.sync`` once trainsweep's handler is installed."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws
from moto.sagemaker.models import sagemaker_backends

from trainsweep.local import sfn_sagemaker

ROLE = "arn:aws:iam::123456789012:role/sfn"
ACCOUNT = "123456789012"


def _definition(retry: bool = False) -> str:
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
        "Parameters": {
            "TrainingJobName.$": "$.name",
            "HyperParameters.$": "$.hp",
            "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
            "RoleArn": ROLE,
            "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
            "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 10},
            "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        },
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
        "End": True,
    }
    if retry:
        task["Retry"] = [
            {"ErrorEquals": [sfn_sagemaker.API_ERROR_NAME], "IntervalSeconds": 1, "MaxAttempts": 2}
        ]
    states = {"Train": task, "Caught": {"Type": "Pass", "End": True}}
    return json.dumps({"StartAt": "Train", "States": states})


@pytest.fixture
def aws():
    sfn_sagemaker.install()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield boto3.client("stepfunctions", region_name="us-east-1")


def _run(sfn, definition: str, payload: dict) -> dict:
    arn = sfn.create_state_machine(name=f"sm{time.monotonic_ns()}", definition=definition, roleArn=ROLE)[
        "stateMachineArn"
    ]
    ex = sfn.start_execution(stateMachineArn=arn, input=json.dumps(payload))["executionArn"]
    for _ in range(200):
        d = sfn.describe_execution(executionArn=ex)
        if d["status"] != "RUNNING":
            return d
        time.sleep(0.05)
    raise AssertionError("execution did not finish")


def test_sync_task_returns_the_completed_job_description(aws):
    d = _run(aws, _definition(), {"name": "job-ok", "hp": {"epochs": "1"}})
    assert d["status"] == "SUCCEEDED"
    out = json.loads(d["output"])
    assert out["TrainingJobName"] == "job-ok"
    assert out["TrainingJobStatus"] == "Completed"
    assert out["HyperParameters"] == {"epochs": "1"}


def test_a_warm_pool_request_is_accepted_and_recorded(aws):
    # local mode keeps no instance warm: it accepts the keep-alive and DescribeTrainingJob records it
    definition = json.loads(_definition())
    definition["States"]["Train"]["Parameters"]["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 600
    d = _run(aws, json.dumps(definition), {"name": "job-warm", "hp": {"epochs": "1"}})
    assert d["status"] == "SUCCEEDED", d
    assert json.loads(d["output"])["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600


def test_failed_job_raises_a_catchable_task_failure_with_the_failure_reason(aws, monkeypatch):
    backend = sagemaker_backends[ACCOUNT]["us-east-1"]
    original = type(backend).create_training_job

    def failing(self, **kwargs):
        job = original(self, **kwargs)
        job.training_job_status = "Failed"
        job.failure_reason = "AlgorithmError: CUDA out of memory"
        return job

    monkeypatch.setattr(type(backend), "create_training_job", failing)
    d = _run(aws, _definition(), {"name": "job-oom", "hp": {"epochs": "1"}})
    assert d["status"] == "SUCCEEDED"
    error = json.loads(d["output"])["error"]
    assert error["Error"] == "States.TaskFailed"
    assert sfn_sagemaker.failure_reason_from_cause(error["Cause"]) == "AlgorithmError: CUDA out of memory"


def test_non_string_hyperparameters_are_rejected_like_aws(aws):
    d = _run(aws, _definition(), {"name": "job-int", "hp": {"epochs": 1}})
    error = json.loads(d["output"])["error"]
    assert error["Error"] == sfn_sagemaker.API_ERROR_NAME
    assert "epochs" in error["Cause"]


def test_api_errors_are_retried_then_succeed(aws, monkeypatch):
    from moto.core.exceptions import JsonRESTError

    backend = sagemaker_backends[ACCOUNT]["us-east-1"]
    original = type(backend).create_training_job
    calls = {"n": 0}

    def throttled_once(self, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise JsonRESTError("ThrottlingException", "Rate exceeded")
        return original(self, **kwargs)

    monkeypatch.setattr(type(backend), "create_training_job", throttled_once)
    d = _run(aws, _definition(retry=True), {"name": "job-retry", "hp": {}})
    assert d["status"] == "SUCCEEDED", d
    assert "error" not in json.loads(d["output"])
    assert calls["n"] == 2


def test_install_is_idempotent():
    sfn_sagemaker.install()
    sfn_sagemaker.install()
    assert sfn_sagemaker.is_installed()


def test_an_mlflow_config_reaches_create_training_job(aws, monkeypatch):
    # what a training task of a tracked sweep sends: local mode passes it on (and tracks nothing itself)
    from moto.sagemaker.responses import SageMakerResponse

    received = []
    original = SageMakerResponse.create_training_job

    def create_training_job(self):  # type: ignore[no-untyped-def]
        received.append(self._get_param("MlflowConfig"))
        return original(self)

    monkeypatch.setattr(SageMakerResponse, "create_training_job", create_training_job)
    config = {
        "MlflowResourceArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:mlflow-tracking-server/team",
        "MlflowExperimentName": "resnet",
        "MlflowRunName": "job-tracked",
    }
    definition = json.loads(_definition())
    definition["States"]["Train"]["Parameters"]["MlflowConfig"] = config
    d = _run(aws, json.dumps(definition), {"name": "job-tracked", "hp": {"epochs": "1"}})
    assert d["status"] == "SUCCEEDED", d
    assert received == [config]
