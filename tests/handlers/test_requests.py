"""Each handler parses its event into a typed request: a malformed event fails at the edge, by field path,
before anything is read or written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.handlers.handler_helpers import BUCKET, planned_job
from trainsweep.requests import PlanSweepRequest, RequestError, parse_request

SPEC: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge"],
    "batch_sizes": [64],
}
JOB = planned_job("demo-1", "demo-1-p3-1-64-e0")


@pytest.mark.parametrize(
    "event",
    [
        {"input": SPEC, "execution": "x"},  # a bare spec as the execution input (console, AWS CLI)
        {"input": {"spec": SPEC, "sweep_id": "demo-1", "attempt": "r1"}, "execution": "x"},  # the CLI's
        SPEC,  # the function invoked on its own with a spec
        {"input": SPEC, "execution": None},  # an execution without a name (moto's)
    ],
)
def test_plan_sweep_reads_each_shape_of_its_input(event: dict[str, Any]) -> None:
    request = parse_request(event, PlanSweepRequest)
    assert request.input.spec == SPEC
    assert request.execution == (event.get("execution") or "run")


@pytest.mark.parametrize(
    ("name", "event", "says"),
    [
        ("plan_sweep", {"input": {"spec": "demo.yaml"}}, "PlanSweep got a malformed event: input.spec: "),
        ("plan_sweep", {"input": {"spec": SPEC, "sweep_idd": "x"}}, "input.sweep_idd: Extra inputs"),
        ("parse_run", {"sweep_id": "demo-1", "outcome": {}},
         "ParseRun got a malformed event: job: Field required"),
        (
            "parse_run",
            {"sweep_id": "demo-1", "job": {**JOB, "run_names": "demo-1-p3-1-64-e0"}},
            "job.run_names: Input should be a valid tuple",
        ),
        ("export_log", {"sweep_id": "demo-1", "job": {k: v for k, v in JOB.items() if k != "job_name"}},
         "ExportLog got a malformed event: job.job_name: Field required"),
        ("aggregate_sweep", {"maps": []}, "AggregateSweep got a malformed event: sweep_id: Field required"),
    ],
)  # fmt: skip
def test_a_malformed_event_is_refused_by_field_path_and_writes_nothing(
    s3: Any, handler: Any, context: Any, name: str, event: dict[str, Any], says: str
) -> None:
    with pytest.raises(RequestError, match=says.replace(".", r"\.")):
        handler(name)(event, context)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
