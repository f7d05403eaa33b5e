"""A sweep's results as MLflow runs (``trainsweep export mlflow``): one parent run per sweep, one child
run per configuration (``sweep.csv``'s rows).

A child run holds its configuration as parameters (instance type, instance count, batch size, platform,
runs), every figure of its row as a metric (the ``*_std`` columns are the spread over repetitions), each
repetition's epoch times as a series (``epoch_time_s.rep<N>``, step = epoch), its status and reason as
tags, and its run records as artifacts. The parent holds the recommendation as tags and the report,
``sweep.csv``, ``sweep.json`` and the plots as artifacts.

Exporting again finds the runs by their tags (``trainsweep.sweep``, ``trainsweep.cell``) and logs only
what is missing, so no run or metric value is duplicated. The MLflow client is the optional extra
``trainsweep[mlflow]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainsweep import axes, layout
from trainsweep.errors import TrainsweepError

if TYPE_CHECKING:
    import pandas as pd
    from mlflow import MlflowClient

    from trainsweep.logs.model import RunTimings

INSTALL = "pip install 'trainsweep[mlflow]'"
SWEEP_TAG = "trainsweep.sweep"
CELL_TAG = "trainsweep.cell"
PARAM_COLUMNS = ("instance_type", "instance_count", "batch_size", "platform", "runs", "gpus")
TAG_COLUMNS = ("status", "quality", "notes", "not_judged", "billable_source", "mfu_note")
FIXED_TIME_MS = 0  # metrics carry a fixed timestamp: the same export logs the same values


@dataclass
class ExportResult:
    """What an export did: the experiment, the parent run, and how many child runs it made or found."""

    experiment_id: str
    parent_run_id: str
    created: int = 0
    found: int = 0
    child_run_ids: dict[str, str] = field(default_factory=dict)


def mlflow_client(tracking_uri: str) -> MlflowClient:
    """An MLflow client for ``tracking_uri``.

    Raises:
        TrainsweepError: MLflow is not installed (says how to install it).
    """
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise TrainsweepError(f"the MLflow export needs the mlflow package ({exc}): {INSTALL}") from None
    return MlflowClient(tracking_uri=tracking_uri)


def _setting(row: dict[str, Any], axis_columns: Sequence[str]) -> dict[str, Any]:
    """A configuration's setting of the sweep's axes: a table row's axis columns, or a recommendation
    choice's ``axes`` (``{}`` without axes)."""
    said = row.get("axes")
    if isinstance(said, dict):
        return said
    return {c: row[c] for c in axis_columns if row.get(c) is not None}


def _cell_key(row: dict[str, Any], axis_columns: Sequence[str] = ()) -> str:
    """``instance type/instance count/batch size/platform``, then the setting (``dtype=bfloat16``) in a
    sweep with axes: one child run per configuration."""
    key = "/".join(str(row.get(c)) for c in ("instance_type", "instance_count", "batch_size", "platform"))
    setting = _setting(row, axis_columns)
    return f"{key}/{axes.label(setting)}" if setting else key


def _find_run(client: MlflowClient, experiment_id: str, tags: dict[str, str]) -> Any:
    query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
    found = client.search_runs([experiment_id], filter_string=query, max_results=2)
    return found[0] if found else None


