"""End to end: ``trainsweep run SPEC --local`` through the real stack, state machine, handlers and container.

A tiny sweep of the CNN on a small MNIST-shaped dataset uploaded from ``file://`` as the ``train``
channel: batch size 16 fits, batch size 128 does not (the dataset holds fewer samples than one batch),
so the container fails that cell with a real reason. The test checks every cell's status and every
artefact, that nothing is left running, then grows the dataset and resumes: only the failed cell runs
again and the report covers both.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

from .conftest import sigint_as_a_terminal_gives_it, write_mnist, write_spec

pytestmark = pytest.mark.slow


def _sweep_dir(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _children() -> set[int]:
    alive = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.add(p.pid)
        except psutil.NoSuchProcess:
            continue
    return alive


def _listening_ports() -> set[int]:
    return {
        c.laddr.port for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
    }


def _cells(folder: Path) -> dict[int, dict[str, Any]]:
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    return {c["batch_size"]: c for c in doc["cells"]}


def test_a_local_sweep_runs_every_cell_writes_every_artefact_and_resumes_the_failed_one(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=64, test=32)
    spec = write_spec(tmp_path, data_dir)
    out = tmp_path / "results"
    ports_before = _listening_ports()
    threads_before = {t.ident for t in threading.enumerate()}
    children_before = _children()  # e.g. a jsii runtime left by an earlier CDK test in this process

    runner = CliRunner()
    result = runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output

    folder = _sweep_dir(out)
    sweep_id = folder.name
    run16 = f"{sweep_id}-local-cpu-16-e0"
    run128 = f"{sweep_id}-local-cpu-128-e0"

    # Every cell's status, with the container's own reason for the failure.
    cells = _cells(folder)
    assert cells[16]["status"] == "completed"
    assert cells[128]["status"] == "failed"
    assert "dataset too small" in cells[128]["reason"]

    # Every artefact of the completed cell, and the sweep's.
    results = folder / layout.RESULTS_DIR
    for rel in (
        layout.execution_times_path("local-cpu", 16, 0, "json"),
        layout.execution_times_path("local-cpu", 16, 0, "summary"),
        layout.execution_times_path("local-cpu", 16, 0, "png"),
        layout.run_record_path(run16),
        layout.SWEEP_CSV,
        layout.SWEEP_JSON,
        layout.REPORT_HTML,
        layout.SWEEP_PARQUET,
        layout.RUNS_PARQUET,
    ):
        assert (results / rel).is_file() and (results / rel).stat().st_size > 0, rel
    assert list((results / layout.PLOTS_DIR).glob("*.png"))
    assert json.loads((results / layout.run_record_path(run16)).read_text())["name"] == run16
    assert (results / layout.execution_times_path("local-cpu", 16, 0, "png")).read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((results / layout.SWEEP_JSON).read_text())
    assert run16 in json.dumps(summary)
    # The raw logs the container uploaded (the failed run's too: its log says why).
    assert (folder / "logs" / f"{run16}.log").read_text().count("step training time") >= 3
    assert "dataset too small" in (folder / "logs" / f"{run128}.log").read_text()
    assert json.loads((folder / layout.SPEC_JSON).read_text())["name"] == "e2e"
    assert "Report:" in result.output

    # Nothing left running: no listening port, no training process, no worker thread.
    assert _listening_ports() <= ports_before
    assert _children() <= children_before
    leftover = [t.name for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()]
    assert not [n for n in leftover if n.startswith(("job-", "s3-notify"))], leftover

    # The status command reads the downloaded sweep.
    status = runner.invoke(app, ["status", sweep_id, "--results", str(out), "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["counts"]["failed"] == 1

    # Fix the data, resume: only the failed cell runs again.
    write_mnist(data_dir / "mnist.npz", train=512, test=256)
    before = (results / layout.run_record_path(run16)).read_bytes()
    resumed = runner.invoke(
        app, ["run", str(spec), "--local", "--no-watch", "--out", str(out), "--resume", sweep_id]
    )
    assert resumed.exit_code == 0, resumed.output
    assert f"Resumed 1 run(s): {run128}" in resumed.output
    cells = _cells(folder)
    assert cells[16]["status"] == "completed"
    assert cells[128]["status"] == "completed", cells[128]
    assert (results / layout.run_record_path(run128)).is_file()
    assert (results / layout.run_record_path(run16)).read_bytes() == before  # not re-run
    with (results / layout.SWEEP_CSV).open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(r["batch_size"]) for r in rows) == [16, 128]  # the report covers both cells
    # The notebook tables follow: the sweep's rows typed, and every step with its data wait and compute.
    assert sorted(pd.read_parquet(results / layout.SWEEP_PARQUET)["batch_size"]) == [16, 128]
    steps = pd.read_parquet(results / layout.RUNS_PARQUET)
    assert set(steps["run"]) == {run16, run128}
    assert steps[["data_wait_s", "compute_s"]].notna().all().all()
    assert _children() <= children_before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_training_processes_and_keeps_partial_results(tmp_path: Path, signum: int) -> None:
    """Ctrl-C, and SIGTERM as ``timeout`` or a CI runner's cancel sends it, stop the sweep alike."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=256, test=64)
    spec = write_spec(tmp_path, data_dir, batch_sizes=[16], max_concurrency=1)
    raw = json.loads(spec.read_text())
    raw["workload"]["epochs"] = 1000  # outlives any wait below: always interrupted
    raw["workload"]["hyperparameters"] = {}
    spec.write_text(json.dumps(raw))
    out = tmp_path / "results"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    cli = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "trainsweep"),
            "run",
            str(spec),
            "--local",
            "--no-watch",
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(scratch)},  # the jobs' SAGEMAKER_BASE_DIRs land here
        preexec_fn=sigint_as_a_terminal_gives_it,
    )
    try:
        trainer = _wait_for_trainer(cli.pid, timeout=240)
        _wait_for_steps(scratch, timeout=240)
        cli.send_signal(signum)
        output, _ = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    text = output.decode(errors="replace")
    assert cli.returncode == 130, text
    assert "Interrupted" in text
    # One line for the user; what the embedded AWS logged (moto's interpreter dumps whole state machines
    # as it aborts them) is in a file beside the results.
    assert len(text) < 2000, text[:3000]
    assert "Exception=" not in text
    log = out / f"{_sweep_dir(out).name}.log"
    assert not log.exists() or f"The embedded AWS's log: {log}" in text
    assert not trainer.is_running() or trainer.status() == psutil.STATUS_ZOMBIE
    folder = _sweep_dir(out)
    assert (folder / layout.JOBS_JSON).is_file()
    logs = list((folder / "logs").glob("*.log"))
    assert logs and "step training time" in logs[0].read_text()
    assert not list(scratch.glob("trainsweep-jobs-*"))  # the jobs' folders went with the run
    assert (out / f"{folder.name}.lock").is_file()  # held by nobody: `status` says interrupted


