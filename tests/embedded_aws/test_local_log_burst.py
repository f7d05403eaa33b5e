"""Many cells finishing at once in local mode (issue 13, item 11): every log upload is parsed by the real
ParseRun through S3 notifications, and no artefact is written twice with different bytes.

The embedded AWS gets a stack of the results bucket (versioned, so every write of an artefact stays
visible) and ParseRun, notified for ``sweeps/`` logs as the real stack does. 1,000 logs are uploaded
within a minute, some of them twice (a job re-uploads its log; the state machine's own ParseRun call
parses it too, on AWS and here). CI runs 200 (about a minute on a loaded 2-core machine; ParseRun
invocations run concurrently in this process, each with its own environment);
``benchmarks/bench_log_burst.py`` runs 1,000.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.embedded_aws.test_local_server import CDK_PARAMETERS, LAMBDA_ROLE, with_lambda_asset
from tests.handlers.handler_helpers import jobs_document, planned_job
from trainsweep import layout
from trainsweep.local.deploy import StackArtifact
from trainsweep.local.server import EmbeddedAws

UPLOADS = 200
REUPLOADED = 20
SWEEP = "burst"


def _template() -> dict[str, Any]:
    parse_run = {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Code": {
                "S3Bucket": {"Fn::Sub": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}"},
                "S3Key": "code.zip",
            },
            "Handler": "handler.handler",
            "Runtime": "python3.12",
            "Timeout": 300,
            "Role": {"Fn::GetAtt": ["Role", "Arn"]},
            "Environment": {
                "Variables": {"TRAINSWEEP_FUNCTION": "parse_run", "TRAINSWEEP_BUCKET": {"Ref": "Bucket"}}
            },
        },
    }
    notifications = {
        "Type": "Custom::S3BucketNotifications",
        "Properties": {
            "ServiceToken": {"Fn::GetAtt": ["ParseRun", "Arn"]},
            "BucketName": {"Ref": "Bucket"},
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {
                            "Key": {
                                "FilterRules": [
                                    {"Name": "prefix", "Value": layout.SWEEPS_PREFIX},
                                    {"Name": "suffix", "Value": layout.TRIGGER_SUFFIX_LOG},
                                ]
                            }
                        },
                        "LambdaFunctionArn": {"Fn::GetAtt": ["ParseRun", "Arn"]},
                    }
                ]
            },
            "Managed": True,
        },
    }
    return {
        "Parameters": CDK_PARAMETERS,
        "Resources": {
            "Bucket": {
                "Type": "AWS::S3::Bucket",
                "Properties": {"VersioningConfiguration": {"Status": "Enabled"}},
            },
            "Role": LAMBDA_ROLE,
            "ParseRun": parse_run,
            "Notifications": notifications,
        },
        "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}},
    }


@pytest.fixture
def stack_artifact(tmp_path: Path) -> StackArtifact:
    return artifact(tmp_path)


def artifact(tmp_path: Path) -> StackArtifact:
    """The bucket + ParseRun stack, deployable by ``EmbeddedAws.deploy_template``."""
    return with_lambda_asset(tmp_path, "LogBurst", _template())


def _log(n: int) -> bytes:
    """A small seed-style log whose step times differ per run (so each run's artefacts differ)."""
    lines = ["Tempo de Inicializacao: 1.5", "Epoch 1/1"]
    lines += [f"{s} step training time: {0.2 + 0.0001 * n + 0.01 * s:.6f}s" for s in range(1, 6)]
    lines += ["Validation time: 0.300000s", "Epoch time: 1.800000", "Duracao do treinamento: 5.0"]
    return ("\n".join(lines) + "\n").encode()


def _run_name(n: int) -> str:
    return f"{SWEEP}-p3-1-{n + 1}-e0"


@pytest.mark.timeout(900)
def test_logs_uploaded_at_once_are_all_parsed_none_twice_into_different_bytes(
    stack_artifact: StackArtifact,
) -> None:
    figures = burst(stack_artifact, UPLOADS, REUPLOADED)
    assert figures["uploads_s"] < 60, figures


def burst(stack_artifact: StackArtifact, uploads: int, reuploaded: int) -> dict[str, float]:
    """Upload ``uploads`` logs (then ``reuploaded`` of them again, same bytes) into a fresh embedded AWS,
    wait for the notifications as ``run_local_sweep`` does, check every run is parsed and no artefact was
    written twice with different bytes; returns the upload and parse wall times."""
    with EmbeddedAws(notification_workers=2) as aws:
        stack = aws.deploy_template(stack_artifact)
        bucket = stack.output("BucketName")
        s3 = aws.client("s3")

        # ParseRun records only the logs of the sweep's planned jobs (one run each here)
        planned = [planned_job(SWEEP, _run_name(n)) for n in range(uploads)]
        s3.put_object(Bucket=bucket, Key=layout.jobs_key(SWEEP), Body=jobs_document(planned))

        def upload(n: int) -> None:
            s3.put_object(Bucket=bucket, Key=layout.log_key(SWEEP, _run_name(n)), Body=_log(n))

        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(upload, [*range(uploads), *range(reuploaded)]))
        uploads_s = time.monotonic() - t0

        # as run_local_sweep waits: for as long as the backlog moves
        assert aws.notifications.drain(stall_s=120), f"{aws.notifications.pending} notifications left"
        parsed_s = time.monotonic() - t0
        stats = aws.notifications.stats
        assert (stats.queued, stats.delivered, stats.failed) == (
            uploads + reuploaded,
            uploads + reuploaded,
            0,
        )

        results = layout.results_prefix(SWEEP)
        contents: dict[str, set[str]] = defaultdict(set)
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=results):
            for v in page.get("Versions", []):
                contents[v["Key"]].add(v["ETag"])
        records = {k for k in contents if k.startswith(results + layout.RUNS_DIR + "/")}
        assert records == {results + layout.run_record_path(_run_name(n)) for n in range(uploads)}
        assert {k: e for k, e in contents.items() if len(e) > 1} == {}, (
            "an artefact was rewritten differently"
        )
        record = json.loads(
            s3.get_object(Bucket=bucket, Key=results + layout.run_record_path(_run_name(7)))["Body"].read()
        )
        assert record["status"] == "complete"
    return {"uploads_s": uploads_s, "parsed_s": parsed_s}


# ---- the drain that decides when a local run downloads (fast, no embedded AWS) ----------------------


def _notifications(delays: list[float]) -> Any:
    """An AsyncNotifications whose deliveries just take these times, queued at once."""
    from trainsweep.local.notifications import AsyncNotifications

    notes = AsyncNotifications(workers=1)
    it = iter(delays)
    notes._deliver = lambda event: time.sleep(next(it))  # type: ignore[method-assign]
    notes.install()
    for _ in delays:
        notes._enqueue("123456789012", {}, "arn", "us-east-1")
    return notes


def test_a_backlog_longer_than_the_stall_limit_is_waited_for_while_it_moves() -> None:
    notes = _notifications([0.05] * 40)  # 2 s of parsing, never 0.5 s without progress
    try:
        assert notes.drain(stall_s=0.5)
        assert notes.pending == 0
    finally:
        notes.close()


def test_a_handler_that_hangs_ends_the_wait_after_the_stall_limit() -> None:
    notes = _notifications([0.0, 3.0])
    try:
        t0 = time.monotonic()
        assert not notes.drain(stall_s=0.5)
        assert time.monotonic() - t0 < 2.5 and notes.pending == 1
    finally:
        notes.drain(5)
        notes.close()
