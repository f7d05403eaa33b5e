"""What a local sweep leaves on disk when it is killed, and how the commands read it: one folder and one
lock per run, SIGTERM/SIGHUP as Ctrl-C, files that are whole or absent, readers that take an empty or
cut-short file for a missing one. The embedded AWS is replaced by a stand-in here (the end-to-end crash
test, ``tests/e2e/test_local_crash.py``, kills real sweeps)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import atomicio, layout
from trainsweep.cli import app
from trainsweep.spec import plan_sweep
from trainsweep.sweeps import claim
from trainsweep.sweeps import local as local_driver

SPEC = (
    "name: t\nworkload: {model: mnist-cnn, epochs: 1, synthetic: true}\ninstance_types: [local]\n"
    "batch_sizes: [32]\n"
)
SWEEP = "t-20260101-000000"
runner = CliRunner()


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def _planned(folder: Path, sweep_id: str, spec: Path) -> None:
    """A downloaded sweep as a killed run leaves it: its plan, no final cells."""
    plan = plan_sweep(spec, sweep_id=sweep_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / layout.JOBS_JSON).write_bytes(plan.jobs_json())
    (folder / layout.SPEC_JSON).write_text(json.dumps(plan.spec.to_dict()))


class FakeAws:
    """Stands in for the embedded AWS: writes the sweep's plan, one done cell, as a finished run does."""

    def __init__(self, spec: Path, pause: float = 0.0) -> None:
        self.spec, self.pause, self.calls = spec, pause, []

    def __call__(self, result: Any, spec: Any, staged: Any, **kw: Any) -> None:
        from trainsweep.aws.sweeps import CellView, SweepView

        self.calls.append((result.sweep_id, kw["resume"]))
        time.sleep(self.pause)
        plan = plan_sweep(self.spec, sweep_id=result.sweep_id)
        atomicio.write_bytes(result.dest / layout.JOBS_JSON, plan.jobs_json())
        run = f"{result.sweep_id}-local-cpu-32-e0"
        result.view = SweepView(result.sweep_id, "SUCCEEDED", [CellView(run, run, "local", 32, 0, "done")])
        result.execution_status, result.downloaded = "SUCCEEDED", True


def _run(spec: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out), *extra])


# ---- sweep ids: one folder per start ----------------------------------------------------------------