def _wait_for_steps(scratch: Path, timeout: float) -> None:
    """Until the training process has logged a few steps (its output lands in its base dir)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in scratch.glob("trainsweep-jobs-*/*/algo-1.log"):
            if log.read_text(errors="replace").count("step training time") >= 3:
                return
        time.sleep(0.5)
    raise AssertionError("the training process logged no steps")


def _wait_for_trainer(pid: int, timeout: float) -> psutil.Process:
    deadline = time.monotonic() + timeout
    parent = psutil.Process(pid)
    while time.monotonic() < deadline:
        for child in parent.children(recursive=True):
            try:
                if any("train.py" in part for part in child.cmdline()):
                    return child
            except psutil.Error:
                continue
        time.sleep(0.5)
    raise AssertionError("no training process started")


def _cloudml_log(batch_size: int, steps: int = 3) -> bytes:
    lines = [f"python3 mnist_cnn.py --batch-size {batch_size} --epochs 1", "Initialization time 0.25"]
    lines += ["Epoch 1/1", "Real time: 1600000000.0"]
    lines += [f"{s} step training time: 0.0125s" for s in range(1, steps + 1)]
    lines += ["Epoch time: 1.5s", "Real time: 1600000001.5", "Duracao do treinamento: 5.5"]
    return ("\n".join(lines) + "\n").encode()


def test_resume_after_ctrl_c_reruns_the_stopped_cell_and_writes_the_report(tmp_path: Path) -> None:
    """A sweep interrupted by Ctrl-C, as it was downloaded: jobs.json without final cells (no
    aggregation ran), one run that finished and one whose job SIGTERM stopped (its record says so).
    Resuming re-runs the stopped cell only, aggregates both and writes the report; the spec given to
    the resume differs from the sweep's in one field, and the command says which."""
    from trainsweep.artefacts import run_artefacts
    from trainsweep.logs import parse
    from trainsweep.spec import plan_sweep

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=512, test=256)
    spec = write_spec(tmp_path, data_dir)
    sweep_id = "e2e-20260101-000000"
    out = tmp_path / "results"
    folder = out / sweep_id
    plan = plan_sweep(spec, sweep_id=sweep_id)
    (folder / layout.RESULTS_DIR).mkdir(parents=True)
    (folder / layout.JOBS_JSON).write_bytes(plan.jobs_json())
    (folder / layout.SPEC_JSON).write_text(json.dumps({**plan.spec.to_dict(), "max_runtime_seconds": 600}))
    run16, run128 = f"{sweep_id}-local-cpu-16-e0", f"{sweep_id}-local-cpu-128-e0"
    finished = parse(_cloudml_log(16), name=run16)
    stopped = parse(_cloudml_log(128), name=run128)
    stopped.status, stopped.failure_reason = "failed", "stopped by SIGTERM"
    assert finished.status == "complete"
    for run in (finished, stopped):
        for rel, data in run_artefacts(run).items():
            (folder / layout.RESULTS_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / layout.RESULTS_DIR / rel).write_bytes(data)
    before = (folder / layout.RESULTS_DIR / layout.run_record_path(run16)).read_bytes()

    runner = CliRunner()
    status = runner.invoke(app, ["status", sweep_id, "--results", str(out), "--json"])
    assert status.exit_code == 0, status.output
    shown = {c["run_name"]: c for c in json.loads(status.output)["cells"]}
    assert shown[run16]["status"] == "done"
    assert (shown[run128]["status"], shown[run128]["detail"]) == ("failed", "stopped by SIGTERM")

    resumed = runner.invoke(
        app, ["run", str(spec), "--local", "--no-watch", "--out", str(out), "--resume", sweep_id]
    )
    assert resumed.exit_code == 0, resumed.output
    assert f"Resumed 1 run(s): {run128}" in resumed.output
    assert "differs from sweep" in resumed.output and "max_runtime_seconds" in resumed.output
    cells = _cells(folder)
    assert cells[16]["status"] == "completed"  # kept: it had finished before the interrupt
    assert cells[128]["status"] == "completed", cells[128]
    assert (folder / layout.RESULTS_DIR / layout.run_record_path(run16)).read_bytes() == before
    assert (folder / layout.RESULTS_DIR / layout.REPORT_HTML).is_file()
    with (folder / layout.RESULTS_DIR / layout.SWEEP_CSV).open() as f:
        assert sorted(int(r["batch_size"]) for r in csv.DictReader(f)) == [16, 128]