def _metrics(row: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in row.items():
        if key in PARAM_COLUMNS or isinstance(value, str) or value is None:
            continue
        number = float(value)
        if not math.isnan(number):
            out[key] = number
    return out


def _log_missing(client: MlflowClient, run: Any, metrics: dict[str, float], params: dict[str, str]) -> None:
    from mlflow.entities import Metric, Param

    have_metrics, have_params = run.data.metrics, run.data.params
    new_metrics = [Metric(k, v, FIXED_TIME_MS, 0) for k, v in metrics.items() if have_metrics.get(k) is None]
    new_params = [Param(k, v) for k, v in params.items() if k not in have_params]
    if new_metrics or new_params:
        client.log_batch(run.info.run_id, metrics=new_metrics, params=new_params)


def _log_series(client: MlflowClient, run_id: str, key: str, values: list[tuple[int, float]]) -> None:
    from mlflow.entities import Metric

    logged = {(m.step, m.value) for m in client.get_metric_history(run_id, key)}
    new = [Metric(key, v, FIXED_TIME_MS, step) for step, v in values if (step, v) not in logged]
    if new:
        client.log_batch(run_id, metrics=new)


def _runs_of(row: dict[str, Any], runs: list[RunTimings], axis_columns: Sequence[str]) -> list[RunTimings]:
    from trainsweep.cost.runs import resolve_instance_type, run_setting

    setting = axes.label(_setting(row, axis_columns))
    return [
        r
        for r in runs
        if resolve_instance_type(r) == row.get("instance_type")
        and r.batch_size == row.get("batch_size")
        and (not axis_columns or axes.label(run_setting(r)) == setting)
    ]


def _export_cell(
    client: MlflowClient,
    parent: Any,
    row: dict[str, Any],
    runs: list[RunTimings],
    root: Path,
    axis_columns: Sequence[str] = (),
) -> tuple[str, bool]:
    """The child run of one configuration; returns its id and whether it was created."""
    experiment_id, sweep_id = parent.info.experiment_id, parent.data.tags[SWEEP_TAG]
    key = _cell_key(row, axis_columns)
    tags = {SWEEP_TAG: sweep_id, CELL_TAG: key}
    run = _find_run(client, experiment_id, tags)
    created = run is None
    if run is None:
        all_tags = {**tags, "mlflow.parentRunId": parent.info.run_id, "mlflow.runName": key}
        run = client.create_run(experiment_id, tags=all_tags)
    run_id = run.info.run_id
    params = {c: str(row[c]) for c in (*PARAM_COLUMNS, *axis_columns) if row.get(c) is not None}
    _log_missing(client, client.get_run(run_id), _metrics(row), params)
    for column in TAG_COLUMNS:
        if row.get(column):
            client.set_tag(run_id, f"trainsweep.{column}", str(row[column]))
    for rep, timings in enumerate(sorted(_runs_of(row, runs, axis_columns), key=lambda r: r.name)):
        epochs = [(e.index, float(e.epoch_s)) for e in timings.epochs if e.epoch_s is not None]
        if epochs:
            _log_series(client, run_id, f"epoch_time_s.rep{rep}", epochs)
        record = root / layout.run_record_path(timings.name)
        if record.is_file():
            client.log_artifact(run_id, str(record), layout.RUNS_DIR)
    client.set_terminated(run_id, "FINISHED" if row.get("status") == "ok" else "FAILED")
    return run_id, created


def _recommendation_tags(root: Path) -> dict[str, str]:
    path = root / layout.SWEEP_JSON
    if not path.is_file():
        return {}
    rec = json.loads(path.read_text(encoding="utf-8")).get("recommendation") or {}
    tags = {}
    for which in ("pick", "fastest", "cheapest"):
        choice = rec.get(which)
        if isinstance(choice, dict):
            tags[f"trainsweep.recommendation.{which}"] = _cell_key(choice, ())
    if rec.get("text"):
        tags["trainsweep.recommendation"] = " ".join(str(s) for s in rec["text"])[:4000]
    return tags


def _parent(client: MlflowClient, experiment_id: str, sweep_id: str, root: Path) -> Any:
    run = _find_run(client, experiment_id, {SWEEP_TAG: sweep_id, "trainsweep.kind": "sweep"})
    if run is None:
        tags = {SWEEP_TAG: sweep_id, "trainsweep.kind": "sweep", "mlflow.runName": sweep_id}
        run = client.create_run(experiment_id, tags=tags)
    for key, value in _recommendation_tags(root).items():
        client.set_tag(run.info.run_id, key, value)
    for name in (layout.REPORT_HTML, layout.SWEEP_CSV, layout.SWEEP_JSON):
        if (root / name).is_file():
            client.log_artifact(run.info.run_id, str(root / name))
    if (root / layout.PLOTS_DIR).is_dir():
        client.log_artifacts(run.info.run_id, str(root / layout.PLOTS_DIR), layout.PLOTS_DIR)
    return client.get_run(run.info.run_id)


def _rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The table's rows as plain Python values, a missing value as None."""
    import pandas as pd

    return [
        {k: None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for k, v in record.items()}
        for record in table.to_dict(orient="records")
    ]


def export_mlflow(folder: Path, tracking_uri: str, *, experiment: str | None = None) -> ExportResult:
    """Export the sweep (or import) in ``folder`` to the MLflow tracking server at ``tracking_uri``,
    into ``experiment`` (default: the folder's name).

    Raises:
        TrainsweepError: no ``sweep.csv`` in ``folder``, or MLflow is not installed.
    """
    from trainsweep.report import load_results
    from trainsweep.sweeps.results import axis_columns as axis_columns_of
    from trainsweep.sweeps.results import load

    client = mlflow_client(tracking_uri)
    results = load(Path(folder))
    root = results.folder
    sweep_id = Path(folder).resolve().name
    name = experiment or sweep_id
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else client.create_experiment(name)
    parent = _parent(client, experiment_id, sweep_id, root)
    out = ExportResult(experiment_id, parent.info.run_id)
    runs = load_results(root)[0]
    axis_columns = axis_columns_of(results.table)
    for row in _rows(results.table):
        run_id, created = _export_cell(client, parent, row, runs, root, axis_columns)
        out.child_run_ids[_cell_key(row, axis_columns)] = run_id
        out.created += created
        out.found += not created
    client.set_terminated(parent.info.run_id, "FINISHED")
    return out
