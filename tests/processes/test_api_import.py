"""The Python API's import cost: a plain ``import trainsweep`` in a fresh interpreter loads none of the heavy
libraries until a sweep is run (the rest of the API: tests/unit/test_api.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("source", "absent"),
    [
        ("import trainsweep", ("pandas", "boto3", "trainsweep.api", "trainsweep.sweeps.local")),
        ("import trainsweep; trainsweep.run; trainsweep.load", ("pandas", "boto3", "moto", "trainsweep.cli")),
    ],
)
def test_import_trainsweep_stays_light_until_a_sweep_is_run(source: str, absent: tuple[str, ...]) -> None:
    check = f"{source}\nimport sys\nprint(','.join(m for m in {absent!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == ""
