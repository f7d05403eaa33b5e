"""ParseRun's on-failure queue as users see it: `trainsweep status` in the cloud, the end of `run --local`.

The queue itself, the real stack and a real crash are in tests/e2e/test_parse_failure_queue.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from trainsweep.aws.failures import QueuedFailures, queued_failures
from trainsweep.cli import app


@mock_aws
def test_the_count_reads_the_queue_without_taking_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="ParseFailures")["QueueUrl"]
    assert queued_failures(sqs, url) == QueuedFailures(url, 0, 0)
    assert not queued_failures(sqs, url).alarming
    for i in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f'{{"n": {i}}}')
    counted = queued_failures(sqs, url)
    assert (counted.waiting, counted.in_flight, counted.alarming) == (2, 0, True)
    assert queued_failures(sqs, url).waiting == 2  # counting hid nothing
    assert counted.line().startswith(f"ParseRun failures: 2 log event(s) waiting in {url}")


@mock_aws
def test_a_queue_that_cannot_be_read_is_said_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/gone"
    counted = queued_failures(boto3.client("sqs"), url)
    assert counted.alarming and counted.waiting is None
    assert counted.line().startswith(f"ParseRun failures: cannot read {url} (")


def test_a_local_run_says_how_many_log_events_parse_run_failed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep.sweeps import local as sweep
    from trainsweep.sweeps.result import SweepRun

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\ninstance_types: [local]\n"
        "batch_sizes: [32]\n"
    )

    def finished(*_args: Any, **_kwargs: Any) -> SweepRun:
        return SweepRun(
            "t-1",
            tmp_path / "t-1",
            "SUCCEEDED",
            None,
            parse_failures=QueuedFailures("http://127.0.0.1:1/123456789012/q", 3, 0),
        )

    monkeypatch.setattr(sweep, "run_local_sweep", finished)
    result = CliRunner().invoke(
        app, ["run", str(spec), "--local", "--out", str(tmp_path)], env={"COLUMNS": "300"}
    )
    assert "warning: ParseRun failed on 3 raw-log event(s) even after Lambda's two retries" in result.output
