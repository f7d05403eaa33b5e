"""Benchmark: 1,000 raw logs uploaded at once in local mode, every one parsed (issue 13, item 11).

Runs ``tests/embedded_aws/test_local_log_burst.py``'s scenario at full size: a fresh embedded AWS with the
results bucket (versioned) and the real ParseRun notified for ``sweeps/`` logs; 1,000 logs uploaded
from 8 threads, 100 of them twice; waits as ``run_local_sweep`` does; checks every run record exists
and no artefact was written twice with different bytes; prints the upload and parse times.

    .venv/bin/python benchmarks/bench_log_burst.py [--uploads 1000] [--reuploaded 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "embedded_aws"))
sys.path.insert(0, str(ROOT))  # the test module imports tests.embedded_aws.test_local_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=1000)
    ap.add_argument("--reuploaded", type=int, default=100)
    args = ap.parse_args()

    from test_local_log_burst import artifact, burst

    with tempfile.TemporaryDirectory(prefix="bench-burst-") as tmp:
        figures = burst(artifact(Path(tmp)), args.uploads, args.reuploaded)
    n = args.uploads + args.reuploaded
    print(f"uploads:  {n} in {figures['uploads_s']:.1f} s")
    print(
        f"parsed:   all {args.uploads} runs after {figures['parsed_s']:.1f} s "
        f"({figures['parsed_s'] / n:.2f} s a notification)"
    )
    print("rewrites: none with different bytes")


if __name__ == "__main__":
    main()
