"""The environment ``scripts/install`` makes holds its packages' bytecode: where PYTHONDONTWRITEBYTECODE
is set, a package installed without it is compiled again by every process that imports it (torch and
``torch._dynamo``: seconds in every training cell, see benchmarks/bench_startup.py)."""

from __future__ import annotations

import sys
from importlib.util import cache_from_source, find_spec
from pathlib import Path

import pytest


@pytest.mark.parametrize("module", ["torch", "torch._dynamo", "torch.optim.optimizer", "pandas", "moto"])
def test_a_heavy_package_imported_by_every_run_has_its_bytecode(module: str) -> None:
    spec = find_spec(module)
    assert spec is not None and spec.origin is not None
    cached = Path(cache_from_source(spec.origin))
    assert cached.is_file(), (
        f"{module} has no bytecode at {cached}: install the environment with scripts/install "
        f"(uv --compile-bytecode), or rm -rf {Path(sys.prefix).name} && scripts/install"
    )
