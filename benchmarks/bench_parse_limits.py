"""Peak memory of parsing crafted logs, and the speed of exponent step times (a plain script, not a test).

    python benchmarks/bench_parse_limits.py [--mb 100] [--speed-mb 200] [--only memory|speed]
                                            [--baseline DIR]

(a) Memory (issue 11, item 7): for each crafted log of about ``--mb`` MB, written to a temporary folder,
    a child process runs ``trainsweep.logs.parse`` and prints its peak RSS (VmHWM). Goal: below
    150 MB + 1x the log's size, for any input; a child that only imports the parser is the floor.
    The logs: tiny epochs (``Epoch N/M`` + ``Epoch time``), an MO833 log with a new rank on every line,
    an MLLOG log with a new rank and epoch on every line, an MLLOG log with a new key on every line,
    and a log of bad step lines (a problem each). With ``--baseline DIR`` (a checkout of an older
    trainsweep, e.g. ``git worktree add /tmp/old <commit>``), each log is also parsed by a child with
    ``PYTHONPATH=DIR`` and both peaks are printed with their ratio.
(b) Speed (item 8): ``--speed-mb`` MB of step lines and stamps printed in exponent form (``1.5e-02s``)
    next to the same lines in plain decimals, each parsed with the C scanner and with the Python path
    alone (``TRAINSWEEP_PURE_PYTHON=1``: where exponents went before); prints MB/s and ratios.
Temporary files are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

CHILD = """
import sys, time
from pathlib import Path
from trainsweep.logs import parse
t = time.process_time()  # CPU seconds: steadier than wall time on a shared machine
run = parse(sys.argv[1])
dt = time.process_time() - t
status = Path("/proc/self/status").read_text().splitlines()
hwm = next(int(x.split()[1]) for x in status if x.startswith("VmHWM"))
codes = sorted({p.code for p in run.problems if p.code.startswith("absurd") or p.code == "bad-line"})
print(dt, hwm, run.steps_total, len(run.epochs), len(run.ranks), len(run.problems), ",".join(codes) or "-")
"""
FLOOR = """
from pathlib import Path
import trainsweep.logs
status = Path("/proc/self/status").read_text().splitlines()
print(next(int(x.split()[1]) for x in status if x.startswith("VmHWM")))
"""


def write(path: Path, megabytes: float, line: Callable[[int], bytes]) -> int:
    """Lines ``line(0), line(1), ...`` up to ``megabytes`` MB, written in blocks of 10,000 lines."""
    target, written, i = int(megabytes * 1e6), 0, 0
    with path.open("wb") as f:
        while written < target:
            block = b"".join(line(k) for k in range(i, i + 10_000))
            f.write(block)
            written, i = written + len(block), i + 10_000
    return written


CRAFTED: dict[str, Callable[[int], bytes]] = {
    "tiny epochs (cloud-ML)": lambda k: b"Epoch %d/9999999\nEpoch time: 0.5s\n" % (k + 1),
    "a new MO833 rank per line": lambda k: (
        b"[MO833] Rank,%d,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,2\n" % k
    ),
    "a new MLLOG rank and epoch per line": lambda k: (
        b':::MLLOG {"key": "trainsweep.epoch_s", "value": 1.0, "metadata": {"rank": %d, "epoch_num": %d}}\n'
        % (k, k)
    ),
    "a new MLLOG key per line": lambda k: b':::MLLOG {"key": "k%d", "value": 1}\n' % k,
    "bad step lines (a problem each)": lambda k: b"step training time: 0.5s\n",
}


def child(log: Path, env: dict[str, str] | None = None) -> list[str]:
    # Run from the log's folder: ``python -c`` puts the current folder first on sys.path, which would
    # import this checkout's trainsweep even for the baseline.
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(log)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=log.parent,
    )
    return out.stdout.split()


def memory(tmp: Path, megabytes: float, baseline: Path | None) -> None:
    floor = subprocess.run([sys.executable, "-c", FLOOR], check=True, capture_output=True, text=True)
    floor_mb = int(floor.stdout) / 1024
    print(
        "(a) peak memory on crafted logs (goal: < 150 MB + 1x the log; "
        f"importing the parser: {floor_mb:.1f} MB)"
    )
    worst = 0.0
    for name, line in CRAFTED.items():
        log = tmp / "crafted.log"
        size = write(log, megabytes, line)
        dt, hwm_kb, steps, epochs, ranks, problems, codes = child(log)
        peak = int(hwm_kb) / 1024
        goal = 150 + size / 2**20
        worst = max(worst, peak / goal)
        print(
            f"    {name:<38} {size / 1e6:6.1f} MB: peak {peak:6.1f} MB (goal {goal:.0f} MB, "
            f"{peak / goal:.2f} of it) in {float(dt):5.1f} CPU s; {int(steps):,} steps, "
            f"{int(epochs):,} epochs, {int(ranks):,} ranks, {int(problems):,} problems listed ({codes})"
        )
        if baseline is not None:
            old = child(log, dict(os.environ, PYTHONPATH=str(baseline)))
            old_peak = int(old[1]) / 1024
            print(f"    {'':<38} baseline: peak {old_peak:6.1f} MB, {old_peak / peak:.1f}x this one")
        log.unlink()
    print(f"    largest share of the goal: {worst:.2f} ({'met' if worst < 1 else 'NOT met'})")


def epoch_line(k: int, step_s: bytes, stamp: bytes) -> bytes:
    """Step ``k`` of a run of 500-step epochs: a step line and a stamp, with the epoch's header or end."""
    step = k % 500 + 1
    line = b"%d step training time: %s\nReal time: %s\n" % (step, step_s, stamp)
    if step == 1:
        line = b"Epoch %d/99999\n" % (k // 500 + 1) + line
    return line + b"Epoch time: 7.5s\n" if step == 500 else line


def speed(tmp: Path, megabytes: float) -> None:
    print(f"(b) exponent step times: {megabytes:.0f} MB of step lines and stamps, best of 2")
    plain = tmp / "plain.log"
    expo = tmp / "exponent.log"
    write(plain, megabytes, lambda k: epoch_line(k, b"0.015s", b"1592371754.45"))
    write(expo, megabytes, lambda k: epoch_line(k, b"1.5e-02s", b"1.59237175445e9"))
    pure = dict(os.environ, TRAINSWEEP_PURE_PYTHON="1")
    rates = {}
    for label, log, env in (
        ("plain decimals, C scanner", plain, None),
        ("exponents, C scanner", expo, None),
        ("exponents, Python path (as before)", expo, pure),
    ):
        best = min(float(child(log, env)[0]) for _ in range(2))
        rates[label] = log.stat().st_size / 1e6 / best
        print(f"    {label:<36} {rates[label]:6.1f} MB per CPU s ({1e3 / rates[label]:5.1f} s per GB)")
    c, py = rates["exponents, C scanner"], rates["exponents, Python path (as before)"]
    print(
        f"    exponents in C: {c / py:.1f}x the Python path, "
        f"{c / rates['plain decimals, C scanner']:.2f}x plain decimals"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of each crafted log (MB)")
    ap.add_argument("--speed-mb", type=float, default=200.0, help="size of the exponent speed logs (MB)")
    ap.add_argument("--only", choices=("memory", "speed"))
    ap.add_argument("--baseline", type=Path, help="an older trainsweep checkout to compare peaks with")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-parse-limits-"))
    try:
        if args.only != "speed":
            memory(tmp, args.mb, args.baseline)
        if args.only != "memory":
            speed(tmp, args.speed_mb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
