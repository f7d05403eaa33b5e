"""Benchmark: a sweep of thousands of jobs through the real state machine definition (issue 13, item 10).

Synthesizes the stack, deploys its definition and handlers into moto as the statemachine tests do
(``tests/statemachine/sweep_harness.py``), and runs a sweep whose training jobs end at once (the
harness's scripted SageMaker stands in for training): PlanSweep -> Distributed Maps over each instance
type's jobs (train, ExportLog, ParseRun) -> AggregateSweep -> notification. Every other batch size fails
with a 10 kB reason. Prints the wall time, the cells' final statuses and the largest state payload
(every state's input and output, parent and child executions), against Step Functions' 256 KiB.

    .venv/bin/python benchmarks/bench_dmap.py [--jobs 5000] [--types 2] [--concurrency 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # app.py / infra/ for the harness
sys.path.insert(0, str(ROOT / "tests" / "statemachine"))
sys.path.insert(0, str(ROOT / "tests" / "infra"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

TYPES = ["ml.p3.2xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge", "ml.g6.xlarge"]
LIMIT = 256 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--types", type=int, default=2, choices=range(1, len(TYPES) + 1))
    ap.add_argument("--concurrency", type=int, default=100, help="the spec's max_concurrency")
    args = ap.parse_args()

    from sweep_harness import RETRY_CONTEXT, moto_sweeps
    from synth_helpers import synth

    from trainsweep import layout

    per_type = args.jobs // args.types
    reps = max(1, -(-per_type // 100))
    batch_sizes = list(range(2, 2 + -(-per_type // reps)))
    spec = {
        "name": "bench",
        "workload": {"model": "mnist-cnn", "epochs": 2},
        "instance_types": TYPES[: args.types],
        "batch_sizes": batch_sizes,
        "repetitions": reps,
        "max_concurrency": args.concurrency,
    }
    jobs = args.types * len(batch_sizes) * reps
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-dmap-") as tmp:
        template = synth(Path(tmp), {"retry": RETRY_CONTEXT}, nag=False)
    synth_s = time.perf_counter() - t0
    with moto_sweeps(template) as make:
        sweep = make({bs: "ok" if bs % 2 else "fail-long" for bs in batch_sizes})
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = sweep.run({"spec": spec, "sweep_id": "bench"}, timeout=6 * 3600)
        run_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
        summary = json.loads(result.get("output") or "{}")
        cells = sweep.json(layout.jobs_key("bench")).get("cells") or []
        state, kind, size = sweep.payloads.largest()
        messages = sweep.messages()
    print(
        f"jobs planned:          {jobs} ({args.types} types x {len(batch_sizes)} batch sizes x {reps} reps)"
    )
    print(f"synth:                 {synth_s:.1f} s")
    print(
        f"execution:             {result['status']} in {run_s:.1f} s "
        f"({run_s / max(1, jobs) * 1000:.0f} ms/job)"
    )
    print(
        f"this process's CPU:    {cpu_s:.1f} s ({cpu_s / max(1, jobs) * 1000:.0f} ms/job); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"cells with a status:   {len({c['run_name'] for c in cells if c.get('status')})} of {jobs}")
    print(f"status counts:         {summary.get('status_counts')}")
    print(f"largest state payload: {size:,} bytes ({state} {kind}), {100 * size / LIMIT:.1f} % of 256 KiB")
    print(f"notifications:         {len(messages)}")


if __name__ == "__main__":
    main()
