"""The shape of the code: how many functions are too complex or too long, and how many modules too large.

Prints, for ``trainsweep/``, ``lambdas/`` and ``infra/``:

* functions by cyclomatic complexity: over 15 as ruff's McCabe rule counts it (``C901``, the limit CI
  enforces, with the per-file list of today's offenders in ``pyproject.toml``), and radon's grades D to F
  (over 20 as radon counts it: boolean operators and comprehensions add to it, so radon finds more);
* functions longer than 80 lines (their ``def`` to their last line);
* modules longer than 600 lines.

    .venv/bin/python benchmarks/code_shape.py [--json PATH]

CI prints it; it fails nothing (the C901 rule does). The goals it reports against: functions over 20
at most 10, functions over 80 lines at most 5, modules over 600 lines at most 4.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TREES = ("trainsweep", "lambdas", "infra")
GOALS = {"radon_grade_d_to_f": 10, "functions_over_80_lines": 5, "modules_over_600_lines": 4}


def python_files() -> list[Path]:
    return sorted(p for tree in TREES for p in (ROOT / tree).rglob("*.py"))


def complex_functions(limit: int) -> list[dict[str, Any]]:
    """Functions whose McCabe complexity exceeds ``limit`` (ruff's C901), with their complexity."""
    ruff = Path(sys.executable).with_name("ruff")
    out = subprocess.run(
        [str(ruff), "check", "--isolated", "--select", "C901", "--config",
         f"lint.mccabe.max-complexity={limit}", "--output-format", "json", *TREES],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = json.loads(out.stdout or "[]")
    return [
        {
            "where": f"{Path(f['filename']).relative_to(ROOT)}:{f['location']['row']}",
            "message": f["message"],
        }
        for f in found
    ]


def radon_d_to_f() -> list[dict[str, Any]]:
    """Functions and classes radon grades D, E or F (cyclomatic complexity over 20)."""
    from radon.complexity import cc_visit

    out = []
    for path in python_files():
        for block in cc_visit(path.read_text()):
            if block.complexity > 20:
                where = f"{path.relative_to(ROOT)}:{block.lineno}"
                out.append({"where": where, "name": block.fullname, "complexity": block.complexity})
    return sorted(out, key=lambda b: -b["complexity"])


def long_functions(max_lines: int) -> list[dict[str, Any]]:
    out = []
    for path in python_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > max_lines:
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    out.append({"where": where, "function": node.name, "lines": lines})
    return sorted(out, key=lambda f: -f["lines"])


def large_modules(max_lines: int) -> list[dict[str, Any]]:
    sizes = [(p, len(p.read_text().splitlines())) for p in python_files()]
    return [{"module": str(p.relative_to(ROOT)), "lines": n} for p, n in sorted(sizes, key=lambda x: -x[1])
            if n > max_lines]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    figures = {
        "complexity_over_15": complex_functions(15),
        "radon_grade_d_to_f": radon_d_to_f(),
        "functions_over_80_lines": long_functions(80),
        "modules_over_600_lines": large_modules(600),
    }
    for name, items in figures.items():
        goal = GOALS.get(name)
        verdict = "" if goal is None else f" (goal <= {goal}: {'met' if len(items) <= goal else 'not yet'})"
        print(f"{name.replace('_', ' ')}: {len(items)}{verdict}")
        for item in items:
            print("   ", "  ".join(str(v) for v in item.values()))
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
