"""Fixtures for the training container: a job folder laid out like /opt/ml, the entry point as a process,
and a moto S3 server the container uploads its logs to (through AWS_ENDPOINT_URL, as in local mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT = ROOT / "container" / "train.py"
BUCKET = "trainsweep-test-logs"
PREFIX = "sweeps/s-test/logs/"

# tiny, fast settings: a few steps of the MNIST CNN on random data
QUICK = {
    "workload": "mnist-cnn",
    "synthetic": "true",
    "max-steps-per-epoch": "5",
    "max-eval-batches": "2",
}


@dataclass
class JobResult:
    base: Path
    returncode: int
    stdout: str
    stderr: str

    @property
    def failure(self) -> str | None:
        p = self.base / "output" / "failure"
        return p.read_text() if p.is_file() else None

    def log_path(self, run_name: str) -> Path:
        return self.base / "output" / "data" / "logs" / f"{run_name}.log"

    def log(self, run_name: str) -> str:
        return self.log_path(run_name).read_text()

    @property
    def job_summary(self) -> dict:
        return json.loads((self.base / "output" / "data" / "job.json").read_text())


def job_env(base: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SAGEMAKER_BASE_DIR=str(base),
        TRAINING_JOB_NAME="test-job",
        CUDA_VISIBLE_DEVICES="",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    env.update(extra or {})
    return env


def write_hyperparameters(base: Path, hyper: dict[str, str] | str | None) -> None:
    cfg = base / "input" / "config"
    cfg.mkdir(parents=True, exist_ok=True)
    if hyper is None:
        return
    (cfg / "hyperparameters.json").write_text(hyper if isinstance(hyper, str) else json.dumps(hyper))


@pytest.fixture
def run_job(tmp_path: Path) -> Callable[..., JobResult]:
    """Run ``container/train.py`` against a fresh SAGEMAKER_BASE_DIR; returns its result."""
    counter = iter(range(1000))

    def run(hyper: dict[str, str] | str | None, *, env: dict[str, str] | None = None,
            channel: Callable[[Path], None] | None = None, timeout: float = 300) -> JobResult:  # fmt: skip
        base = tmp_path / f"job{next(counter)}"
        write_hyperparameters(base, hyper)
        if channel is not None:
            ch = base / "input" / "data" / "train"
            ch.mkdir(parents=True)
            channel(ch)
        p = subprocess.run(
            [sys.executable, str(ENTRY_POINT)],
            env=job_env(base, env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return JobResult(base, p.returncode, p.stdout, p.stderr)

    return run


@dataclass
class S3Server:
    endpoint_url: str
    client: object

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[attr-defined]

    def keys(self) -> list[str]:
        resp = self.client.list_objects_v2(Bucket=BUCKET)  # type: ignore[attr-defined]
        return sorted(o["Key"] for o in resp.get("Contents", []))


@pytest.fixture
def s3_server() -> Iterator[S3Server]:
    """A moto server on a free loopback port with the log bucket created."""
    import boto3
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        port = int(server.get_host_and_port()[1])
        url = f"http://127.0.0.1:{port}"
        # moto keeps its state per process: start every test from an empty S3
        urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST")).close()
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield S3Server(url, client)
    finally:
        server.stop()


def log_settings(period_s: str = "30") -> dict[str, str]:
    return {
        "trainsweep-log-bucket": BUCKET,
        "trainsweep-log-prefix": PREFIX,
        "trainsweep-log-upload-seconds": period_s,
    }


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Start this process's instrumentation session for a cell (InstrumentConfig fields as keywords, plus
    ``workload``), hooks installed; removed after the test."""
    from trainsweep.instrument import auto
    from trainsweep.instrument.session import activate, open_session
    from trainsweep.training.contract import InstrumentConfig

    installed: list[Any] = []

    def start(workload: str = "train.py", **settings: Any) -> Any:
        cfg = InstrumentConfig(
            **{
                "run_name": "cell",
                "batch_size": 4,
                "epochs": 2,
                "log_file": str(tmp_path / "cell.log"),
                "status_file": str(tmp_path / "status.json"),
                "prediction_file": str(tmp_path / "prediction.json"),
                **settings,
            }
        )
        session = open_session(cfg, workload=workload, rank=0)
        installed.append(auto.install(session))
        activate(session)
        return session

    yield start
    for i in installed:
        i.remove()
        i.session.close()
    activate(None)


def finish(session: Any) -> Any:
    """End a session and parse the log it wrote (a RunTimings)."""
    from trainsweep.logs.parser import parse

    session.finish()
    session.close()
    return parse(session.writer.path)


def write_source(tmp_path: Path, files: dict[str, str]) -> Path:
    """A script's source folder ``tmp_path/src`` holding ``files`` (name, which may hold folders -> text)."""
    root = tmp_path / "src"
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root
