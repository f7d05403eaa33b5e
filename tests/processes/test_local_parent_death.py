"""A killed local sweep takes its job processes with it: a child started as the executor starts a job dies
with its parent (the rest of what a killed sweep leaves: tests/unit/test_local_persistence.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def test_a_job_process_dies_when_the_sweep_is_killed(tmp_path: Path) -> None:
    """The sweep's process started with SIGKILL: its child, started as the executor starts a job, goes."""
    pid_file = tmp_path / "child.pid"
    parent_code = (
        "import subprocess, sys, time\n"
        "from trainsweep.parentdeath import die_with_parent\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                     start_new_session=True, preexec_fn=die_with_parent())\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
