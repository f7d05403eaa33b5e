"""Helpers shared by the handler tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from trainsweep import layout
from trainsweep.jobs import SCHEMA_VERSION, PlannedJob

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "trainsweep-results-test"
STACK_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-hnb659fds-container-assets:stack"
"""The stack's own training image, as the PlanSweep function's environment names it."""


def s3_event(key: str, bucket: str = BUCKET) -> dict[str, Any]:
    """An ObjectCreated notification as S3 sends it (the key URL-encoded)."""
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-east-1",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                    "object": {"key": quote_plus(key, safe="/"), "size": 1},
                },
            }
        ]
    }


def planned_job(
    sweep_id: str, job_name: str, run_names: list[str] | None = None, **fields: Any
) -> dict[str, Any]:
    """A complete planned job as the planner writes it (``PlannedJob.to_json``): ``job_name`` runs
    ``run_names`` (default: one run of the same name), each at the batch size its name says; ``fields``
    override the rest."""
    runs = run_names or [job_name]
    cells = [layout.parse_job_name(r) for r in runs]
    values: dict[str, Any] = {
        "sweep_id": sweep_id,
        "job_name": job_name,
        "run_names": runs,
        "instance_type": "ml.p3.2xlarge",
        "instance_count": 1,
        "vmtype": "p3-1",
        "batch_sizes": [c.batch_size if c and c.batch_size else 64 for c in cells],
        "repetition": 0,
        "hyperparameters": {},
        "max_runtime_seconds": 3600,
        "spot": False,
        "max_wait_seconds": None,
        "keep_alive_seconds": 0,
        "checkpoint_s3_uri": None,
        "data_s3_uri": None,
        "image_uri": STACK_IMAGE,
        "log_format": None,
        "output_s3_uri": None,
        "region": "us-east-1",
    }
    return PlannedJob.from_json({**values, **fields}).to_json()


def jobs_document(jobs: list[dict[str, Any]]) -> bytes:
    """A ``jobs.json`` listing ``jobs`` (what ParseRun and AggregateSweep read of it)."""
    return json.dumps({"schema_version": SCHEMA_VERSION, "jobs": jobs}).encode()


def put_planned_runs(s3: Any, sweep_id: str, *run_names: str, bucket: str = BUCKET) -> None:
    """The sweep's ``jobs.json`` with one job per run (ParseRun records only the logs of planned jobs)."""
    jobs = [planned_job(sweep_id, r) for r in run_names]
    s3.put_object(Bucket=bucket, Key=layout.jobs_key(sweep_id), Body=jobs_document(jobs))
