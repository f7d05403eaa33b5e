"""The C scanner is built in this install and on by default; ``TRAINSWEEP_PURE_PYTHON=1`` turns it off in a
fresh interpreter (the scanner against the Python path: tests/unit/test_native_scan.py)."""

from __future__ import annotations

import subprocess
import sys

from trainsweep.logs import native

SCAN = native.scan_stretch


def test_the_scanner_is_built_and_used_by_default() -> None:
    assert SCAN is not None, "trainsweep/logs/_scan.c was not built: reinstall with a C compiler (gcc)"
    out = subprocess.run(
        [sys.executable, "-c", "from trainsweep.logs import native; print(native.scan_stretch is None)"],
        capture_output=True,
        text=True,
        check=True,
        env={"TRAINSWEEP_PURE_PYTHON": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "True", "TRAINSWEEP_PURE_PYTHON=1 must turn the scanner off"
