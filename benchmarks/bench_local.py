"""Benchmark: local-mode overhead of a whole sweep (target <= 20 s for the quickstart on 2 cores).

Runs ``examples/quickstart.yaml`` (or SPEC) through ``run_local_sweep`` exactly as
``trainsweep run SPEC --local`` does, and splits the wall time into the training processes' own run
time (the union of their lifetimes, measured by the executor) and everything else: server start,
synth (the part not overlapped with the server start), deploy, orchestration (state machine, Lambdas,
polling), notification drain, download, shutdown.
The baseline is the training time of the same run; the ratio is overhead / training.

    .venv/bin/python benchmarks/bench_local.py [SPEC] [--no-synth-cache]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 20.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", default=str(ROOT / "examples" / "quickstart.yaml"))
    ap.add_argument(
        "--no-synth-cache", action="store_true", help="synthesize the CDK app afresh (cold start)"
    )
    args = ap.parse_args()
    if args.no_synth_cache:
        os.environ["TRAINSWEEP_SYNTH_CACHE"] = ""

    from trainsweep.sweeps.local import run_local_sweep

    with tempfile.TemporaryDirectory(prefix="bench-local-") as out:
        t0 = time.perf_counter()
        result = run_local_sweep(args.spec, out_root=Path(out), poll_s=0.5)
        wall = time.perf_counter() - t0
        counts = result.view.counts if result.view is not None else {}
        files = sum(1 for p in Path(result.dest).rglob("*") if p.is_file())

    t = result.timings
    training = result.training_seconds
    overhead = wall - training
    fixed = {
        k: t.get(k, 0.0) for k in ("server_start", "synth_wait", "deploy", "drain", "download", "shutdown")
    }
    orchestration = overhead - sum(fixed.values())
    print(f"spec: {args.spec}")
    print(f"execution: {result.execution_status}; cells: {counts}; files downloaded: {files}")
    print(f"wall time:                 {wall:7.2f} s")
    print(f"training processes (baseline): {training:7.2f} s")
    print(f"local-mode overhead:       {overhead:7.2f} s  (target <= {TARGET_S:.0f} s)")
    for name, seconds in fixed.items():
        print(f"  {name:<22}  {seconds:7.2f} s")
    print(
        f"  {'orchestration':<22}  {orchestration:7.2f} s  (state machine, Lambdas, job start/stop, polling)"
    )
    print(f"overhead / training:       {overhead / training if training else float('nan'):7.2f}x")
    if result.execution_status != "SUCCEEDED":
        sys.exit(f"the sweep did not succeed: {result.error}")


if __name__ == "__main__":
    main()