def test_resume_after_ctrl_c_with_every_run_finished_still_aggregates_and_reports(tmp_path: Path) -> None:
    """Ctrl-C after the last job finished but before AggregateSweep: nothing to re-run, yet the resume
    writes the final cells and the report (it used to say "Resumed 0 run(s)" and write none)."""
    from trainsweep.artefacts import run_artefacts
    from trainsweep.logs import parse
    from trainsweep.spec import plan_sweep

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=64, test=32)
    spec = write_spec(tmp_path, data_dir, batch_sizes=[16])
    sweep_id = "e2e-20260101-000001"
    out = tmp_path / "results"
    folder = out / sweep_id
    plan = plan_sweep(spec, sweep_id=sweep_id)
    (folder / layout.RESULTS_DIR).mkdir(parents=True)
    (folder / layout.JOBS_JSON).write_bytes(plan.jobs_json())
    (folder / layout.SPEC_JSON).write_text(json.dumps(plan.spec.to_dict()))
    run16 = f"{sweep_id}-local-cpu-16-e0"
    for rel, data in run_artefacts(parse(_cloudml_log(16), name=run16)).items():
        (folder / layout.RESULTS_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / layout.RESULTS_DIR / rel).write_bytes(data)
    resumed = CliRunner().invoke(
        app, ["run", str(spec), "--local", "--no-watch", "--out", str(out), "--resume", sweep_id]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "Resumed 0 run(s): none" in resumed.output
    assert "differs from sweep" not in resumed.output
    assert _cells(folder)[16]["status"] == "completed"
    assert (folder / layout.RESULTS_DIR / layout.REPORT_HTML).is_file()


def test_resuming_a_script_sweep_says_when_the_scripts_files_changed_since_it_ran(tmp_path: Path) -> None:
    """The re-run cells of a resumed script sweep train the folder as it is now: when its files differ
    from the archive the sweep ran, the resume says so (before, only spec fields were compared)."""
    from trainsweep.artefacts import run_artefacts
    from trainsweep.logs import parse
    from trainsweep.sourcedir import spec_with_source, stage
    from trainsweep.spec import load_spec, plan_sweep

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('v1')\n")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: e2e\nworkload: {entry_point: project/train.py, epochs: 1}\ninstance_types: [local]\n"
        "batch_sizes: [16]\nmax_runtime_seconds: 300\n"
    )
    sweep_id = "e2e-20260101-000002"
    out = tmp_path / "results"
    folder = out / sweep_id
    plan = plan_sweep(spec, sweep_id=sweep_id)
    staged = stage(load_spec(spec).workload, tmp_path, check_requirements=False)
    assert staged is not None
    uri = f"s3://bucket/{layout.code_key(sweep_id, staged.packed.digest)}"
    (folder / layout.RESULTS_DIR).mkdir(parents=True)
    (folder / layout.JOBS_JSON).write_bytes(plan.jobs_json())
    (folder / layout.SPEC_JSON).write_text(json.dumps(spec_with_source(plan.spec.to_dict(), staged, uri)))
    run16 = f"{sweep_id}-local-cpu-16-e0"
    for rel, data in run_artefacts(parse(_cloudml_log(16), name=run16)).items():
        (folder / layout.RESULTS_DIR / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / layout.RESULTS_DIR / rel).write_bytes(data)
    args = ["run", str(spec), "--local", "--no-watch", "--out", str(out), "--resume", sweep_id]

    same = CliRunner().invoke(app, args)
    assert same.exit_code == 0, same.output
    assert "differs from sweep" not in same.output  # the same files: nothing to say
    (project / "train.py").write_text("print('v2')\n")
    edited = CliRunner().invoke(app, args)
    assert edited.exit_code == 0, edited.output
    words = " ".join(edited.output.split())
    assert "differs from sweep e2e-20260101-000002's spec in workload.source_dir (its files changed)" in words
    assert "the script's files as they are now" in words


