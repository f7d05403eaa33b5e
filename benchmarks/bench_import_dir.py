"""Benchmark: ``trainsweep import`` of the shared real data, one process against the worker pool.

Imports every log under ../shared/fixtures/real-data (133 logs, ~14 MB) with ``workers=1`` (the
baseline, measured in the same run) and with ``--workers N`` (default: the CPUs available), once with
and once without the per-experiment sweep report, and prints wall times, logs per second, and the
pool's speed-up ratio. It also splits one process's per-log cost into parse / seed JSON + summary /
PNG / run record, so it is clear where the time goes.

    .venv/bin/python benchmarks/bench_import_dir.py [--workers N] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data"


def timed_import(workers: int, report: bool, repeat: int) -> tuple[float, int, int]:
    from trainsweep.importer import import_dir

    best = float("inf")
    files = size = 0
    for _ in range(repeat):
        out = Path(tempfile.mkdtemp(prefix="bench-import-"))
        try:
            t0 = time.perf_counter()
            result = import_dir(REAL_DATA, out, workers=workers, report=report)
            best = min(best, time.perf_counter() - t0)
            files = result.processed
            size = sum(f.size for f in result.files)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return best, files, size


def per_log_split() -> dict[str, float]:
    """CPU seconds per stage, summed over every log, in this process."""
    from trainsweep.artefacts import run_record_bytes
    from trainsweep.importer import discover
    from trainsweep.logs import parse
    from trainsweep.plots.run import step_times_png
    from trainsweep.summary import iter_seed_json, iter_seed_summary

    tasks = [t for t in discover(REAL_DATA)[0] if t.member is None]  # plain files (not archive members)
    split = {"parse": 0.0, "seed json+summary": 0.0, "png": 0.0, "run record": 0.0}
    for task in tasks:
        t0 = time.process_time()
        run = parse(Path(task.path))
        t1 = time.process_time()
        "".join(iter_seed_json(run))  # as the import writes them (trainsweep.artefacts.iter_run_artefacts)
        "".join(iter_seed_summary(run))
        t2 = time.process_time()
        if run.steps_total:
            step_times_png(run)
        t3 = time.process_time()
        run_record_bytes(run)
        t4 = time.process_time()
        for key, dt in zip(split, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            split[key] += dt
    return split


def main() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=cpus)
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per configuration")
    args = ap.parse_args()
    if not REAL_DATA.is_dir():
        sys.exit(f"real data not found at {REAL_DATA}")
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(f"CPUs available: {cpus}; load average before: {load:.2f}; pool workers: {args.workers}")
    split = per_log_split()
    total = sum(split.values())
    print("one process, CPU time over all logs:")
    for stage, seconds in split.items():
        print(f"  {stage:<18} {seconds:7.2f} s  ({seconds / total:6.1%})")
    for report in (False, True):
        base, files, size = timed_import(1, report, args.repeat)
        pool, _, _ = timed_import(args.workers, report, args.repeat)
        label = "with sweep reports" if report else "per-run outputs only"
        print(f"{label}: {files} logs, {size / 1e6:.1f} MB")
        print(f"  1 process     {base:7.2f} s  {files / base:6.1f} logs/s")
        print(f"  {args.workers} workers     {pool:7.2f} s  {files / pool:6.1f} logs/s")
        print(f"  speed-up      {base / pool:7.2f}x")


if __name__ == "__main__":
    main()
