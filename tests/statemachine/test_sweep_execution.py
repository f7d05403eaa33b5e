"""The CDK-synthesized sweep state machine, executed in moto with the real handlers."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.statemachine.sweep_harness import INVALID_REQUEST, moto_sweeps
from trainsweep import layout

SPEC: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge"],
    "batch_sizes": [64, 128],
    "repetitions": 1,
    "max_concurrency": 2,
}


def _cells(sweep, sweep_id: str) -> dict[int, dict[str, Any]]:
    cells = sweep.json(layout.jobs_key(sweep_id))["cells"]
    return {c["batch_size"]: c for c in cells}


def test_all_cells_succeed_and_the_sweep_is_reported(deploy):
    sweep = deploy({})
    spec = {**SPEC, "spot": True, "data": "s3://some-data-bucket/mnist/"}
    result = sweep.run({"spec": spec, "sweep_id": "demo-ok"})
    assert result["status"] == "SUCCEEDED", result
    summary = json.loads(result["output"])
    assert summary["status_counts"] == {"completed": 2}
    assert summary["runs_parsed"] == 2

    results = layout.results_prefix("demo-ok")
    keys = sweep.keys(results)
    for bs in (64, 128):
        for ext in ("json", "summary", "png"):
            assert results + layout.execution_times_path("p3-1", bs, 0, ext) in keys
    for rel in (layout.SWEEP_CSV, layout.SWEEP_JSON, layout.REPORT_HTML):
        assert results + rel in keys
    assert [json.loads(m)["sweep_id"] for m in sweep.messages()] == ["demo-ok"]


def test_training_jobs_get_stopping_condition_spot_settings_and_string_hyperparameters(deploy):
    sweep = deploy({})
    spec = {**SPEC, "spot": True, "data": "s3://some-data-bucket/mnist/", "max_runtime_seconds": 600}
    assert sweep.run({"spec": spec, "sweep_id": "demo-spot"})["status"] == "SUCCEEDED"
    assert len(sweep.sagemaker.calls) == 2
    for call in sweep.sagemaker.calls:
        assert call["stopping_condition"] == {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
        assert call["enable_managed_spot_training"] is True
        assert call["checkpoint_config"]["S3Uri"].startswith(
            "s3://trainsweep-sm-test/sweeps/demo-spot/checkpoints/"
        )
        assert (
            call["input_data_config"][0]["DataSource"]["S3DataSource"]["S3Uri"]
            == "s3://some-data-bucket/mnist/"
        )
        assert all(isinstance(v, str) for v in call["hyper_parameters"].values())
        assert call["training_job_name"].startswith("demo-spot-p3-1-")
        assert len(call["training_job_name"]) <= 63


def test_on_demand_jobs_without_data_have_no_spot_or_channel(deploy):
    sweep = deploy({})
    assert sweep.run({"spec": SPEC, "sweep_id": "demo-od"})["status"] == "SUCCEEDED"
    for call in sweep.sagemaker.calls:
        assert call["stopping_condition"] == {"MaxRuntimeInSeconds": 3600}
        assert not call.get("enable_managed_spot_training")
        assert not call.get("checkpoint_config")
        assert not call.get("input_data_config")


# One sweep whose cells meet every scripted fate; the tests below read its results.
# 64 ok, 128 fails, 256 runs out of memory, 512 is throttled once, 1024 logs only to CloudWatch.
MIXED_SCRIPT = {64: "ok", 128: "fail", 256: "oom", 512: "throttle", 1024: "cloudwatch-only"}


@dataclass
class Mixed:
    """What the mixed sweep left behind (read inside its moto, which ends with the fixture)."""

    result: dict[str, Any]
    cells: dict[int, dict[str, Any]]
    keys: set[str]
    rejected: list[str]
    created: list[str]
    record_1024: dict[str, Any]
    messages: list[str]


@pytest.fixture(scope="module")
def mixed(template):  # type: ignore[no-untyped-def]
    with moto_sweeps(template) as make:
        sweep = make(MIXED_SCRIPT)
        spec = {**SPEC, "batch_sizes": list(MIXED_SCRIPT), "max_concurrency": 5}
        result = sweep.run({"spec": spec, "sweep_id": "demo-mixed"})
        cells = _cells(sweep, "demo-mixed")
        return Mixed(
            result=result,
            cells=cells,
            keys=sweep.keys("sweeps/demo-mixed/"),
            rejected=list(sweep.sagemaker.rejected),
            created=[c["training_job_name"] for c in sweep.sagemaker.calls],
            record_1024=sweep.json(
                layout.results_key("demo-mixed", layout.run_record_path(cells[1024]["run_name"]))
            ),
            messages=sweep.messages(),
        )


def test_failed_cells_do_not_stop_the_sweep_and_every_cell_ends_with_a_status(mixed):
    assert mixed.result["status"] == "SUCCEEDED", mixed.result
    assert {bs: c["status"] for bs, c in mixed.cells.items()} == {
        64: "completed",
        128: "failed",
        256: "infeasible",
        512: "completed",
        1024: "completed",
    }
    assert json.loads(mixed.result["output"])["status_counts"] == {
        "completed": 3,
        "failed": 1,
        "infeasible": 1,
    }


def test_failure_reasons_are_recorded_and_out_of_memory_is_infeasible(mixed):
    cells = mixed.cells
    assert cells[128]["reason"] == "AlgorithmError: ExecuteUserScriptError: exit code 1"
    assert cells[256]["status"] == "infeasible"
    assert "CUDA out of memory" in cells[256]["reason"]
    assert cells[64]["reason"] is None
    assert cells[64]["billable_s"] == 321


def test_a_throttled_create_call_is_retried_and_the_job_runs(mixed):
    (throttled,) = mixed.rejected
    assert throttled == mixed.cells[512]["job_name"]
    assert throttled in mixed.created
    assert mixed.cells[512]["status"] == "completed"


def test_a_request_no_retry_can_fix_fails_its_cell_at_once_with_awss_message(deploy):
    # The integration names every API error SageMaker.AmazonSageMakerException: only a cause that says
    # throttling, a resource limit or capacity is retried, not an instance type the region lacks.
    sweep = deploy({64: "ok", 128: "invalid"})
    result = sweep.run({"spec": {**SPEC, "batch_sizes": [64, 128]}, "sweep_id": "demo-invalid"})
    cells = _cells(sweep, "demo-invalid")
    rejected = list(sweep.sagemaker.rejected)
    assert result["status"] == "SUCCEEDED", result
    assert rejected == [cells[128]["job_name"]]  # asked once, never again
    assert cells[128]["status"] == "failed"
    assert INVALID_REQUEST in cells[128]["reason"] and "ValidationException" in cells[128]["reason"]
    assert cells[64]["status"] == "completed"


def test_a_job_that_logged_only_to_cloudwatch_is_exported_then_parsed(mixed):
    run = mixed.cells[1024]["run_name"]
    assert layout.log_key("demo-mixed", run) in mixed.keys
    assert mixed.record_1024["status"] == "complete" and len(mixed.record_1024["epochs"]) == 2


def test_the_report_is_written_and_announced_even_with_failed_cells(mixed):
    assert layout.results_key("demo-mixed", layout.REPORT_HTML) in mixed.keys
    assert [json.loads(m)["status_counts"] for m in mixed.messages] == [
        {"completed": 3, "failed": 1, "infeasible": 1}
    ]


def test_an_over_budget_sweep_fails_before_any_job_starts(deploy):
    sweep = deploy({})
    result = sweep.run({"spec": {**SPEC, "budget_usd": 0.01}, "sweep_id": "demo-budget"})
    assert result["status"] == "FAILED"
    assert result["error"] == "BudgetExceededError"
    assert "budget_usd" in json.loads(result["cause"])["errorMessage"]
    assert sweep.sagemaker.calls == []
    assert not sweep.keys("sweeps/demo-budget/")
    (message,) = sweep.messages()
    assert "BudgetExceededError" in message


def test_a_bad_spec_fails_with_a_readable_error(deploy):
    sweep = deploy({})
    result = sweep.run({**SPEC, "batch_sizes": "big"})
    assert result["status"] == "FAILED"
    assert result["error"] == "SpecError"
    assert "batch_sizes" in json.loads(result["cause"])["errorMessage"]
    assert sweep.sagemaker.calls == []


# ---- scale: the Distributed Map fan-out (issue 13, item 10) -------------------------------------------

STATE_BUDGET = 256 * 1024 // 10  # a tenth of Step Functions' state limit


@pytest.mark.timeout(1800)
def test_a_sweep_of_hundreds_of_jobs_ends_with_every_cells_status_and_a_small_state(deploy):
    """200 jobs over two instance types (the inline-Map design refused more than ~190), every other cell
    failing with a 10 kB reason: the sweep aggregates every cell, and no state's input or output comes
    near the limit, because the jobs and results go through S3. (5,000 jobs: benchmarks/bench_dmap.py.)"""
    batch_sizes = list(range(2, 102))
    sweep = deploy({bs: "ok" if bs % 2 else "fail-long" for bs in batch_sizes})
    spec = {
        **SPEC,
        "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"],
        "batch_sizes": batch_sizes,
        "max_concurrency": 40,
    }
    result = sweep.run({"spec": spec, "sweep_id": "demo-big"}, timeout=1700)
    assert result["status"] == "SUCCEEDED", result
    summary = json.loads(result["output"])
    assert summary["cells"] == 200 and sum(summary["status_counts"].values()) == 200
    cells = sweep.json(layout.jobs_key("demo-big"))["cells"]
    assert len({c["run_name"] for c in cells}) == 200 and all(c["status"] for c in cells)

    # Every job ends as scripted: no crash inside the interpreter (a Lambda's environment once leaked
    # between threads and killed about one job in 200), no cell without its own outcome.
    assert sweep.payloads.crashes == []
    completed = [c for c in cells if c["status"] == "completed"]
    failed = [c for c in cells if c["status"] == "failed"]
    assert sorted(c["batch_size"] for c in completed) == sorted(2 * [bs for bs in batch_sizes if bs % 2])
    assert sorted(c["batch_size"] for c in failed) == sorted(2 * [bs for bs in batch_sizes if not bs % 2])
    assert all((c["reason"] or "").startswith("AlgorithmError: xxx") for c in failed), [
        (c["batch_size"], (c["reason"] or "")[:200])
        for c in failed
        if not c["reason"].startswith("AlgorithmError")
    ]
    state, kind, size = sweep.payloads.largest()
    assert size < STATE_BUDGET, (state, kind, size)
    assert [json.loads(m)["cells"] for m in sweep.messages()] == [200]


def test_every_failing_cell_with_a_long_reason_keeps_the_state_small(deploy):
    sweep = deploy({64: "fail-long", 128: "fail-long"})
    result = sweep.run({"spec": SPEC, "sweep_id": "demo-long"})
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["status_counts"] == {"failed": 2}
    state, kind, size = sweep.payloads.largest()
    assert size < STATE_BUDGET, (state, kind, size)


def test_a_group_whose_job_list_cannot_be_read_still_ends_in_an_aggregate_and_a_notification(
    deploy, monkeypatch
):
    """The Distributed Map of one instance type fails (its job list is missing): the sweep goes on, the
    other type's cells are recorded, this one's are failed with the map's error, and it is announced."""
    from trainsweep.local import lambda_runner

    plan = lambda_runner.load_handler(lambda_runner.LAMBDAS_DIR / "plan_sweep" / "handler.py")
    module = sys.modules[plan.__module__]
    real = module.state_input

    def losing_one_list(*args: Any, **kwargs: Any) -> Any:
        workflow = real(*args, **kwargs)
        lost = workflow.state["groups"][1]["jobs_key"]
        return replace(workflow, items={k: v for k, v in workflow.items.items() if k != lost})

    monkeypatch.setattr(module, "state_input", losing_one_list)
    sweep = deploy({})
    spec = {**SPEC, "instance_types": ["ml.p3.2xlarge", "ml.g4dn.xlarge"]}
    result = sweep.run({"spec": spec, "sweep_id": "demo-lost"})
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["status_counts"] == {"completed": 2, "failed": 2}
    cells = sweep.json(layout.jobs_key("demo-lost"))["cells"]
    lost = [c for c in cells if c["instance_type"] == "ml.g4dn.xlarge"]
    assert len(lost) == 2 and all(c["status"] == "failed" for c in lost)
    assert all("the jobs of ml.g4dn.xlarge did not run" in c["reason"] for c in lost)
    assert [json.loads(m)["status_counts"] for m in sweep.messages()] == [{"completed": 2, "failed": 2}]


