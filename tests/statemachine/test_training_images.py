"""The training image per job, through the synthesized definition: the CreateTrainingJob request that
reaches (mock) SageMaker names the spec's own image, or the stack's when the spec names none; a job's
``log_format`` reads the log its image writes."""

from __future__ import annotations

from typing import Any

from tests.statemachine.sweep_harness import render
from trainsweep import layout
from trainsweep.aws import outputs

OWN_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-train:1"
LOG_FORMAT = r"^\[my-train\] epoch=(?P<epoch>\d+) step=(?P<step>\d+) time=(?P<step_s>[0-9.]+)$"
OWN_LOG = b"".join(
    f"[my-train] epoch={e} step={s} time=0.{s}5\n".encode() for e in (1, 2) for s in (1, 2, 3, 4)
)
SPEC: dict[str, Any] = {
    "name": "demo",
    "instance_types": ["ml.p3.2xlarge"],
    "batch_sizes": [64, 128],
    "max_concurrency": 2,
}


def _images(sweep: Any) -> list[str]:
    return [call["algorithm_specification"]["TrainingImage"] for call in sweep.sagemaker.calls]


def test_a_jobs_own_image_reaches_create_training_job_and_its_log_format_reads_the_log(deploy):
    sweep = deploy({}, log=OWN_LOG)
    spec = {**SPEC, "workload": {"image_uri": OWN_IMAGE, "log_format": LOG_FORMAT, "epochs": 2}}
    result = sweep.run({"spec": spec, "sweep_id": "demo-own"})
    assert result["status"] == "SUCCEEDED", result
    assert _images(sweep) == [OWN_IMAGE, OWN_IMAGE]
    cells = sweep.json(layout.jobs_key("demo-own"))["cells"]
    assert [c["status"] for c in cells] == ["completed", "completed"]
    for cell in cells:
        record = sweep.json(layout.results_key("demo-own", layout.run_record_path(cell["run_name"])))
        assert record["dialect"] == "log-format"
        assert [len(e["step_s"]) for e in record["epochs"]] == [4, 4]


def test_a_job_without_an_image_runs_the_stacks_image(deploy, template):
    sweep = deploy({})
    result = sweep.run(
        {"spec": {**SPEC, "workload": {"model": "mnist-cnn", "epochs": 2}}, "sweep_id": "demo-b"}
    )
    assert result["status"] == "SUCCEEDED", result
    stack_image = render(template["Outputs"][outputs.TRAINING_IMAGE_URI]["Value"], {})
    assert stack_image.startswith("123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-")
    assert _images(sweep) == [stack_image, stack_image]
    assert {j["image_uri"] for j in sweep.json(layout.jobs_key("demo-b"))["jobs"]} == {stack_image}


def test_an_image_whose_log_no_dialect_reads_fails_its_cells_with_what_to_do(deploy):
    sweep = deploy({}, log=b"starting my-train\nloss 0.52 accuracy 0.81\ndone\n")
    spec = {**SPEC, "workload": {"image_uri": OWN_IMAGE, "epochs": 2}}
    result = sweep.run({"spec": spec, "sweep_id": "demo-unread"})
    assert result["status"] == "SUCCEEDED", result  # the sweep goes on and aggregates
    cells = sweep.json(layout.jobs_key("demo-unread"))["cells"]
    assert [c["status"] for c in cells] == ["failed", "failed"]
    for cell in cells:
        assert "no step timing trainsweep can read" in cell["reason"]
        assert "workload.log_format" in cell["reason"]
