"""PlanSweep refuses a spec whose s3:// inputs the training role cannot read (every job would fail at
start with AccessDenied), naming what the role may read and the data_bucket_names setting."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.handlers.handler_helpers import BUCKET
from trainsweep import layout
from trainsweep.aws.config import DATA_BUCKETS_ENV, EMBEDDED_ENV
from trainsweep.errors import SpecError

SPEC: dict[str, Any] = {
    "name": "demo",
    "workload": {"model": "mnist-cnn", "epochs": 2},
    "instance_types": ["ml.g4dn.xlarge"],
    "batch_sizes": [64],
}


@pytest.fixture(autouse=True)
def in_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBEDDED_ENV, raising=False)


def test_data_in_a_bucket_the_role_cannot_read_is_refused_before_anything_is_written(s3, handler, context):
    with pytest.raises(SpecError) as err:
        handler("plan_sweep")({"input": {**SPEC, "data": "s3://team-data/cifar10/"}}, context)
    message = str(err.value)
    assert "data: s3://team-data/cifar10/: the training role cannot read it" in message
    assert f"s3://{BUCKET}/data/..." in message and "data_bucket_names setting (none)" in message
    assert "-c data_bucket_names=...,team-data" in message
    assert err.value.errors[0][0] == "data"
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_a_source_archive_outside_what_the_role_reads_is_refused(s3, handler, context):
    workload = {"entry_point": "train.py", "source_dir": "s3://elsewhere/code/sourcedir.tar.gz"}
    with pytest.raises(
        SpecError, match=re.escape("workload.source_dir: s3://elsewhere/code/sourcedir.tar.gz")
    ):
        handler("plan_sweep")({"input": {**SPEC, "workload": workload}}, context)


def test_what_the_role_may_read_is_accepted(s3, handler, context, monkeypatch):
    monkeypatch.setenv(DATA_BUCKETS_ENV, "team-data,more-data")
    plan = handler("plan_sweep")
    assert plan({"input": {**SPEC, "data": "s3://team-data/cifar10/"}}, context)["job_count"] == 1
    assert plan({"input": {**SPEC, "data": f"s3://{BUCKET}/data/cifar10/"}}, context)["job_count"] == 1
    code = f"s3://{BUCKET}/{layout.code_key('demo-1', 'abc')}"
    workload = {"entry_point": "train.py", "source_dir": code}
    assert plan({"input": {"spec": {**SPEC, "workload": workload}, "sweep_id": "demo-1"}}, context)


def test_the_results_outside_data_and_code_are_not_readable_either(s3, handler, context):
    with pytest.raises(SpecError, match="cannot read it"):
        handler("plan_sweep")({"input": {**SPEC, "data": f"s3://{BUCKET}/sweeps/other/results/"}}, context)


def test_with_an_existing_training_role_nothing_is_refused(s3, handler, context, monkeypatch):
    monkeypatch.setenv(DATA_BUCKETS_ENV, "*")  # the stack's setting for training_role_arn
    assert handler("plan_sweep")({"input": {**SPEC, "data": "s3://anywhere/x/"}}, context)["job_count"] == 1
