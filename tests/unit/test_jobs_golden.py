"""The planned jobs of the examples, byte for byte: ``jobs.json`` and the fan-out's job lists.

The golden files were written by the planner before the job record became a class; a change to them
is a change to the contract every reader (the state machine, the handlers, ``aws/``) relies on.
Regenerate deliberately with ``TRAINSWEEP_REGOLD=1``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainsweep.aws.workflow import state_input, with_default_image
from trainsweep.spec import load_spec, plan_sweep

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainsweep:golden"
# Fixed prices: the golden files do not follow the shipped catalogue's figures.
PRICES = {
    "ml.g4dn.xlarge": 0.7,
    "ml.g4dn.12xlarge": 4.5,
    "ml.g5.12xlarge": 7.0,
    "ml.p3.2xlarge": 3.8,
    "ml.p3.8xlarge": 14.7,
    "ml.p3.16xlarge": 28.2,
}
# Spot, packed, early stop, built-in model:
EXAMPLES = {
    "resnet50-early-stop": ("examples/resnet50-cifar10-early-stop.yaml", {}),
    # a script of the user's, one job per cell, with a data channel and a warm pool
    "byo-pytorch": (
        "examples/byo-pytorch/sweep.yaml",
        {
            "workload": {"source_dir": "s3://golden-bucket/sources/byo.tar.gz"},
            "data": "s3://golden-bucket/data/mnist/",
            "warm_pool_seconds": 600,
        },
    ),
    # axes (a plan of schema version 2): a packed job scans every setting's batch sizes
    "resnet50-axes": (
        "examples/resnet50-cifar10-early-stop.yaml",
        {"axes": {"dtype": ["float32", "float16"], "compile": [False, True]}},
    ),
}


def _spec(path: str, overrides: dict) -> dict:
    spec = load_spec(ROOT / path).to_dict()
    spec["workload"].update(overrides.get("workload", {}))
    spec.update({k: v for k, v in overrides.items() if k != "workload"})
    # the examples' local types would tie the golden to a local plan; the cloud plan sets every URI
    spec["instance_types"] = [t for t in spec["instance_types"] if t.startswith("ml.")] or ["ml.g4dn.xlarge"]
    return spec


def _plan(name: str):
    path, overrides = EXAMPLES[name]
    plan = plan_sweep(
        _spec(path, overrides),
        sweep_id=f"{name}-20260304-050607",
        region="us-east-1",
        bucket="golden-bucket",
        now=NOW,
        price=lambda t, r: PRICES.get(t),
        enforce_budget=False,
    )
    plan.jobs = with_default_image(plan.jobs, lambda: IMAGE)
    return plan


def _check(path: Path, data: bytes) -> None:
    if os.environ.get("TRAINSWEEP_REGOLD"):
        path.write_bytes(data)
    assert data == path.read_bytes(), f"{path.name} differs from the golden file"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_jobs_json_is_byte_identical_to_the_golden_file(name: str) -> None:
    _check(GOLDEN / f"jobs-{name}.json", _plan(name).jobs_json())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_fan_out_job_lists_are_byte_identical_to_the_golden_file(name: str) -> None:
    workflow = state_input(_plan(name).to_state_input(), execution="golden")
    items = {key: workflow.item_bytes(key).decode() for key in workflow.items}
    data = (json.dumps({"state": workflow.state, "items": items}, indent=2) + "\n").encode()
    _check(GOLDEN / f"fan-out-{name}.json", data)
