"""A raw log that keeps crashing ParseRun lands in the stack's failure queue, and `status` counts it.

The real stack is synthesized and deployed into the embedded AWS (local mode); its S3 notification runs
the real ParseRun handler, made to crash here. After Lambda's two retries the event must reach the
queue the stack names as ParseRun's on-failure destination (issue 11, item 9), instead of vanishing.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote_plus

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.aws import outputs, runs
from trainsweep.cli import app
from trainsweep.local.server import EmbeddedAws
from trainsweep.spec import SweepPlan, plan_sweep

pytestmark = pytest.mark.slow

SWEEP = "demo-20260101-000000"
RUN = f"{SWEEP}-p3-1-64-e0"


def _plan() -> SweepPlan:
    """The sweep's plan: one job, whose run is RUN (ParseRun records only the logs of planned jobs)."""
    spec = {
        "name": "demo",
        "workload": {"model": "mnist-cnn", "epochs": 1},
        "instance_types": ["ml.p3.2xlarge"],
    }
    plan = plan_sweep({**spec, "batch_sizes": [64]}, sweep_id=SWEEP, enforce_budget=False)
    assert [j.run_names for j in plan.jobs] == [(RUN,)]
    return plan


def test_a_log_that_crashes_parse_run_is_queued_and_status_counts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("parser exploded")

    monkeypatch.setattr(runs, "planned_job", crash)  # what process_log calls for every sweep log
    with EmbeddedAws(stop_grace_s=1.0) as aws:
        aws.notifications._backoff_s = 0.01  # the retries themselves, not their pauses, are checked
        stack = aws.deploy()
        bucket = stack.output(outputs.BUCKET_NAME)
        queue_url = stack.output(outputs.PARSE_FAILURE_QUEUE_URL)
        s3, sqs = aws.client("s3"), aws.client("sqs")
        s3.put_object(Bucket=bucket, Key=layout.jobs_key(SWEEP), Body=_plan().jobs_json())

        runner = CliRunner()
        args = ["status", SWEEP, "--results", str(tmp_path), "--region", aws.region]
        quiet = runner.invoke(app, args, env={"COLUMNS": "300"})
        assert quiet.exit_code == 0, quiet.output
        assert f"ParseRun failures: none waiting in {queue_url}" in quiet.output

        key = layout.log_key(SWEEP, RUN)
        s3.put_object(Bucket=bucket, Key=key, Body=b"Epoch 1/1\n1 step training time: 0.5s\n")
        assert aws.notifications.drain(60)
        stats = aws.notifications.stats
        assert (stats.retried, stats.failed, stats.sent_to_destination) == (2, 1, 1)

        shown = runner.invoke(app, args, env={"COLUMNS": "300"})
        assert shown.exit_code == 0, shown.output
        assert f"warning: ParseRun failures: 1 log event(s) waiting in {queue_url}" in shown.output
        as_json = json.loads(runner.invoke(app, [*args, "--json"]).output)
        assert as_json["parse_failures"] == {
            "queue_url": queue_url,
            "waiting": 1,
            "in_flight": 0,
            "error": None,
        }

        [message] = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0)["Messages"]
        body = json.loads(message["Body"])
        assert body["requestContext"]["condition"] == "RetriesExhausted"
        assert body["requestContext"]["approximateInvokeCount"] == 3
        [record] = body["requestPayload"]["Records"]
        assert unquote_plus(record["s3"]["object"]["key"]) == key  # S3 events URL-encode keys
        assert body["responsePayload"]["errorMessage"] == "parser exploded"
