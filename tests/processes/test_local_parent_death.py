"""A killed local sweep takes its job processes with it: a child started as the executor starts a job dies
with its parent (the rest of what a killed sweep leaves: tests/unit/test_local_persistence.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainsweep.parentdeath import dying_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's parent-death signal")

# What a program sees of how it was started: argv, environment, working folder, ignored signals.
SEES = 'printf "%s\\n" "$0" "$@"; env | sort; pwd; grep SigIgn /proc/self/status'


def test_a_job_process_dies_when_the_sweep_is_killed(tmp_path: Path) -> None:
    """The sweep's process killed with SIGKILL: its child, started as the executor starts a job, goes."""
    pid_file = tmp_path / "child.pid"
    parent_code = (
        "import subprocess, sys, time\n"
        "from trainsweep.parentdeath import dying_with_parent\n"
        "p = subprocess.Popen(dying_with_parent([sys.executable, '-c', 'import time; time.sleep(60)']),\n"
        "                     start_new_session=True)\n"
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
        _wait_for_exec(child, "time.sleep(60)")
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_program_sees_what_it_would_see_started_directly(tmp_path: Path) -> None:
    """Same argv (its own argv[0]), environment, working folder and ignored signals as without the
    wrapper, in the C locale too (where the launcher's interpreter would add LC_CTYPE)."""
    env = {"PATH": os.environ["PATH"], "A_SETTING": "with spaces and = signs"}
    argv = ["sh", "-c", SEES, "named-so", "an argument", ""]
    direct = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    wrapped = subprocess.run(
        dying_with_parent(argv, env=env), env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert "named-so\nan argument\n\nA_SETTING=" in direct.stdout
    assert wrapped.stdout == direct.stdout
    assert wrapped.stderr == ""


def test_the_program_runs_with_the_parent_death_signal_armed(tmp_path: Path) -> None:
    """The signal survives the launcher's exec: the program itself reads it back (PR_GET_PDEATHSIG)."""
    code = "import ctypes; s = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value)"
    command = dying_with_parent([sys.executable, "-c", code], sig=15)
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "15"


def test_starting_a_job_runs_no_python_code_in_a_forked_copy_of_the_sweep(tmp_path: Path) -> None:
    """No at-fork handler runs: the child is not a fork running Python before exec (a ``preexec_fn``
    is, and may deadlock or crash in a process full of native threads)."""
    marker = tmp_path / "forked"
    entry = tmp_path / "train.py"
    entry.write_text("print('trained')\n")
    code = (
        "import os, subprocess, sys\n"
        "from trainsweep.parentdeath import dying_with_parent\n"
        f"os.register_at_fork(after_in_child=lambda: open({str(marker)!r}, 'w').close())\n"
        f"env = dict(os.environ)\n"
        f"with open({str(tmp_path / 'out.log')!r}, 'wb') as out:\n"
        f"    p = subprocess.Popen(dying_with_parent([sys.executable, {str(entry)!r}], env=env),\n"
        f"        cwd={str(tmp_path)!r}, env=env, stdin=subprocess.DEVNULL, stdout=out,\n"
        "        stderr=subprocess.STDOUT, start_new_session=True)\n"
        "sys.exit(p.wait())\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (tmp_path / "out.log").read_text() == "trained\n"
    assert not marker.exists()


def test_the_launcher_does_not_run_the_program_when_its_parent_is_gone(tmp_path: Path) -> None:
    """A parent that died before the signal was armed (its pid no longer the launcher's parent's): the
    program never starts."""
    marker = tmp_path / "ran"
    command = dying_with_parent(["touch", str(marker)])
    parent = command.index(str(os.getpid()))
    command[parent] = str(os.getpid() + 1_000_000)  # not this process: as if it had died
    done = subprocess.run(command, check=False)
    assert done.returncode != 0
    assert not marker.exists()


def test_a_program_that_cannot_be_found_fails_as_popen_says(tmp_path: Path) -> None:
    """Not found on the PATH given, or not executable: the error Popen raises itself, before any start."""
    with pytest.raises(FileNotFoundError) as direct:
        subprocess.Popen(["no-such-trainer-command"], env={"PATH": str(tmp_path)})
    with pytest.raises(FileNotFoundError) as wrapped:
        dying_with_parent(["no-such-trainer-command"], env={"PATH": str(tmp_path)})
    assert (wrapped.value.strerror, wrapped.value.filename) == (direct.value.strerror, direct.value.filename)
    (tmp_path / "train").write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        dying_with_parent(["train"], env={"PATH": str(tmp_path)})
    with pytest.raises(PermissionError):
        dying_with_parent(["./train"], cwd=tmp_path)


def test_an_exec_that_fails_in_the_launcher_says_why_with_status_127(tmp_path: Path) -> None:
    """What the check before the start cannot see (here: a program gone after it) is said by the
    launcher in exec's words."""
    command = dying_with_parent(["sh", "-c", "true"])
    command[command.index("sh")] = str(tmp_path / "gone")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 127
    assert done.stderr == f"cannot start {str(tmp_path / 'gone')!r}: No such file or directory\n"


def _wait_for_exec(pid: int, word: str) -> None:
    """Until the launcher has armed the signal and become the program (its command line has ``word``
    and no longer the launcher's)."""
    import psutil

    deadline = time.monotonic() + 30
    while True:
        cmdline = psutil.Process(pid).cmdline()
        if word in " ".join(cmdline) and "-S" not in cmdline:
            return
        assert time.monotonic() < deadline, f"the launcher did not exec: {cmdline}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