def test_a_failing_aggregate_still_ends_in_a_notification(deploy, monkeypatch):
    import trainsweep.report

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("report broke")

    monkeypatch.setattr(trainsweep.report, "sweep_artefacts", broken)
    sweep = deploy({})
    result = sweep.run({"spec": SPEC, "sweep_id": "demo-agg"})
    assert result["status"] == "FAILED"
    (message,) = sweep.messages()
    assert "report broke" in message


def test_a_sweeps_boto3_clients_are_made_once_not_per_job(deploy, monkeypatch):
    """Issue 13 (5,000 jobs in minutes): moto's interpreter made a client for every task of every job and
    the handlers one per invocation, ~15 ms of CPU each; they are made once per set of arguments and
    AWS environment, and shared (clients are thread-safe). The client count must not grow with the jobs."""
    import boto3.session

    made: list[str] = []
    real = boto3.session.Session.client

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(str(kwargs.get("service_name") or args[0]))
        return real(self, *args, **kwargs)

    sweep = deploy({})
    monkeypatch.setattr(boto3.session.Session, "client", counting)
    spec = {**SPEC, "batch_sizes": list(range(2, 22)), "max_concurrency": 10}
    result = sweep.run({"spec": spec, "sweep_id": "demo-clients"})
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["status_counts"] == {"completed": 20}
    # 20 jobs, each a training task, ParseRun and its S3 client: once ~80 clients, now one per kind
    assert len(made) < 20, sorted(made)
