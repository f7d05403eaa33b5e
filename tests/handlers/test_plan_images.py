"""PlanSweep gives each job its image: the spec's own, or the stack's (TRAINSWEEP_TRAINING_IMAGE)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.handlers.handler_helpers import BUCKET, STACK_IMAGE
from trainsweep import layout
from trainsweep.aws.config import TRAINING_IMAGE_ENV, ConfigError

OWN_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-train:1"
LOG_FORMAT = r"step (?P<step>\d+) took (?P<step_s>[0-9.]+)s"
BUILTIN: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.p3.2xlarge"],
    "batch_sizes": [64, 128],
}
OWN: dict[str, Any] = {**BUILTIN, "workload": {"image_uri": OWN_IMAGE, "log_format": LOG_FORMAT, "epochs": 2}}


def _jobs(s3: Any, state: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs the Distributed Maps read: each group's job list in S3 (the state holds its key)."""
    return [
        j
        for g in state["groups"]
        for j in json.loads(s3.get_object(Bucket=BUCKET, Key=g["jobs_key"])["Body"].read())
    ]


def _stored_jobs(s3: Any, sweep_id: str) -> list[dict[str, Any]]:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=layout.jobs_key(sweep_id))["Body"].read())["jobs"]


def test_jobs_of_a_builtin_workload_run_the_stacks_image(s3, handler, context):
    state = handler("plan_sweep")({"input": {"spec": BUILTIN, "sweep_id": "demo-img"}}, context)
    assert [j["image_uri"] for j in _jobs(s3, state)] == [STACK_IMAGE, STACK_IMAGE]
    assert [j["image_uri"] for j in _stored_jobs(s3, "demo-img")] == [STACK_IMAGE, STACK_IMAGE]


def test_jobs_of_an_own_image_keep_it_and_carry_the_log_format(s3, handler, context):
    state = handler("plan_sweep")({"input": {"spec": OWN, "sweep_id": "demo-own"}}, context)
    for jobs in (_jobs(s3, state), _stored_jobs(s3, "demo-own")):
        assert [(j["image_uri"], j["log_format"]) for j in jobs] == [(OWN_IMAGE, LOG_FORMAT)] * 2


def test_own_images_plan_even_in_a_function_deployed_without_the_stacks_image(
    s3, handler, context, monkeypatch
):
    monkeypatch.delenv(TRAINING_IMAGE_ENV)
    state = handler("plan_sweep")({"input": {"spec": OWN, "sweep_id": "demo-own"}}, context)
    assert {j["image_uri"] for j in _jobs(s3, state)} == {OWN_IMAGE}


def test_a_function_deployed_without_the_stacks_image_fails_before_writing(s3, handler, context, monkeypatch):
    monkeypatch.delenv(TRAINING_IMAGE_ENV)
    with pytest.raises(ConfigError, match=TRAINING_IMAGE_ENV):
        handler("plan_sweep")({"input": {"spec": BUILTIN, "sweep_id": "demo-img"}}, context)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)
