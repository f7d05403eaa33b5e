"""Each bad input: a clear message in the failure file and the log, a non-zero exit, the log in S3."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.container.conftest import PREFIX, QUICK, log_settings
from tests.mnist_data import write_mnist
from trainsweep.logs import parse

pytestmark = pytest.mark.slow

RUN = "bad-local-cpu-16-e1"
BASE = {**QUICK, "epochs": "1", "batch-size": "16", "run-names": RUN}


def tiny_mnist(ch: Path) -> None:
    write_mnist(ch / "mnist.npz", train=10, test=4)


NO_EPOCHS = {k: v for k, v in BASE.items() if k != "epochs"}
OOM_ENV = {"TRAINSWEEP_MEMORY_LIMIT_MB": "300"}
CASES = {
    "missing epochs": (NO_EPOCHS, None, {}, "missing hyperparameter 'epochs'"),
    "non-numeric batch size": (
        {**BASE, "batch-size": "big"},
        None,
        {},
        "'batch-size' must be a whole number",
    ),
    "unknown workload": ({**BASE, "workload": "gpt-5"}, None, {}, "unknown workload 'gpt-5'"),
    "missing channel": ({**BASE, "synthetic": "false"}, None, {}, "channel 'train' is missing"),
    "dataset smaller than a batch": ({**BASE, "synthetic": "false"}, tiny_mnist, {}, "dataset too small"),
    "batch does not fit in memory": (
        {**BASE, "batch-size": "4096"},
        None,
        OOM_ENV,
        "out of memory at batch size",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_clearly_and_still_delivers_the_log(case, run_job, s3_server):
    hyper, channel, env, message = CASES[case]
    res = run_job({**hyper, **log_settings()}, channel=channel, env={**s3_server.env(), **env})
    assert res.returncode != 0
    assert res.failure is not None and message in res.failure
    local = res.log(RUN)
    assert message in local
    assert s3_server.get(f"{PREFIX}{RUN}.log") == local.encode()
    run = parse(res.log_path(RUN))
    assert run.status == "failed"
    assert message in (run.failure_reason or "")


def test_a_missing_hyperparameters_file_fails_clearly(run_job):
    res = run_job(None)
    assert res.returncode != 0
    assert res.failure is not None and "hyperparameters file not found" in res.failure
    assert "hyperparameters file not found" in res.log("test-job")  # TRAINING_JOB_NAME names the log


def test_packed_mode_needs_one_run_name_per_batch_size(run_job):
    res = run_job({**QUICK, "epochs": "1", "batch-sizes": "8,16", "run-names": "only-one"})
    assert res.returncode != 0
    assert "one run per batch size" in (res.failure or "")
    assert "one run per batch size" in res.log("only-one")
