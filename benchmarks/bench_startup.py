"""Benchmark: what the environment's compiled bytecode saves every process trainsweep starts.

``scripts/install`` has uv compile the installed packages' bytecode (``--compile-bytecode``). Without it,
where ``PYTHONDONTWRITEBYTECODE`` is set (this machine, CI) Python never writes a ``.pyc``, and each
process compiles again every module it imports: each training cell's worker imports torch and, when it
builds its optimizer, ``torch._dynamo``. Measured in the same run, in fresh processes of this
environment's interpreter:

- the worker's imports (``import torch, torch._dynamo``), with the environment's bytecode and without any
  (``PYTHONPYCACHEPREFIX`` pointed at an empty folder, nothing written: an install without bytecode);
- the README's quickstart through the CLI (``trainsweep run examples/quickstart.yaml --local``), both ways
  (the setting reaches the training processes through the environment).

    .venv/bin/python benchmarks/bench_startup.py [--repeats 3] [--no-sweep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib.util import cache_from_source
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).parent / "trainsweep"
IMPORTS = "import torch, torch._dynamo"


def compiled_share() -> tuple[int, int]:
    """(modules with bytecode, modules) of torch's Python files in this environment."""
    torch_dir = Path(sysconfig.get_paths()["purelib"]) / "torch"
    sources = list(torch_dir.rglob("*.py"))
    return sum(1 for p in sources if Path(cache_from_source(str(p))).is_file()), len(sources)


def env(without_bytecode: Path | None) -> dict[str, str]:
    """This environment, or one whose processes find no bytecode and write none."""
    out = dict(os.environ)
    if without_bytecode is not None:
        out.update(PYTHONPYCACHEPREFIX=str(without_bytecode), PYTHONDONTWRITEBYTECODE="1")
    return out


def timed(args: list[str], environ: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, env=environ, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-sweep", action="store_true", help="time the imports alone")
    a = ap.parse_args()
    have, total = compiled_share()
    print(f"torch's modules with bytecode in this environment: {have} of {total}")
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "no-bytecode"
        empty.mkdir()
        ways = {"with the environment's bytecode": env(None), "without bytecode": env(empty)}
        imports = {
            way: [timed([sys.executable, "-c", IMPORTS], e) for _ in range(a.repeats)]
            for way, e in ways.items()
        }
        print(f"a worker's imports ({IMPORTS}), median of {a.repeats} fresh processes:")
        for way, xs in imports.items():
            print(f"  {way:32s} {statistics.median(xs):6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in xs)})")
        base = statistics.median(imports["without bytecode"])
        now = statistics.median(imports["with the environment's bytecode"])
        print(f"  saved per process: {base - now:.2f} s ({now / base:.2f}x the time)")
        if a.no_sweep:
            return
        print(
            "the quickstart through the CLI (trainsweep run examples/quickstart.yaml --local), one run each:"
        )
        walls = {}
        for way, e in ways.items():
            out = Path(tmp) / way.replace(" ", "-")
            spec = str(ROOT / "examples" / "quickstart.yaml")
            walls[way] = timed([str(CLI), "run", spec, "--local", "--no-watch", "--out", str(out)], e)
            print(f"  {way:32s} {walls[way]:6.1f} s")
        base, now = walls["without bytecode"], walls["with the environment's bytecode"]
        print(f"  saved: {base - now:.1f} s ({now / base:.2f}x the time)")


if __name__ == "__main__":
    main()