def test_a_sweep_the_stack_refuses_prints_one_line_and_logs_the_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PlanSweep refuses a grid too large for the workflow state. ``run`` refuses it up front too; with
    that check out of the way, the refusal comes from the deployed stack, as for a limit only it knows:
    the user sees one line, the Lambda's JSON error with its stack trace goes to a log file."""
    from trainsweep.aws import workflow

    monkeypatch.setattr(workflow, "check_plan_fits", lambda plan: None, raising=False)
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "name": "huge",
                "workload": {"model": "mnist-cnn", "epochs": 1, "synthetic": True},
                "instance_types": ["local"],
                "batch_sizes": list(range(1, 102)),  # 10,100 jobs: above MAX_JOBS
                "repetitions": 100,
            }
        )
    )
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "SweepTooLargeError: this sweep (10100 jobs, 10100 cells)" in lines[0]
    assert "stackTrace" not in result.output and "errorMessage" not in result.output
    log = Path(lines[0].rsplit("(details: ", 1)[1].rstrip(")"))
    assert log.is_file() and log.parent == out
    assert "stackTrace" in log.read_text() and "SweepTooLargeError" in log.read_text()


def test_a_sweep_whose_every_cell_fails_exits_non_zero_and_says_so(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=64, test=32)  # fewer samples than one batch of 128
    spec = write_spec(tmp_path, data_dir, batch_sizes=[128])
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "error: no cell of the sweep succeeded (1 failed)" in result.output
    assert "finished, no cell succeeded" in result.output and "— succeeded" not in result.output
    folder = _sweep_dir(out)
    assert _cells(folder)[128]["status"] == "failed"
    assert (folder / layout.RESULTS_DIR / layout.REPORT_HTML).is_file()  # the report says why