def test_two_starts_with_the_same_sweep_id_get_separate_folders(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts in the same second of the same spec used to share one folder, the second's cell lost."""
    import trainsweep.spec

    monkeypatch.setattr(trainsweep.spec, "make_sweep_id", lambda name, now: SWEEP)
    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", FakeAws(spec))
    out = tmp_path / "out"
    first, second = _run(spec, out), _run(spec, out)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    folders = sorted(d.name for d in out.iterdir() if d.is_dir())
    assert len(folders) == 2 and SWEEP in folders, folders
    other = next(f for f in folders if f != SWEEP)
    assert other.startswith(f"{SWEEP}-") and len(other) == len(SWEEP) + 1 + claim.SUFFIX_LENGTH
    assert f"Results: {out / SWEEP}/" in first.output
    assert f"Results: {out / other}/" in " ".join(second.output.split())
    for name in folders:  # each folder holds its own sweep's plan
        assert json.loads((out / name / layout.JOBS_JSON).read_text())["sweep_id"] == name


def test_concurrent_claims_of_one_sweep_id_never_share_a_folder(tmp_path: Path) -> None:
    got: list[str] = []
    barrier = threading.Barrier(8)

    def one() -> None:
        barrier.wait()
        got.append(claim.claim_new(tmp_path, SWEEP))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and SWEEP in got


def test_a_second_run_of_a_running_sweep_is_refused_with_the_reason(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAws(spec)
    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", fake)
    out = tmp_path / "out"
    _planned(out / SWEEP, SWEEP, spec)
    held = claim.acquire(out, SWEEP)  # the first run
    try:
        result = _run(spec, out, "--resume", SWEEP)
    finally:
        held.release()
    assert result.exit_code == 1, result.output
    words = " ".join(result.output.split())
    assert f"sweep '{SWEEP}' is being run by another trainsweep process (pid {os.getpid()}" in words
    assert fake.calls == []
    assert _run(spec, out, "--resume", SWEEP).exit_code == 0  # once it ended
    assert not claim.lock_path(out, SWEEP).exists()


# ---- status of a killed or running sweep; unreadable files ------------------------------------------


def test_status_says_a_killed_sweep_was_interrupted_and_a_running_one_runs(
    spec: Path, tmp_path: Path
) -> None:
    _planned(tmp_path / SWEEP, SWEEP, spec)
    claim.acquire(tmp_path, SWEEP).handle.close()  # a run killed: its lock file, held by nobody
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["execution_status"] == "INTERRUPTED"
    held = claim.acquire(tmp_path, SWEEP)
    try:
        result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    finally:
        held.release()
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["execution_status"] == "RUNNING"


@pytest.mark.parametrize("content", [b"", b'{"schema_version": 3, "jo'])
def test_status_of_a_sweep_whose_jobs_json_is_empty_or_cut_short_says_so(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / SWEEP).mkdir()
    (tmp_path / SWEEP / layout.JOBS_JSON).write_bytes(content)
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    words = " ".join(result.output.split())
    assert "jobs.json is empty or cut short" in words and f"--resume {SWEEP}" in words


def test_status_does_not_count_a_final_cell_whose_run_record_is_missing_as_done(
    spec: Path, tmp_path: Path
) -> None:
    folder = tmp_path / SWEEP
    _planned(folder, SWEEP, spec)
    doc = json.loads((folder / layout.JOBS_JSON).read_text())
    run = f"{SWEEP}-local-cpu-32-e0"
    doc["cells"] = [{"run_name": run, "status": "completed", "reason": None}]
    (folder / layout.JOBS_JSON).write_text(json.dumps(doc))
    (folder / layout.RESULTS_DIR / layout.RUNS_DIR).mkdir(parents=True)
    (folder / layout.RESULTS_DIR / layout.run_record_path(run)).write_bytes(b"")  # a killed writer's
    result = runner.invoke(app, ["status", SWEEP, "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    (cell,) = json.loads(result.output)["cells"]
    assert cell["status"] == "failed" and "run record is missing" in cell["detail"]


def test_resume_plans_again_from_spec_json_when_jobs_json_is_empty(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAws(spec)
    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", fake)
    out = tmp_path / "out"
    _planned(out / SWEEP, SWEEP, spec)
    (out / SWEEP / layout.JOBS_JSON).write_bytes(b"")
    seen: list[bytes] = []
    fake_call = fake.__call__

    def check(result: Any, *a: Any, **kw: Any) -> None:
        seen.append((result.dest / layout.JOBS_JSON).read_bytes())
        fake_call(result, *a, **kw)

    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", check)
    result = _run(spec, out, "--resume", SWEEP)
    assert result.exit_code == 0, result.output
    assert seen == [plan_sweep(spec, sweep_id=SWEEP).jobs_json()]


@pytest.mark.parametrize("spec_json", [None, b"", b'{"name": "t", "work'])
def test_resume_without_a_readable_plan_is_refused_without_a_traceback(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec_json: bytes | None
) -> None:
    fake = FakeAws(spec)
    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", fake)
    out = tmp_path / "out"
    (out / SWEEP).mkdir(parents=True)
    (out / SWEEP / layout.JOBS_JSON).write_bytes(b"")
    if spec_json is not None:
        (out / SWEEP / layout.SPEC_JSON).write_bytes(spec_json)
    result = _run(spec, out, "--resume", SWEEP)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    words = " ".join(result.output.split())
    assert f"cannot resume '{SWEEP}'" in words and "jobs.json is empty or cut short" in words
    assert fake.calls == []
    assert not claim.lock_path(out, SWEEP).exists()


# ---- SIGTERM and SIGHUP -----------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_a_local_sweep_as_ctrl_c_does(
    spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    stopped: list[BaseException] = []

    def long_sweep(result: Any, *a: Any, **kw: Any) -> None:
        threading.Timer(0.3, os.kill, (os.getpid(), signum)).start()
        try:
            time.sleep(30)
        except KeyboardInterrupt as e:
            stopped.append(e)
            result.interrupted = True
            raise

    monkeypatch.setattr(local_driver, "_run_in_embedded_aws", long_sweep)
    unhandled: list[int] = []

    def outside(signum: int, frame: Any) -> None:  # where the sweep installs no handler
        unhandled.append(signum)

    before = signal.signal(signum, outside)
    try:
        t0 = time.monotonic()
        result = _run(spec, tmp_path / "out")
        elapsed = time.monotonic() - t0
        assert signal.getsignal(signum) is outside  # the sweep's handler is gone after it
    finally:
        signal.signal(signum, before)
    assert unhandled == [] and elapsed < 20
    assert result.exit_code == 130, result.output
    assert "Interrupted" in result.output
    assert len(stopped) == 1


# ---- atomic writes, abandoned job folders, processes that die with the sweep -------------------------


def test_an_atomic_write_that_fails_leaves_the_old_file_and_no_part_file(tmp_path: Path) -> None:
    target = tmp_path / "jobs.json"
    target.write_text("old")

    def chunks() -> Any:
        yield b"new, half of it"
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        atomicio.write_chunks(target, chunks())
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["jobs.json"]
    assert atomicio.read_json(tmp_path / "missing.json") is None
    (tmp_path / "cut.json").write_text('{"a": ')
    assert atomicio.read_json(tmp_path / "cut.json") is None


def test_a_new_run_removes_the_job_folders_of_killed_runs_only(tmp_path: Path) -> None:
    from trainsweep.local.workroot import OWNER_FILE, PREFIX, Workroot

    live = Workroot(tmp_path)
    killed = tmp_path / f"{PREFIX}killed"
    killed.mkdir()
    (killed / OWNER_FILE).write_text("12345\n")  # nobody holds it
    (killed / "job" / "model").mkdir(parents=True)
    unknown = tmp_path / f"{PREFIX}without-owner"  # perhaps a live run of a version that wrote none
    unknown.mkdir()
    fresh = Workroot(tmp_path)
    try:
        assert not killed.exists()
        assert unknown.is_dir()
        assert live.path.is_dir() and fresh.path.is_dir()
    finally:
        live.remove()
        fresh.remove()
    assert not live.path.exists()


# ---- the sweep's prefix copied to its folder as it changes ----------------------------------------


def test_the_mirror_copies_what_changed_with_jobs_json_after_the_run_records(tmp_path: Path) -> None:
    import boto3
    from moto import mock_aws

    from trainsweep.aws import mirror as mirror_module

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="sweeps-bucket")
        record = layout.results_key(SWEEP, layout.run_record_path("r1"))
        s3.put_object(
            Bucket="sweeps-bucket", Key=layout.jobs_key(SWEEP), Body=b'{"cells": [{"run_name": "r1"}]}'
        )
        s3.put_object(Bucket="sweeps-bucket", Key=record, Body=b'{"status": "complete"}')
        s3.put_object(
            Bucket="sweeps-bucket", Key=layout.results_key(SWEEP, layout.REPORT_HTML), Body=b"<html/>"
        )
        order: list[str] = []
        real = atomicio.write_chunks

        def noted(path: Path, chunks: Any, *, durable: bool = True) -> Path:
            order.append(Path(path).name)
            return real(path, chunks, durable=durable)

        dest = tmp_path / SWEEP
        mp = pytest.MonkeyPatch()
        mp.setattr(atomicio, "write_chunks", noted)
        try:
            mirror = mirror_module.SweepMirror(s3, "sweeps-bucket", SWEEP, dest)
            assert mirror.sync() == 3
            assert order[-1] == layout.JOBS_JSON
            assert mirror.sync() == 0  # nothing changed: nothing fetched
            s3.put_object(Bucket="sweeps-bucket", Key=record, Body=b'{"status": "complete", "n": 2}')
            assert mirror.sync() == 1
            assert (
                json.loads((dest / layout.RESULTS_DIR / layout.run_record_path("r1")).read_text())["n"] == 2
            )
            # a resume's mirror: only the runs' own files, nothing of what the folder already had
            resumed = mirror_module.SweepMirror(
                s3, "sweeps-bucket", SWEEP, tmp_path / "r", accept=mirror_module.run_files_only
            )
            s3.put_object(Bucket="sweeps-bucket", Key=layout.jobs_key(SWEEP), Body=b'{"reduced": true}')
            assert resumed.sync() == 1
            assert not (tmp_path / "r" / layout.JOBS_JSON).exists()
            resumed.mark_current()
            assert resumed.sync() == 0
        finally:
            mp.undo()
