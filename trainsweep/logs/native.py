"""The optional C scanner of the cloud-ML reader (``_scan.c``), or None.

It is built at install time where a C compiler is there; without one, or with the environment variable
``TRAINSWEEP_PURE_PYTHON=1``, the reader uses its Python path, which gives the same results (tested) at
about half the speed.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable

PURE_PYTHON_ENV = "TRAINSWEEP_PURE_PYTHON"

ScanStretch = Callable[[bytes, int, int, float], "tuple[bytes, bytes | None, int, bytes] | None"]


def _load() -> ScanStretch | None:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    if array("d").itemsize != 8 or array("l").itemsize != 8:
        return None  # the C code hands back 8-byte doubles and 64-bit step numbers
    try:
        from trainsweep.logs import _scan  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _scan.scan_stretch


scan_stretch: ScanStretch | None = _load()
"""``scan_stretch(region, start, end, max_duration)``: see ``_scan.c``; None when not built or turned off."""
