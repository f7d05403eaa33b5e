"""Crash consistency: ``trainsweep run --local`` killed with SIGKILL at random moments, then resumed.

A reference sweep runs once unkilled. The same spec then starts again and is killed (SIGKILL, no
handler can run) at ``TRAINSWEEP_CRASH_KILLS`` moments (default 3; 20 on demand) drawn with
``TRAINSWEEP_CRASH_SEED``: one in each of as many equal slices of the reference's run time, in a
random order, so they fall during the deploy, the jobs, the parsing, the aggregation and the download
of a first run or of a resume. A run that ends before its moment is not killed (its output says so).
Each kill is followed by a ``--resume`` (or a new start while no plan was kept). After every kill: no
training process outlives the sweep, ``status`` answers without a traceback and shows done only the
cells whose run record says they finished. After the last, a resume runs to the end: it re-runs only
cells without results, and every cell is recorded exactly once, with the reference's statuses, and no
job folder is left in the temp dir.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from trainsweep import layout

from .conftest import write_mnist, write_spec

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("TRAINSWEEP_CRASH_KILLS", "3"))
SEED = int(os.environ.get("TRAINSWEEP_CRASH_SEED", "0"))
CLI = str(Path(sys.executable).parent / "trainsweep")


def _spec(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    write_mnist(data / "mnist.npz", train=64, test=32)
    return write_spec(tmp_path, data, name="crash", batch_sizes=[16, 32], max_concurrency=1)


def _start(args: list[str], scratch: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [CLI, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(scratch), "COLUMNS": "1000"},  # the jobs' folders land in TMPDIR
    )


def _finish(args: list[str], scratch: Path) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = _start(args, scratch)
    out, _ = proc.communicate(timeout=900)
    return proc.returncode, out.decode(errors="replace"), time.monotonic() - t0


def _trainers_in(scratch: Path) -> list[psutil.Process]:
    """Live processes working in the scratch folder (training jobs and their workers)."""
    found = []
    for p in psutil.process_iter(["cwd", "status"]):
        cwd = p.info.get("cwd") or ""
        if cwd.startswith(str(scratch)) and p.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


def _planned(out: Path) -> list[Path]:
    return [d for d in out.iterdir() if (d / layout.JOBS_JSON).is_file()] if out.is_dir() else []


def _final_cells(folder: Path) -> list[dict[str, Any]]:
    return list(json.loads((folder / layout.JOBS_JSON).read_text())["cells"])


def _sweep_rows(folder: Path) -> list[tuple[str, str]]:
    with (folder / layout.RESULTS_DIR / layout.SWEEP_CSV).open() as f:
        return sorted((r["batch_size"], r.get("repetition", "")) for r in csv.DictReader(f))


def _finished_on_disk(folder: Path) -> set[str]:
    """Runs whose record on disk says the run finished (what a resume must not run again)."""
    runs = folder / layout.RESULTS_DIR / layout.RUNS_DIR
    done = set()
    for p in runs.glob("*.json") if runs.is_dir() else []:
        record = json.loads(p.read_text())  # atomic writes: never cut short
        if record.get("status", "complete") == "complete":
            done.add(p.stem)
    return done


def _check_status(out: Path, sweep_id: str, scratch: Path) -> None:
    code, text, _ = _finish(["status", sweep_id, "--results", str(out), "--json"], scratch)
    assert "Traceback" not in text, text
    assert code == 0, text
    view = json.loads(text[text.index("{") :])
    finished = _finished_on_disk(out / sweep_id)
    for cell in view["cells"]:
        if cell["status"] == "done":
            assert cell["run_name"] in finished, (cell, finished)


def test_a_sweep_killed_at_random_moments_resumes_to_the_unkilled_result(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    reference_out = tmp_path / "reference"
    code, text, reference_s = _finish(
        ["run", str(spec), "--local", "--no-watch", "--out", str(reference_out)], scratch
    )
    assert code == 0, text
    (reference,) = [d for d in reference_out.iterdir() if d.is_dir()]
    expected = {c["run_name"].removeprefix(reference.name): c["status"] for c in _final_cells(reference)}
    assert set(expected.values()) == {"completed"}, expected

    rng = random.Random(SEED)
    out = tmp_path / "results"
    sweep_id: str | None = None
    width = reference_s / KILLS
    moments = [rng.uniform(max(1.0, i * width), (i + 1) * width) for i in range(KILLS)]
    rng.shuffle(moments)
    for kill, at in enumerate(moments):
        args = ["run", str(spec), "--local", "--no-watch", "--out", str(out)]
        if sweep_id is not None:
            args += ["--resume", sweep_id]
        proc = _start(args, scratch)
        try:
            proc.wait(timeout=at)
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL
        output = proc.communicate(timeout=60)[0].decode(errors="replace")
        assert proc.returncode in (0, -signal.SIGKILL), (kill, at, output)
        kept = _finished_on_disk(_planned(out)[0]) if _planned(out) else set()
        print(f"kill {kill}: at {at:.1f} of {reference_s:.1f} s, exit {proc.returncode}, kept {len(kept)}")
        deadline = time.monotonic() + 10
        while _trainers_in(scratch) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _trainers_in(scratch), f"kill {kill} at {at:.1f} s left training processes running"
        # A start killed before its plan existed leaves at most an empty folder: nothing to resume.
        planned = _planned(out)
        assert len(planned) <= 1, planned
        if planned:
            sweep_id = planned[0].name
            _check_status(out, sweep_id, scratch)

    args = ["run", str(spec), "--local", "--no-watch", "--out", str(out)]
    before: set[str] = set()
    if sweep_id is not None:
        args += ["--resume", sweep_id]
        before = _finished_on_disk(out / sweep_id)
    code, text, _ = _finish(args, scratch)
    assert code == 0, text
    (folder,) = _planned(out)
    if sweep_id is not None:
        rerun = text.split("Resumed ", 1)[1].split(": ", 1)[1].split("\n", 1)[0].strip()
        names = set() if rerun == "none" else {r.strip() for r in " ".join(rerun.split()).split(",")}
        assert not names & before, f"finished runs were run again: {names & before}"
    cells = _final_cells(folder)
    names = [c["run_name"] for c in cells]
    assert len(names) == len(set(names)), names  # every cell recorded exactly once
    assert {c["run_name"].removeprefix(folder.name): c["status"] for c in cells} == expected
    assert _sweep_rows(folder) == _sweep_rows(reference)
    for name in names:
        assert json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(name)).read_text())
    assert not list(scratch.glob("trainsweep-jobs-*")), list(scratch.iterdir())