def test_a_node_count_sweep_runs_two_local_hosts_and_reports_their_scaling(tmp_path: Path) -> None:
    # instance_counts: [1, 2] in local mode: the 2-instance job runs as two host processes (algo-1,
    # algo-2) with SageMaker's multi-host variables, torchrun joins them into one world of two ranks,
    # algo-1 uploads the run's log, and the report compares the counts.
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=256, test=64)
    spec = write_spec(tmp_path, data_dir, batch_sizes=[16], instance_counts=[1, 2])
    out = tmp_path / "results"
    children_before = _children()
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    folder = _sweep_dir(out)
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    cells = {c["run_name"]: c for c in doc["cells"]}
    one, two = f"{folder.name}-local-cpu-16-e0", f"{folder.name}-local-cpux2-16-e0"
    assert cells[one]["status"] == cells[two]["status"] == "completed", cells
    results = folder / layout.RESULTS_DIR
    headers = {n: json.loads((results / layout.run_record_path(n)).read_text())["header"] for n in (one, two)}
    assert (headers[one]["world_size"], headers[two]["world_size"]) == (1, 2)
    assert (folder / "logs" / f"{two}.log").read_text().count("step training time") >= 3
    with (results / layout.SWEEP_CSV).open() as f:
        rows = {int(r["instance_count"]): r for r in csv.DictReader(f)}
    assert sorted(rows) == [1, 2]
    assert rows[1]["scaling_efficiency"] == ""
    efficiency = float(rows[2]["scaling_efficiency"])
    # sweep.csv writes 6 significant digits, so each of the three numbers carries up to 5e-6 relative error.
    assert efficiency == pytest.approx(
        float(rows[2]["samples_per_s"]) / (2 * float(rows[1]["samples_per_s"])), rel=2e-5
    )
    report = (results / layout.REPORT_HTML).read_text()
    assert 'id="scaling-table"' in report and f"{efficiency:.0%}" in report
    assert _children() <= children_before


def test_resume_reruns_a_cell_whose_run_record_was_cut_short(tmp_path: Path) -> None:
    """A sweep aggregated with its cell completed, but the run record on disk cut short (a writer killed
    midway): the record counts as missing, so the resume runs the cell again and aggregates, where it used
    to keep the cell and fail in AggregateSweep (JSONDecodeError) on every resume."""
    from trainsweep.spec import plan_sweep

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_mnist(data_dir / "mnist.npz", train=64, test=32)
    spec = write_spec(tmp_path, data_dir, batch_sizes=[16])
    sweep_id = "e2e-20260101-000003"
    out = tmp_path / "results"
    folder = out / sweep_id
    plan = plan_sweep(spec, sweep_id=sweep_id)
    run16 = f"{sweep_id}-local-cpu-16-e0"
    (folder / layout.RESULTS_DIR / layout.RUNS_DIR).mkdir(parents=True)
    doc = json.loads(plan.jobs_json())
    doc["cells"] = [{"run_name": run16, "status": "completed", "reason": None, "billable_s": 5}]
    (folder / layout.JOBS_JSON).write_text(json.dumps(doc))
    (folder / layout.SPEC_JSON).write_text(json.dumps(plan.spec.to_dict()))
    record = folder / layout.RESULTS_DIR / layout.run_record_path(run16)
    record.write_text('{"kind": "trainsweep.run", "status": "compl')
    resumed = CliRunner().invoke(
        app, ["run", str(spec), "--local", "--no-watch", "--out", str(out), "--resume", sweep_id]
    )
    assert resumed.exit_code == 0, resumed.output
    assert f"Resumed 1 run(s): {run16}" in resumed.output
    assert json.loads(record.read_text())["status"] == "complete"
    assert _cells(folder)[16]["status"] == "completed"
    assert (folder / layout.RESULTS_DIR / layout.REPORT_HTML).is_file()
