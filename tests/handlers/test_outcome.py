"""How a job's end and a run's log become a cell's status and reason (trainsweep.aws.outcome)."""

from __future__ import annotations

import json

from trainsweep.aws.outcome import cell_status, is_out_of_memory, job_outcome


def _failed(
    reason: str, secondary: str = "Failed", status: str = "Failed", billable: int | None = 42
) -> dict:
    described = {"TrainingJobStatus": status, "SecondaryStatus": secondary, "FailureReason": reason}
    if billable is not None:
        described["BillableTimeInSeconds"] = billable
    return {"Error": "States.TaskFailed", "Cause": json.dumps(described)}


def test_a_completed_job_is_ok_with_its_billable_time():
    outcome = job_outcome({"TrainingJobStatus": "Completed", "BillableTimeInSeconds": 900}, None)
    assert outcome.ok and outcome.kind == "ok" and outcome.billable_s == 900.0


def test_out_of_memory_failures_are_recognised_from_frameworks_and_sagemaker():
    for text in (
        "AlgorithmError: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "ResourceExhaustedError: OOM when allocating tensor with shape[2048,64,64]",
        "AlgorithmError: Please use an instance type with more memory, or reduce the size of job data",
        "MemoryError",
    ):
        assert is_out_of_memory(text), text
        assert job_outcome(None, _failed(text)).kind == "oom"
    assert not is_out_of_memory("AlgorithmError: ExecuteUserScriptError: exit code 1")


def test_max_runtime_is_a_timeout_and_other_failures_keep_their_reason():
    timeout = job_outcome(None, _failed("", secondary="MaxRuntimeExceeded", status="Stopped"))
    assert timeout.kind == "timeout" and "MaxRuntimeExceeded" in timeout.reason
    failed = job_outcome(None, _failed("CapacityError: Unable to provision requested ML compute capacity."))
    assert failed.kind == "failed" and failed.reason.startswith("CapacityError")
    assert failed.billable_s == 42.0


def test_an_api_error_without_a_job_description_keeps_the_error_name():
    outcome = job_outcome(None, {"Error": "SageMaker.AmazonSageMakerException", "Cause": "Rate exceeded"})
    assert outcome.kind == "failed" and outcome.reason == "SageMaker.AmazonSageMakerException: Rate exceeded"
    assert outcome.billable_s is None


def test_a_packed_jobs_finished_cells_stay_completed_when_a_later_one_runs_out_of_memory():
    outcome = job_outcome(None, _failed("CUDA out of memory"))
    assert cell_status(outcome, "complete", None) == ("completed", None)
    assert cell_status(outcome, "partial", None) == ("infeasible", "CUDA out of memory")
    assert cell_status(outcome, None, None) == ("infeasible", "CUDA out of memory")


def test_a_completed_job_without_a_full_log_is_not_called_completed():
    ok = job_outcome({"TrainingJobStatus": "Completed"}, None)
    assert cell_status(ok, None, None) == ("failed", "the job completed but left no log")
    assert cell_status(ok, "partial", None)[0] == "partial"
    assert cell_status(ok, "failed", "CUDA out of memory")[0] == "infeasible"
    status, reason = cell_status(ok, "unreadable", None)
    assert status == "failed"
    assert reason is not None and "its log is unreadable: no step timing trainsweep can read" in reason


def test_a_spot_job_keeps_its_training_time_beside_the_billable_time():
    """Managed spot bills less than it trains: both numbers travel, so the report shows the saving."""
    outcome = job_outcome(
        {"TrainingJobStatus": "Completed", "BillableTimeInSeconds": 300, "TrainingTimeInSeconds": 1000}, None
    )
    assert (outcome.billable_s, outcome.training_s) == (300.0, 1000.0)


def test_a_failed_job_keeps_its_training_time_too():
    cause = json.loads(_failed("boom")["Cause"])
    cause["TrainingTimeInSeconds"] = 77
    outcome = job_outcome(None, {"Error": "States.TaskFailed", "Cause": json.dumps(cause)})
    assert outcome.training_s == 77.0


def test_a_batch_larger_than_a_scripts_training_set_is_infeasible_with_its_reason():
    ok = job_outcome({"TrainingJobStatus": "Completed"}, None)
    reason = "batch size 64 is beyond what this script can train: its DataLoader holds 40 samples per rank"
    assert cell_status(ok, "failed", reason, "infeasible") == ("infeasible", reason)
