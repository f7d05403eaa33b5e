"""During ``trainsweep run --local``, another process that finds the embedded AWS's port is refused by
every service the sweep uses, whatever credentials it brings, and each refusal lands in the run's log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from .conftest import sigint_as_a_terminal_gives_it, write_mnist

pytestmark = pytest.mark.slow

INTRUDER = Path(__file__).resolve().parents[1] / "aws_intruder.py"


def _spec(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    write_mnist(data / "mnist.npz", train=256, test=64)
    spec = {
        "name": "guarded",
        "workload": {"model": "mnist-cnn", "epochs": 1000, "synthetic": False},  # interrupted
        "instance_types": ["local"],
        "batch_sizes": [16],
        "max_runtime_seconds": 600,
        "max_concurrency": 1,
        "data": data.resolve().as_uri(),
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _training_started(cli: psutil.Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in cli.children(recursive=True):
            try:
                if any("train.py" in part for part in child.cmdline()):
                    return
            except psutil.Error:
                continue
        time.sleep(0.5)
    raise AssertionError("no training process started")


def _listening_port(cli: psutil.Process) -> int:
    ports = {
        c.laddr.port
        for c in cli.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.ip == "127.0.0.1"
    }
    assert len(ports) == 1, ports
    return ports.pop()


def test_another_process_is_refused_during_a_local_sweep_and_logged(tmp_path: Path) -> None:
    out = tmp_path / "results"
    trainsweep = str(Path(sys.executable).parent / "trainsweep")
    cli = subprocess.Popen(
        [trainsweep, "run", str(_spec(tmp_path)), "--local", "--no-watch", "--out", str(out)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=sigint_as_a_terminal_gives_it,
    )
    try:
        process = psutil.Process(cli.pid)
        _training_started(process, timeout=300)
        endpoint = f"http://127.0.0.1:{_listening_port(process)}"
        attempts = {}
        for who, key, secret in (
            ("fixed test keys", "testing", "testing"),
            ("another key", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            ("unsigned", "-", "-"),
        ):
            done = subprocess.run(
                [sys.executable, str(INTRUDER), endpoint, key, secret],
                capture_output=True,
                text=True,
                timeout=300,
                env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            )
            assert done.returncode == 0, done.stderr
            attempts[who] = json.loads(done.stdout)
        cli.send_signal(signal.SIGINT)
        output, _ = cli.communicate(timeout=180)
    finally:
        if cli.poll() is None:
            cli.kill()
    for who, got in attempts.items():
        assert got and all(status == 403 for status in got.values()), (who, got)
    text = output.decode(errors="replace")
    assert cli.returncode == 130, text
    folders = [d for d in out.iterdir() if d.is_dir()]
    assert len(folders) == 1, folders
    log = (out / f"{folders[0].name}.log").read_text()
    refusals = [line for line in log.splitlines() if "trainsweep.local.access" in line and "refused" in line]
    assert len(refusals) >= sum(len(got) for got in attempts.values()), log[-3000:]
    assert any("access key testing is not this sweep's" in line for line in refusals)
    assert any("/moto-api/reset" in line for line in refusals)
    assert not list(folders[0].rglob("x.log"))  # nothing the intruder tried to write came home
