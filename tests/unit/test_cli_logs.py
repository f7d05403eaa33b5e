"""``trainsweep logs JOB_NAME``: a job's complete CloudWatch log, through the CLI app, against moto."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from trainsweep.cli import app

GROUP = "/aws/sagemaker/TrainingJobs"
JOB = "demo-20260101-000000-ml-p3-2xlarge-256-e0"
PAGE = 10_000  # GetLogEvents' largest page (and its default)
runner = CliRunner()


@pytest.fixture
def logs() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("logs", region_name="us-east-1")
        client.create_log_group(logGroupName=GROUP)
        yield client


def _stream(client: Any, name: str, messages: list[str]) -> None:
    client.create_log_stream(logGroupName=GROUP, logStreamName=name)
    now = int(time.time() * 1000)  # PutLogEvents drops events older than 14 days
    for start in range(0, len(messages), PAGE):  # PutLogEvents takes at most 10,000 events per call
        chunk = messages[start : start + PAGE]
        client.put_log_events(
            logGroupName=GROUP,
            logStreamName=name,
            logEvents=[{"timestamp": now + start + i, "message": m} for i, m in enumerate(chunk)],
        )


def _host_lines(host: int, n: int) -> list[str]:
    return [f"host {host} line {i}" for i in range(n)]


def test_logs_writes_every_event_of_every_host_in_host_order_past_the_first_page(
    logs: Any, tmp_path: Path
) -> None:
    long = 2 * PAGE + 7  # three pages: the seed's one-call export kept only the first 10,000 lines
    # Created out of order; algo-10 sorts before algo-2 by name, and after it by host.
    _stream(logs, f"{JOB}/algo-10-1600000003", _host_lines(10, 3))
    _stream(logs, f"{JOB}/algo-1-1600000001", _host_lines(1, long))
    _stream(logs, f"{JOB}/algo-2-1600000002", _host_lines(2, 5))
    _stream(logs, f"{JOB}-other/algo-1-1600000009", ["another job's stream"])
    out = tmp_path / "got" / "job.log"

    result = runner.invoke(app, ["logs", JOB, "--out", str(out), "--region", "us-east-1"])

    assert result.exit_code == 0, result.output
    expected = _host_lines(1, long) + _host_lines(2, 5) + _host_lines(10, 3)
    assert out.read_text().splitlines() == expected
    assert f"Wrote {len(expected)} lines from 3 stream(s)" in result.output
    assert not list(out.parent.glob(".*partial"))


def test_logs_without_out_prints_the_log_to_stdout(logs: Any) -> None:
    _stream(logs, f"{JOB}/algo-1-1600000001", ["Epoch 1/2", "1 step training time: 0.25s"])

    result = runner.invoke(app, ["logs", JOB])

    assert result.exit_code == 0, result.output
    assert result.stdout == "Epoch 1/2\n1 step training time: 0.25s\n"


def test_logs_of_a_job_without_streams_is_a_clear_error(logs: Any, tmp_path: Path) -> None:
    _stream(logs, f"{JOB}-other/algo-1-1600000009", ["another job's stream"])
    out = tmp_path / "job.log"

    result = runner.invoke(app, ["logs", JOB, "--out", str(out)])

    assert result.exit_code == 1
    assert f"no CloudWatch log stream for training job '{JOB}' in {GROUP}" in result.output
    assert not out.exists()


def test_logs_without_the_log_group_is_a_clear_error(tmp_path: Path) -> None:
    with mock_aws():
        result = runner.invoke(app, ["logs", JOB, "--out", str(tmp_path / "job.log")])
    assert result.exit_code == 1
    assert "no CloudWatch log stream" in result.output


def test_logs_into_a_folder_is_refused_before_reading(logs: Any, tmp_path: Path) -> None:
    _stream(logs, f"{JOB}/algo-1-1600000001", ["x"])
    result = runner.invoke(app, ["logs", JOB, "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "is a folder" in result.output


def test_the_default_log_group_is_the_one_sagemaker_writes_to() -> None:
    from trainsweep.aws.config import DEFAULT_TRAINING_LOG_GROUP
    from trainsweep.cli.logs import DEFAULT_LOG_GROUP

    assert DEFAULT_LOG_GROUP == DEFAULT_TRAINING_LOG_GROUP == GROUP


def test_a_stream_whose_end_is_never_reached_leaves_no_half_file(
    logs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainsweep.aws import cloudwatch

    _stream(logs, f"{JOB}/algo-1-1600000001", ["a", "b"])

    def endless(*args: Any, **kwargs: Any) -> Iterator[str]:
        yield "a"
        raise cloudwatch.UnfinishedStreamError("100 empty pages in a row, each with a new token")

    monkeypatch.setattr(cloudwatch, "iter_log_messages", endless)
    out = tmp_path / "job.log"
    result = runner.invoke(app, ["logs", JOB, "--out", str(out)])
    assert result.exit_code == 1
    assert "could not be read to its end: 100 empty pages" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_local_jobs_output_is_printed_from_the_downloaded_sweep(tmp_path: Path) -> None:
    job = tmp_path / "s-20260101-000000" / "job-output" / JOB
    job.mkdir(parents=True)
    (job / "algo-1.txt").write_text("first host\n")
    (job / "algo-2.txt").write_text("second host\n")
    result = runner.invoke(app, ["logs", JOB, "--local", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output == "first host\nsecond host\n"


def test_a_local_job_that_is_not_there_says_where_it_looked(tmp_path: Path) -> None:
    result = runner.invoke(app, ["logs", JOB, "--local", "--results", str(tmp_path)])
    assert result.exit_code != 0
    assert f"no local job {JOB!r} under {tmp_path}" in result.output
