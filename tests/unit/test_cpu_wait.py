"""The training process's wait for a CPU (:mod:`trainsweep.training.cpu_wait`): read from Linux's
scheduler statistics, and CPU contention named beside the figures it slowed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from trainsweep.logs import mllog, parse
from trainsweep.report import analyse
from trainsweep.training import cpu_wait

SHARING = """
import hashlib, json, os, threading
from trainsweep.training import cpu_wait

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # this thread and those it starts: one CPU
data, done, hold = b"x" * (16 << 20), threading.Barrier(3), threading.Event()

def work():
    for _ in range(4):
        hashlib.sha256(data).digest()  # releases the GIL: both threads want the CPU at once
    done.wait()
    hold.wait()  # alive until the snapshot: an ended thread's times are gone with it

threads = [threading.Thread(target=work) for _ in range(2)]
start = cpu_wait.snapshot()
for t in threads:
    t.start()
done.wait()
print(json.dumps(cpu_wait.waited(start, cpu_wait.snapshot())))
hold.set()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's scheduler statistics")
def test_two_threads_sharing_one_cpu_each_wait_while_the_other_runs() -> None:
    out = subprocess.run([sys.executable, "-c", SHARING], capture_output=True, text=True, check=True)
    waited = json.loads(out.stdout)
    assert waited["run_s"] > 0.05
    assert waited["wait_share"] >= 0.3  # about half; more when other work shares that CPU too


def test_a_snapshot_sums_the_threads_and_skips_what_it_cannot_read(tmp_path: Path) -> None:
    for tid, text in {"1": "300 20 5\n", "2": "700 80 9\n", "3": "garbage\n"}.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(text)
    (tmp_path / "4").mkdir()  # a thread that ended between the listing and the read
    assert cpu_wait.snapshot(tmp_path) == cpu_wait.SchedTimes(1000, 100)
    assert cpu_wait.snapshot(tmp_path / "none") is None
    later = cpu_wait.SchedTimes(4000, 1100)
    assert cpu_wait.waited(cpu_wait.SchedTimes(1000, 100), later) == {
        "run_s": 3e-6,
        "wait_s": 1e-6,
        "wait_share": 0.25,
    }
    assert cpu_wait.waited(None, later) is None and cpu_wait.waited(later, later) is None


def test_a_thread_that_ended_takes_nothing_from_the_others_and_a_new_one_counts_from_its_start(
    tmp_path: Path,
) -> None:
    def snap(threads: dict[str, str]) -> cpu_wait.SchedTimes | None:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        for tid, text in threads.items():
            (folder / tid).mkdir(parents=True)
            (folder / tid / "schedstat").write_text(text)
        return cpu_wait.snapshot(folder)

    start = snap({"1": "1000 100 1\n", "2": "5000 900 1\n"})  # thread 2 ends during the run
    end = snap({"1": "3000 600 1\n", "3": "400 100 1\n"})  # thread 3 started during it
    assert cpu_wait.waited(start, end) == {"run_s": 2.4e-6, "wait_s": 6e-7, "wait_share": 0.2}


def _line(key: str, value: object) -> bytes:
    return (mllog.format_line(key, value, metadata={"rank": 0}) + "\n").encode()


@pytest.mark.parametrize(
    ("run_s", "share", "noted"),
    [(10.0, 0.45, True), (10.0, 0.02, False), (0.2, 0.45, False)],  # the last waited 0.16 s in all
)
def test_a_run_that_waited_for_the_cpu_is_noted_beside_its_figures(
    mllog_log: Callable[..., bytes], run_s: float, share: float, noted: bool
) -> None:
    wait_s = run_s * share / (1 - share)
    log = _line(mllog.CPU_WAIT, {"run_s": run_s, "wait_s": wait_s, "wait_share": share})
    a = analyse(
        [parse(log + mllog_log(), name="r0")],
        jobs=[{"run_name": "r0", "instance_type": "local", "status": "completed", "batch_size": 64}],
    )
    (run,), (row,) = a.run_metrics, a.rows
    assert run.cpu_wait_share == pytest.approx(share)
    said = "r0 waited for a CPU 45% of the time it could run (other programs, or its own loader workers"
    assert (said in row.notes) is noted
    busy = [w for w in a.warnings if w["code"] == "cpu-contention"]
    assert [w["run"] for w in busy] == (["r0"] if noted else [])


def test_the_end_of_a_sweep_says_how_many_runs_waited_for_a_cpu(
    mllog_log: Callable[..., bytes], tmp_path: Path
) -> None:
    from rich.console import Console

    from trainsweep import layout
    from trainsweep.cli.sweep import _render_end
    from trainsweep.report import sweep_artefacts
    from trainsweep.sweeps.result import SweepRun

    waits = {"r0": (8.2, 0.45), "r1": (0.2, 0.02), "r2": (9.0, 0.47)}
    runs = [
        parse(_line(mllog.CPU_WAIT, {"run_s": 10.0, "wait_s": w, "wait_share": s}) + mllog_log(), name=n)
        for n, (w, s) in waits.items()
    ]
    jobs = [{"run_name": n, "instance_type": "local", "status": "completed", "batch_size": 64} for n in waits]
    for rel, data in sweep_artefacts(runs, jobs=jobs).items():
        path = tmp_path / layout.RESULTS_DIR / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    console = Console(record=True, width=300)
    _render_end(console, SweepRun("s", tmp_path, "SUCCEEDED", None))
    said = console.export_text()
    assert "warning: 2 run(s) waited for a CPU 10 % or more of the time they could run" in said
    assert said.index("warning:") < said.index("Results:")
