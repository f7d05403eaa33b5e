"""trainsweep: which instance type and batch size train your model fastest and cheapest.

The Python API (:mod:`trainsweep.api`, reference in ``docs/python-api.md``)::

    import trainsweep

    trainsweep.plan("examples/quickstart.yaml")            # the grid, job names, worst-case cost
    run = trainsweep.run("examples/quickstart.yaml", local=True)
    results = trainsweep.load(run)                         # results.table: sweep.csv as a DataFrame

The names are imported on first use, so ``import trainsweep`` (the CLI, the instrumentation in a training
script) loads none of pandas, boto3 or the drivers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from trainsweep.api import download as download
    from trainsweep.api import load as load
    from trainsweep.api import plan as plan
    from trainsweep.api import run as run
    from trainsweep.api import status as status
    from trainsweep.api import watch as watch
    from trainsweep.sweeps.result import PrintedEvents as PrintedEvents
    from trainsweep.sweeps.result import SweepEvents as SweepEvents
    from trainsweep.sweeps.result import SweepInterrupted as SweepInterrupted
    from trainsweep.sweeps.result import SweepRun as SweepRun
    from trainsweep.sweeps.results import SweepResults as SweepResults

_API = {
    "plan": "trainsweep.api",
    "run": "trainsweep.api",
    "status": "trainsweep.api",
    "watch": "trainsweep.api",
    "download": "trainsweep.api",
    "load": "trainsweep.api",
    "SweepRun": "trainsweep.sweeps.result",
    "SweepEvents": "trainsweep.sweeps.result",
    "PrintedEvents": "trainsweep.sweeps.result",
    "SweepInterrupted": "trainsweep.sweeps.result",
    "SweepResults": "trainsweep.sweeps.results",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    """The API's names, imported when first asked for."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
