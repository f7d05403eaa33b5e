"""The results as typed Parquet tables for notebooks: ``sweep.parquet`` and ``runs.parquet``.

``sweep.parquet`` holds ``sweep.csv``'s rows and columns with their types (the types
:func:`trainsweep.sweeps.results.read_table` gives: numbers ``float64``, counts ``int64`` or nullable
``Int64``, text strings). ``runs.parquet`` holds one row per training step of every run (its main rank):
``run``, ``instance_type``, ``batch_size``, ``epoch``, ``step``, ``step_time_s``, ``data_wait_s``,
``compute_s`` (the last two missing where the log did not split the step). pyarrow writes them.

They are written where results land on disk: ``trainsweep import``, ``trainsweep report`` and every
download of a sweep's results (``trainsweep download``, the end of a cloud or local ``trainsweep run``).
The Lambda functions that build ``sweep.csv`` leave them out: pyarrow would take a large part of a
function's 250 MB.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from trainsweep import atomicio, layout

if TYPE_CHECKING:
    import pandas as pd

    from trainsweep.logs.model import RunTimings

STEP_COLUMNS = (
    "run",
    "instance_type",
    "batch_size",
    "epoch",
    "step",
    "step_time_s",
    "data_wait_s",
    "compute_s",
)
"""The columns of ``runs.parquet``, in order."""


def sweep_frame(csv: bytes) -> pd.DataFrame:
    """``sweep.csv``'s bytes as the typed table ``trainsweep.load`` gives."""
    from trainsweep.sweeps.results import read_table

    return read_table(io.BytesIO(csv))


def steps_frame(runs: Iterable[RunTimings]) -> pd.DataFrame:
    """One row per step of each run's epochs (:data:`STEP_COLUMNS`), runs in the order given."""
    import numpy as np
    import pandas as pd

    from trainsweep.cost.runs import resolve_instance_type

    parts: dict[str, list[np.ndarray]] = {c: [] for c in STEP_COLUMNS}
    for run in runs:
        itype = resolve_instance_type(run)
        for epoch in run.epochs:
            times = np.asarray(epoch.step_s, dtype="float64")
            n = len(times)
            if not n:
                continue
            parts["run"].append(np.full(n, run.name, dtype=object))
            parts["instance_type"].append(np.full(n, itype, dtype=object))
            parts["batch_size"].append(np.full(n, run.batch_size, dtype=object))
            parts["epoch"].append(np.full(n, epoch.index, dtype="int64"))
            parts["step"].append(np.asarray(epoch.step_numbers, dtype="int64"))
            parts["step_time_s"].append(times)
            for column in ("data_wait_s", "compute_s"):
                split = getattr(epoch, column)
                aligned = split is not None and len(split) == n
                parts[column].append(np.asarray(split, dtype="float64") if aligned else np.full(n, np.nan))
    joined = {c: np.concatenate(v) if v else np.array([]) for c, v in parts.items()}
    return pd.DataFrame(
        {
            "run": pd.array(joined["run"], dtype="string"),
            "instance_type": pd.array(joined["instance_type"], dtype="string"),
            "batch_size": pd.array(joined["batch_size"], dtype="Int64"),
            "epoch": joined["epoch"].astype("int64"),
            "step": joined["step"].astype("int64"),
            "step_time_s": joined["step_time_s"].astype("float64"),
            "data_wait_s": joined["data_wait_s"].astype("float64"),
            "compute_s": joined["compute_s"].astype("float64"),
        }
    )


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    return buffer.getvalue()


def parquet_artefacts(csv: bytes | None, runs: Iterable[RunTimings]) -> dict[str, bytes]:
    """``{sweep.parquet: ..., runs.parquet: ...}`` (names relative to a results root); no
    ``sweep.parquet`` without ``sweep.csv``."""
    out = {layout.RUNS_PARQUET: _parquet(steps_frame(runs))}
    if csv is not None:
        out[layout.SWEEP_PARQUET] = _parquet(sweep_frame(csv))
    return out


def write_parquet(root: Path) -> list[Path]:
    """Write both tables into the results root ``root`` from its ``sweep.csv`` and ``runs/*.json``;
    returns the files written (none when ``root`` holds neither). Unreadable run records are left out,
    as ``trainsweep report`` leaves them out."""
    from trainsweep.report import load_results

    csv_path = root / layout.SWEEP_CSV
    runs = load_results(root)[0] if (root / layout.RUNS_DIR).is_dir() else []
    if not runs and not csv_path.is_file():
        return []
    written = []
    csv = csv_path.read_bytes() if csv_path.is_file() else None
    for name, data in parquet_artefacts(csv, runs).items():
        written.append(atomicio.write_bytes(root / name, data, durable=False))
    return written
