"""Benchmark: the README's install step on a fresh checkout, from an empty package cache.

Copies the working tree (tracked and untracked, not ignored files) into a temporary folder twice and
installs the development environment in each from nothing, with its own empty cache:

- baseline: ``python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`` (pip resolves every
  transitive dependency anew);
- locked: ``scripts/install`` (pip installs uv from its hashes, uv installs ``requirements.lock``).

It prints each wall time and their ratio, the environments' sizes, and which installed packages differ
between them. The network is part of what is measured: run both in the same session.

    python3 benchmarks/bench_install.py [--only locked|baseline]
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

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "baseline": "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt",
    "locked": "scripts/install",
}


def fresh_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for rel in filter(None, (name.decode() for name in listed)):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def frozen(venv_python: Path) -> set[str]:
    out = subprocess.run(
        [str(venv_python), "-m", "pip", "list", "--format=freeze", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tools = ("pip==", "setuptools==")
    return {line.lower() for line in out.splitlines() if line and not line.startswith(tools)}


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def install(name: str, work: Path) -> tuple[float, set[str], float]:
    repo = work / name
    fresh_checkout(repo)
    cache = work / f"{name}-cache"
    env = {**os.environ, "PIP_CACHE_DIR": str(cache / "pip"), "UV_CACHE_DIR": str(cache / "uv")}
    env.pop("VIRTUAL_ENV", None)
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", COMMANDS[name]], cwd=repo, env=env, check=True)
    wall = time.perf_counter() - t0
    python = repo / ".venv" / "bin" / "python"
    subprocess.run([str(python), "-c", "import trainsweep, torch, pandas, moto, aws_cdk"], check=True)
    return wall, frozen(python), size_mb(repo / ".venv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(COMMANDS))
    args = parser.parse_args()
    names = [args.only] if args.only else ["baseline", "locked"]
    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    results = {}
    try:
        for name in names:
            results[name] = install(name, work)
            wall, packages, size = results[name]
            print(f"{name:9s} {wall:7.1f} s  {len(packages):4d} packages  {size:7.0f} MB  ({COMMANDS[name]})")
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(results) == 2:
        (base, base_pkgs, _), (locked, locked_pkgs, _) = results["baseline"], results["locked"]
        print(f"locked install takes {locked / base:.2f}x the baseline's time ({base / locked:.1f}x faster)")
        print("only in baseline:", ", ".join(sorted(base_pkgs - locked_pkgs)) or "none")
        print("only in locked:  ", ", ".join(sorted(locked_pkgs - base_pkgs)) or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
