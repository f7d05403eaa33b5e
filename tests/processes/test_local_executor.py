"""The local SageMaker executor: the /opt/ml contract, statuses, failure reasons, MaxRuntime and Stop."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from trainsweep.local.executor import JobState, LocalTrainingJob, TrainingJobRequest


@pytest.fixture
def make_job(tmp_path: Path):
    """Factory: a job running the given Python source as its entry point."""

    def make(source: str, **request_kw) -> tuple[LocalTrainingJob, list[JobState], list[str]]:
        entry = tmp_path / f"entry{len(list(tmp_path.glob('entry*')))}.py"
        entry.write_text(textwrap.dedent(source))
        workdir = tmp_path / f"job{len(list(tmp_path.glob('job*')))}"
        workdir.mkdir()
        seen: list[JobState] = []
        lines: list[str] = []

        def fetch(uri: str, dest: Path) -> None:
            (dest / "data.txt").write_text(f"from {uri}")

        request_kw.setdefault("hyperparameters", {"epochs": "1"})
        job = LocalTrainingJob(
            TrainingJobRequest(name="test-local-cpu-32-e1", **request_kw),
            entry_point=entry,
            workdir=workdir,
            fetch_channel=fetch,
            on_change=lambda s: seen.append(JobState(s.status, s.secondary_status)),
            on_output=lines.extend,
            stop_grace_s=1.0,
            has_gpu=lambda: False,
            poll_s=0.02,
        )
        return job, seen, lines

    return make


def test_a_job_that_exits_zero_completes_and_sees_the_sagemaker_layout(make_job) -> None:
    job, seen, lines = make_job(
        """
        import json, os, pathlib
        base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
        hp = json.loads((base / "input/config/hyperparameters.json").read_text())
        data = (base / "input/data/train/data.txt").read_text()
        (base / "model/model.txt").write_text(hp["epochs"])
        print("epochs", hp["epochs"], data, os.environ["TRAINING_JOB_NAME"])
        """,
        channels={"train": "s3://bucket/data/"},
    )
    job.start()
    assert job.wait(30)
    assert job.state.status == "Completed"
    assert job.state.failure_reason is None
    assert job.state.billable_seconds is not None and job.state.billable_seconds >= 1
    assert (job.workdir / "model" / "model.txt").read_text() == "1"
    assert "epochs 1 from s3://bucket/data/ test-local-cpu-32-e1" in lines
    secondaries = [s.secondary_status for s in seen]
    assert secondaries[:3] == ["Starting", "Downloading", "Training"]
    assert seen[-1].status == "Completed"


def test_the_failure_file_becomes_the_failure_reason(make_job) -> None:
    job, seen, _ = make_job(
        """
        import os, pathlib, sys
        base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
        (base / "output/failure").write_text("OutOfMemoryError: CUDA out of memory at batch size 4096")
        sys.exit(1)
        """
    )
    job.start()
    assert job.wait(30)
    assert job.state.status == "Failed"
    assert job.state.failure_reason == "OutOfMemoryError: CUDA out of memory at batch size 4096"
    assert seen[-1].status == "Failed"


def test_without_a_failure_file_the_reason_names_the_exit_code_and_output_tail(make_job) -> None:
    job, _, _ = make_job("import sys\nprint('boom: no such dataset')\nsys.exit(3)\n")
    job.start()
    assert job.wait(30)
    assert job.state.status == "Failed"
    assert "exited with code 3" in (job.state.failure_reason or "")
    assert "boom: no such dataset" in (job.state.failure_reason or "")


def test_max_runtime_stops_a_job_that_runs_too_long(make_job) -> None:
    job, _, _ = make_job("import time\nprint('start', flush=True)\ntime.sleep(60)\n", max_runtime_s=1.0)
    t0 = time.monotonic()
    job.start()
    assert job.wait(30)
    assert time.monotonic() - t0 < 20
    assert job.state.status == "Stopped"
    assert job.state.secondary_status == "MaxRuntimeExceeded"
    assert "MaxRuntimeExceeded" in (job.state.failure_reason or "")


def test_stop_ends_the_job_stopped_and_kills_a_process_that_ignores_sigterm(make_job, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    job, seen, _ = make_job(
        f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        while True:
            time.sleep(0.1)
        """
    )
    job.start()
    deadline = time.monotonic() + 20
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pidfile.exists(), "the entry point did not start"
    job.stop()
    assert job.wait(30)
    assert job.state.status == "Stopped"
    assert "Stopping" in [s.status for s in seen]
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "a child of the training process survived the stop"


