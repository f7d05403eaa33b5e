"""Log delivery: uploaded while the job runs, at exit, on SIGTERM, and when the worker is killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.container.conftest import (
    BUCKET,
    ENTRY_POINT,
    PREFIX,
    QUICK,
    job_env,
    log_settings,
    write_hyperparameters,
)
from trainsweep import layout
from trainsweep.logs import parse

pytestmark = pytest.mark.slow

LONG = {**QUICK, "epochs": "50", "batch-size": "16", "max-steps-per-epoch": "1000"}


def start(base: Path, hyper: dict[str, str], env: dict[str, str]) -> subprocess.Popen[str]:
    write_hyperparameters(base, hyper)
    return subprocess.Popen(
        [sys.executable, str(ENTRY_POINT)], env=job_env(base, env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_steps_in_s3(s3, key: str, timeout: float = 120) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if key in s3.keys():  # noqa: SIM118 (a list of S3 keys, not a dict)
            body = s3.get(key)
            if b"2 step training time" in body:
                return body
        time.sleep(0.5)
    raise AssertionError(f"{key} never showed training steps in S3")


def test_the_log_is_uploaded_while_the_job_runs_and_once_more_at_exit(run_job, s3_server):
    res = run_job(
        {**QUICK, "epochs": "2", "batch-size": "16", "run-names": "d1-local-cpu-16-e1", **log_settings("1")},
        env=s3_server.env(),
    )
    assert res.returncode == 0, res.stderr
    assert s3_server.get(f"{PREFIX}d1-local-cpu-16-e1.log") == res.log("d1-local-cpu-16-e1").encode()
    assert s3_server.keys() == [f"{PREFIX}d1-local-cpu-16-e1.log"]
    tags = s3_server.client.get_object_tagging(Bucket=BUCKET, Key=f"{PREFIX}d1-local-cpu-16-e1.log")["TagSet"]
    assert {"Key": layout.RAW_LOG_TAG_KEY, "Value": layout.RAW_LOG_TAG_VALUE} in tags  # raw-log lifecycle


def test_sigterm_stops_the_job_and_leaves_the_whole_log_in_s3(tmp_path, s3_server):
    name = "d2-local-cpu-16-e1"
    proc = start(tmp_path, {**LONG, "run-names": name, **log_settings("1")}, s3_server.env())
    try:
        partial = wait_for_steps_in_s3(s3_server, f"{PREFIX}{name}.log")
        assert b"Epoch time" not in partial or b"run_stop" not in partial
        proc.send_signal(signal.SIGTERM)  # what StopTrainingJob does to the container's main process
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143
    assert "stopped by SIGTERM" in (tmp_path / "output" / "failure").read_text()
    final = s3_server.get(f"{PREFIX}{name}.log")
    assert final == (tmp_path / "output" / "data" / "logs" / f"{name}.log").read_bytes()
    assert final.startswith(partial)
    run = parse(final, name=name)
    assert run.status == "failed" and run.extra["failure_kind"] == "stopped"
    assert run.steps_total >= 2


def test_a_killed_worker_still_leaves_its_log_and_a_failure(tmp_path, s3_server):
    name = "d3-local-cpu-16-e1"
    proc = start(tmp_path, {**LONG, "run-names": name, **log_settings("1")}, s3_server.env())
    try:
        wait_for_steps_in_s3(s3_server, f"{PREFIX}{name}.log")
        workers = psutil.Process(proc.pid).children(recursive=True)
        assert workers
        for w in workers:
            w.send_signal(signal.SIGKILL)  # e.g. the kernel's out-of-memory killer
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    failure = (tmp_path / "output" / "failure").read_text()
    assert "killed by signal 9" in failure
    final = s3_server.get(f"{PREFIX}{name}.log")
    run = parse(final, name=name)
    assert run.status == "failed"
    assert "killed by signal 9" in (run.failure_reason or "")
    summary = json.loads((tmp_path / "output" / "data" / "job.json").read_text())
    assert summary["cells"][0]["status"] == "error"
