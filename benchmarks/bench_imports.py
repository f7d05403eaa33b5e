"""Benchmark: 200 logs dropped into ``imports/`` of a running local stack at once.

Starts the embedded AWS, deploys the project's stack, uploads 200 real training logs (the cloud-ML
logs of ../shared/fixtures/real-data, cycled, each under its own run name) as fast as S3 takes them,
then waits until every asynchronous S3 notification has been handled. Prints the upload time, the time
until all 200 run records exist, the notification counters, and the baseline of the same parse done
in-process without the stack (parse + artefacts per log), so the ratio shows the local stack's cost.

    .venv/bin/python benchmarks/bench_imports.py [--count 200] [--workers 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_DATA = ROOT.parent / "shared" / "fixtures" / "real-data" / "cloud-ML"
IMPORT_NAME = "bench"
_NAME = re.compile(r"^result-(?P<vm>.+)-(?P<bs>\d+)-e(?P<n>\d+)\.txt$")


def real_logs() -> list[Path]:
    logs = sorted(p for p in REAL_DATA.rglob("result-*.txt") if _NAME.match(p.name))
    if not logs:
        sys.exit(f"no real logs under {REAL_DATA}")
    return logs


def planned_uploads(count: int) -> list[tuple[str, Path]]:
    """(key, source) pairs: unique run names ``result-<VM>-<BS>-e<i>`` so none can overwrite another."""
    from trainsweep import layout

    logs = real_logs()
    out = []
    for i in range(count):
        src = logs[i % len(logs)]
        m = _NAME.match(src.name)
        assert m is not None
        name = f"result-{m['vm']}-{m['bs']}-e{1000 + i}.txt"
        out.append((f"{layout.IMPORTS_PREFIX}{IMPORT_NAME}/{name}", src))
    return out


def baseline(uploads: list[tuple[str, Path]]) -> float:
    """The same work without the stack: parse each log and build its artefacts in this process."""
    from trainsweep.artefacts import run_artefacts
    from trainsweep.logs import parse

    t0 = time.perf_counter()
    for key, src in uploads:
        run = parse(src.read_bytes(), name=Path(key).stem)
        run_artefacts(run)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2, help="notification worker threads")
    args = ap.parse_args()

    from trainsweep import layout
    from trainsweep.aws import s3 as s3io
    from trainsweep.local.server import EmbeddedAws

    uploads = planned_uploads(args.count)
    t_base = baseline(uploads)

    t0 = time.perf_counter()
    with EmbeddedAws(notification_workers=args.workers) as aws:
        stack = aws.deploy()
        t_ready = time.perf_counter() - t0
        bucket = stack.output("BucketName")
        s3 = aws.client("s3")

        t1 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda ks: s3.upload_file(str(ks[1]), bucket, ks[0]), uploads))
        t_upload = time.perf_counter() - t1
        drained = aws.notifications.drain(600)
        t_all = time.perf_counter() - t1
        stats = aws.notifications.stats
        sweep_id = layout.import_results_sweep_id(IMPORT_NAME)
        runs_prefix = layout.results_key(sweep_id, layout.RUNS_DIR + "/")
        records = s3io.list_keys(s3, bucket, runs_prefix)
        expected = {Path(k).stem for k, _ in uploads}
        got = {Path(k).stem for k in records}

    print(f"local stack ready (start + synth + deploy): {t_ready:6.2f} s")
    print(f"uploads of {len(uploads)} logs:                {t_upload:6.2f} s (returned before parsing)")
    print(
        f"all notifications handled:               {t_all:6.2f} s after the first upload (drained={drained})"
    )
    print(
        f"notifications: queued {stats.queued}, delivered {stats.delivered}, "
        f"retried {stats.retried}, failed {stats.failed}"
    )
    print(f"run records: {len(got & expected)}/{len(expected)} present, lost: {len(expected - got)}")
    print(f"baseline (parse + artefacts in-process, no stack): {t_base:6.2f} s")
    print(f"ratio stack/baseline: {t_all / t_base:5.2f}x  ({t_all / len(uploads) * 1000:.0f} ms per log)")
    if expected - got or stats.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