@pytest.mark.parametrize(
    ("instance_type", "reason"),
    [
        ("local_gpu", "needs an NVIDIA GPU"),  # this machine has no GPU
        ("ml.p3.2xlarge", "local mode runs instance types"),  # a cloud type is refused locally
    ],
)
def test_an_instance_type_local_mode_cannot_run_fails_with_a_clear_reason(
    make_job, instance_type: str, reason: str
) -> None:
    job, _, _ = make_job("print('never runs')\n", instance_type=instance_type)
    job.start()
    assert job.wait(30)
    assert job.state.status == "Failed"
    assert reason in (job.state.failure_reason or "")


def test_hyperparameters_arrive_as_strings_in_json(make_job) -> None:
    job, _, lines = make_job(
        """
        import json, os, pathlib
        base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
        print(json.dumps(json.loads((base / "input/config/hyperparameters.json").read_text())))
        """,
        hyperparameters={"batch-size": "32", "synthetic": "true"},
    )
    job.start()
    assert job.wait(30)
    assert json.loads(lines[-1]) == {"batch-size": "32", "synthetic": "true"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): look at its state.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.split(")")[-1].split()[0] != "Z"


def test_a_two_host_job_runs_two_processes_that_meet_over_loopback(make_job) -> None:
    # Each host reads its own resourceconfig and the shared data; algo-2 connects to algo-1 where
    # SM_MASTER_ADDR/PORT say it listens, as torchrun's rendezvous does.
    job, _, lines = make_job(
        """
        import json, os, pathlib, socket, time
        base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
        rc = json.loads((base / "input/config/resourceconfig.json").read_text())
        assert rc["current_host"] == os.environ["SM_CURRENT_HOST"]
        assert rc["hosts"] == json.loads(os.environ["SM_HOSTS"]) == ["algo-1", "algo-2"]
        data = (base / "input/data/train/data.txt").read_text()
        addr = (os.environ["SM_MASTER_ADDR"], int(os.environ["SM_MASTER_PORT"]))
        if rc["current_host"] == "algo-1":
            with socket.create_server(addr) as srv:
                conn, _ = srv.accept()
                print("algo-1 heard", conn.recv(64).decode(), data)
        else:
            for _ in range(200):
                try:
                    with socket.create_connection(addr) as c:
                        c.sendall(b"algo-2")
                    break
                except OSError:
                    time.sleep(0.05)
        """,
        channels={"train": "s3://bucket/data/"},
        instance_count=2,
    )
    job.start()
    assert job.wait(60)
    assert job.state.status == "Completed", job.state.failure_reason
    assert "algo-1 heard algo-2 from s3://bucket/data/" in lines  # the job's stream is algo-1's output
    assert (job.workdir / "hosts" / "algo-2" / "input" / "config" / "resourceconfig.json").is_file()


def test_one_failing_host_fails_the_job_names_the_host_and_stops_the_others(make_job) -> None:
    job, _, _ = make_job(
        """
        import os, pathlib, sys, time
        if os.environ["SM_CURRENT_HOST"] == "algo-3":
            base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
            (base / "output/failure").write_text("ValueError: bad shard")
            sys.exit(1)
        time.sleep(120)  # the other hosts would wait for it forever
        """,
        instance_count=3,
    )
    started = time.monotonic()
    job.start()
    assert job.wait(60)
    assert time.monotonic() - started < 30
    assert job.state.status == "Failed"
    assert job.state.failure_reason == "ValueError: bad shard (algo-3)"


@pytest.mark.parametrize(("instance_type", "count"), [("local", 9), ("local_gpu", 2)])
def test_more_local_hosts_than_this_machine_runs_fail_with_a_clear_reason(
    make_job, instance_type: str, count: int
) -> None:
    job, _, _ = make_job("print('never runs')\n", instance_type=instance_type, instance_count=count)
    job.start()
    assert job.wait(30)
    assert job.state.status == "Failed"
    assert "one host per job" in (job.state.failure_reason or "") or "1 to 8 hosts" in (
        job.state.failure_reason or ""
    )


def test_a_job_keeps_its_whole_output_where_asked_after_its_folder_goes(make_job, tmp_path) -> None:
    job, _, _ = make_job(
        """
        import os, pathlib, sys
        base = pathlib.Path(os.environ["SAGEMAKER_BASE_DIR"])
        cells = base / "output/data/cells"
        cells.mkdir(parents=True)
        (cells / "r1.output.txt").write_text("the cell's own\\n")
        print("to stdout")
        print("usage: train.py: error: unrecognized arguments: --lr", file=sys.stderr)
        sys.exit(2)
        """
    )
    job.keep_output = tmp_path / "kept" / job.request.name
    job.start()
    assert job.wait(30)
    kept = job.keep_output
    assert "to stdout" in (kept / "algo-1.txt").read_text()
    assert "unrecognized arguments: --lr" in (kept / "algo-1.txt").read_text()
    assert (kept / "cells" / "r1.output.txt").read_text() == "the cell's own\n"
