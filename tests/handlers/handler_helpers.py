"""Helpers shared by the handler tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from trainsweep import layout

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


def put_planned_runs(s3: Any, sweep_id: str, *run_names: str, bucket: str = BUCKET) -> None:
    """The sweep's ``jobs.json`` with one job per run (ParseRun records only the logs of planned jobs)."""
    jobs = [{"sweep_id": sweep_id, "job_name": r, "run_names": [r]} for r in run_names]
    s3.put_object(Bucket=bucket, Key=layout.jobs_key(sweep_id), Body=json.dumps({"jobs": jobs}).encode())
