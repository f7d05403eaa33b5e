"""A downloaded sweep's results for Python: ``sweep.csv`` as a typed pandas DataFrame, the recommendation and
the per-run figures of ``sweep.json``, and their HTML for Jupyter (``trainsweep.load``)."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass, field, fields
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trainsweep import layout

if TYPE_CHECKING:
    import pandas as pd

    from trainsweep.sweeps.result import SweepRun

SHOWN_COLUMNS = (
    "instance_type",
    "instance_count",
    "batch_size",
    "runs",
    "step_time_s",
    "samples_per_s",
    "epoch_time_s",
    "time_to_train_s",
    "cost_to_train_usd",
    "eval_accuracy",
    "status",
)
"""The columns the HTML view shows (``table`` has all of them); those the sweep left empty are dropped."""


@dataclass
class SweepResults:
    """A sweep's results as read from its folder.

    ``table``: one row per configuration (instance type x batch size), the columns of ``sweep.csv`` with
    their types (numbers as ``float64``, counts as nullable ``Int64``, text as strings; an empty figure is
    missing). ``recommendation``: ``sweep.json``'s (``fastest``, ``cheapest``, ``pareto``, ``pick``,
    ``text``...). ``runs``: one row per run (``sweep.json``'s ``runs``).
    """

    folder: Path
    table: pd.DataFrame
    recommendation: dict[str, Any] = field(default_factory=dict)
    runs: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def recommendation_text(self) -> list[str]:
        """The recommendation in sentences, as the report says it."""
        return [str(s) for s in self.recommendation.get("text") or []]

    @property
    def report(self) -> Path | None:
        """``report.html`` beside ``sweep.csv`` (None when there is none)."""
        path = self.folder / layout.REPORT_HTML
        return path if path.is_file() else None

    def _repr_html_(self) -> str:
        return results_html(self)


def column_types() -> dict[str, str]:
    """The pandas type of each ``sweep.csv`` column, from :class:`trainsweep.cost.metrics.ConfigMetrics`."""
    from trainsweep.cost.metrics import CSV_COLUMNS, ConfigMetrics
    from trainsweep.cost.throughput import OPTIONAL_COLUMNS

    hints = typing.get_type_hints(ConfigMetrics)
    by_field = {f.name: hints[f.name] for f in fields(ConfigMetrics)}
    out = {}
    for column in (*CSV_COLUMNS, *OPTIONAL_COLUMNS):
        hint = by_field[column]
        args = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
        if str in args:
            out[column] = "str"
        elif float in args:
            out[column] = "float64"
        else:
            out[column] = "int64" if type(None) not in args else "Int64"
    return out


def _results_root(path: Path) -> Path:
    """The folder holding ``sweep.csv``: ``path`` itself (an import's ``--out``, a ``results/`` folder) or
    its ``results/`` (a downloaded sweep)."""
    from trainsweep.errors import TrainsweepError

    for root in (path / layout.RESULTS_DIR, path):
        if (root / layout.SWEEP_CSV).is_file():
            return root
    raise TrainsweepError(
        f"no {layout.SWEEP_CSV} in {path} or {path / layout.RESULTS_DIR}: give a downloaded sweep's folder "
        "(its sweep has not been aggregated yet if the folder exists)"
    )


def read_table(csv_path: Path | BinaryIO) -> pd.DataFrame:
    """``sweep.csv`` with each column's type; text columns keep ``""`` where the CSV is empty (``notes``,
    ``quality``: nothing to say), other empty cells are missing values."""
    import pandas as pd

    kinds = column_types()
    table = pd.read_csv(
        csv_path, dtype={c: "str" for c, k in kinds.items() if k == "str"}, keep_default_na=False
    )
    for column, kind in kinds.items():
        if column not in table.columns:
            continue
        if kind == "str":
            continue
        values = pd.to_numeric(table[column].replace("", None), errors="coerce")
        table[column] = values.astype(kind if kind != "int64" or values.notna().all() else "Int64")
    return table


def load(path: Path) -> SweepResults:
    """The results of the sweep (or import) in ``path``.

    Raises:
        TrainsweepError: no ``sweep.csv`` there.
    """
    import pandas as pd

    root = _results_root(Path(path))
    table = read_table(root / layout.SWEEP_CSV)
    summary: dict[str, Any] = {}
    summary_path = root / layout.SWEEP_JSON
    if summary_path.is_file():
        doc = json.loads(summary_path.read_text(encoding="utf-8"))
        summary = doc if isinstance(doc, dict) else {}
    runs = summary.get("runs")
    return SweepResults(
        folder=root,
        table=table,
        recommendation=summary.get("recommendation") or {},
        runs=pd.DataFrame(runs) if isinstance(runs, list) else None,
        warnings=[str(w) for w in summary.get("warnings") or []],
    )


# ---- HTML for Jupyter ----------------------------------------------------------------------------------


def _list(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>" if lines else ""


def axis_columns(table: pd.DataFrame) -> list[str]:
    """The columns of a sweep's axes in its table (``sweep.csv`` has one per axis beside its own columns
    and the optional token and MFU ones; none without axes)."""
    from trainsweep.cost.metrics import CSV_COLUMNS
    from trainsweep.cost.throughput import OPTIONAL_COLUMNS

    return [c for c in table.columns if c not in CSV_COLUMNS and c not in OPTIONAL_COLUMNS]


def results_html(results: SweepResults) -> str:
    """The recommendation's sentences, then the table's main columns (every figure is in ``table``)."""
    table = results.table
    axes = axis_columns(table)
    at = SHOWN_COLUMNS.index("batch_size") + 1
    wanted = [*SHOWN_COLUMNS[:at], *axes, *SHOWN_COLUMNS[at:]]
    shown = [c for c in wanted if c in table.columns and table[c].notna().any()]
    parts = [f"<h4>trainsweep results: {escape(str(results.folder))}</h4>"]
    text = results.recommendation_text
    if text:
        parts.append(f"<p><b>Recommendation</b></p>{_list(text)}")
    parts.append(table[shown].to_html(index=False, na_rep="-", float_format=lambda x: f"{x:.4g}"))
    if results.report is not None:
        parts.append(f"<p>Report: {escape(str(results.report))}</p>")
    return "\n".join(parts)


def run_html(run: SweepRun) -> str:
    """A sweep run: how it ended, its cells' counts, and its results when it has them."""
    from trainsweep.sweeps.result import counts_text

    state = "succeeded" if run.succeeded else f"ended {run.execution_status or 'without an execution status'}"
    parts = [f"<p>sweep <code>{escape(run.sweep_id)}</code> {escape(state)}"]
    if run.view is not None:
        parts.append(f": {escape(counts_text(run.view))}")
    if run.error:
        parts.append(f"<br>error: {escape(run.error)}")
    parts.append(f"<br>results in <code>{escape(str(run.dest))}</code></p>")
    try:
        parts.append(results_html(load(run.dest)))
    except Exception as exc:  # no sweep.csv yet (a failed or unwatched sweep): the status is the answer
        parts.append(f"<p>(no results to show: {escape(str(exc))})</p>")
    return "".join(parts)
