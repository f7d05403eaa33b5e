"""The end of a sweep that has ``tracking``: its results exported to MLflow as ``trainsweep export mlflow``
does (:func:`trainsweep.mlflow_export.export_mlflow`).

A failure to export loses nothing: the results are already on disk, the run records MLflow's own words in
``tracking_error`` (the CLI's exit status says it) and the user is told the command that exports them
later.
"""

from __future__ import annotations

import shlex
from typing import Any

from trainsweep import layout
from trainsweep.sweeps.result import SweepEvents, SweepRun


def export_command(run: SweepRun, uri: str, experiment: str) -> str:
    """The ``trainsweep export mlflow`` command that exports ``run``'s folder again."""
    args = ["trainsweep", "export", "mlflow", str(run.dest), "--tracking-uri", uri]
    return shlex.join([*args, "--experiment", experiment])


def export_tracked(run: SweepRun, spec: Any, events: SweepEvents) -> None:
    """Export ``run``'s downloaded results to ``spec.tracking`` (a :class:`trainsweep.spec.SweepSpec`'s);
    nothing without tracking or without a results table. Sets ``run.tracked`` (the
    :class:`~trainsweep.mlflow_export.ExportResult`) or ``run.tracking_error``."""
    tracking = getattr(spec, "tracking", None)
    if tracking is None or not run.downloaded:
        return
    uri, experiment = tracking.mlflow, tracking.experiment_name(spec.name)
    if not (run.dest / layout.RESULTS_DIR / layout.SWEEP_CSV).is_file():
        events.note(f"nothing exported to MLflow: sweep {run.sweep_id} has no results table")
        return
    from trainsweep.mlflow_export import export_mlflow

    events.say(f"Exporting sweep {run.sweep_id} to MLflow at {uri} (experiment {experiment})…")
    try:
        result = export_mlflow(run.dest, uri, experiment=experiment)
    except Exception as exc:  # MLflow's own words: an unreachable server, a refused request, no client
        run.tracking_error = (
            f"the MLflow export to {uri} failed: {type(exc).__name__}: {exc}\n"
            f"The results are in {run.dest}/; export them when the server answers: "
            f"{export_command(run, uri, experiment)}"
        )
        events.warn(run.tracking_error)
        return
    run.tracked = result
    events.say(
        f"MLflow: experiment {experiment} ({result.experiment_id}), parent run {result.parent_run_id}: "
        f"{result.created} configuration run(s) created, {result.found} brought up to date"
    )
