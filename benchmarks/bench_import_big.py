"""Peak memory and time of ``trainsweep import`` on one very long log (a plain script, not a test).

    python benchmarks/bench_import_big.py [--gb 1.0] [--skip-no-report]

Generates a ``--gb`` GB cloud-ML log (bench_parse's generator: the epochs of every real cloud-ML log,
renumbered into one long run, named ``result-p3-1-64-e1.txt`` so that it gets the seed outputs too) in
a temporary folder, then, each in its own child process started from this small parent:

- the baseline: ``trainsweep.logs.parse`` of the same log alone (the floor for anything that parses it);
- ``trainsweep import DIR --out OUT`` (run record, e1.json/.summary/.png, quality.json, sweep report);
- the same with ``--no-report`` (the per-run artefacts only), unless ``--skip-no-report``.

Prints each child's peak RSS (VmHWM, read by the child itself when it exits) and wall time, and the
sizes of the files the import wrote. Everything temporary is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_parse import REAL, generate_log  # noqa: E402

# The child writes its own VmHWM (peak RSS) to the file named by BENCH_HWM when it exits, so that the
# figure is the child's alone (ru_maxrss would keep the parent's high-water mark across exec).
HWM_HOOK = """
import atexit, os
from pathlib import Path

def _hwm():
    status = Path("/proc/self/status").read_text().splitlines()
    kb = next(int(x.split()[1]) for x in status if x.startswith("VmHWM"))
    Path(os.environ["BENCH_HWM"]).write_text(str(kb))

atexit.register(_hwm)
"""
PARSE_CHILD = (
    HWM_HOOK
    + """
import sys
from trainsweep.logs import parse
run = parse(sys.argv[1])
print(run.steps_total, len(run.epochs), len(run.real_time), run.status)
"""
)
IMPORT_CHILD = (
    HWM_HOOK
    + """
import sys
from trainsweep.cli import main
sys.argv = ["trainsweep", "import", *sys.argv[1:]]
main()
"""
)


def child(tmp: Path, code: str, *args: str) -> tuple[float, float, str]:
    """(peak RSS in MB, wall seconds, stdout) of ``python -c code args``."""
    hwm = tmp / "hwm"
    hwm.unlink(missing_ok=True)
    env = dict(os.environ, BENCH_HWM=str(hwm), PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env
    )
    dt = time.perf_counter() - t
    return int(hwm.read_text()) / 1024, dt, out.stdout


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:05.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="size of the generated log (GB)")
    ap.add_argument("--skip-no-report", action="store_true", help="do not also time --no-report")
    args = ap.parse_args()
    if not REAL.is_dir():
        sys.exit(f"real data not found at {REAL}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-big-"))
    try:
        src = tmp / "logs"
        src.mkdir()
        log = src / "result-p3-1-64-e1.txt"
        size, blocks = generate_log(log, args.gb)
        print(f"trainsweep import of one generated {size / 1e9:.2f} GB log ({blocks:,} real epoch blocks)")

        peak, dt, out = child(tmp, PARSE_CHILD, str(log))
        steps, epochs, stamps, status = out.split()
        print(
            f"  {int(steps):,} steps, {int(epochs):,} epochs, {int(stamps):,} wall-clock stamps, "
            f"status {status}"
        )
        print(f"  baseline, parse only:        peak RSS {peak:7.1f} MB, {_clock(dt)} wall")

        runs = [("import", [])] + ([] if args.skip_no_report else [("import --no-report", ["--no-report"])])
        for label, extra in runs:
            target = tmp / "out"
            peak, dt, _ = child(tmp, IMPORT_CHILD, str(src), "--out", str(target), *extra)
            files = [p for p in target.rglob("*") if p.is_file()]
            written = sum(p.stat().st_size for p in files)
            print(
                f"  trainsweep {label + ':':19s} peak RSS {peak:7.1f} MB, {_clock(dt)} wall "
                f"({len(files)} files, {written / 1e6:.0f} MB written)"
            )
            if label == "import":
                for p in sorted(files, key=lambda p: -p.stat().st_size)[:4]:
                    print(f"      {p.relative_to(target)}: {p.stat().st_size / 1e6:.1f} MB")
            shutil.rmtree(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
