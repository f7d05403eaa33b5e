"""``trainsweep export mlflow``: a sweep's results into an MLflow tracking server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainsweep.cli.common import fail, make_console

export_app = typer.Typer(help="Send a sweep's results where your team tracks runs.", no_args_is_help=True)


@export_app.command("mlflow")
def mlflow_command(
    folder: Annotated[
        Path, typer.Argument(help="A sweep's folder (trainsweep download / run) or an import's.")
    ],
    tracking_uri: Annotated[
        str, typer.Option("--tracking-uri", help="The MLflow tracking server (http://host:port, ...).")
    ],
    experiment: Annotated[
        str | None, typer.Option("--experiment", help="Experiment name (default: the folder's name).")
    ] = None,
) -> None:
    """One parent run for the sweep, one child run per configuration; again: nothing duplicated."""
    from trainsweep.errors import TrainsweepError
    from trainsweep.mlflow_export import export_mlflow

    if not folder.is_dir():
        raise fail(f"{folder} is not a folder: give the folder `trainsweep download` or `import` wrote")
    try:
        result = export_mlflow(folder, tracking_uri, experiment=experiment)
    except TrainsweepError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # MLflow's own words: an unreachable server, a refused request
        raise fail(f"MLflow export to {tracking_uri} failed: {type(exc).__name__}: {exc}") from None
    make_console().print(
        f"Exported to experiment {result.experiment_id}, parent run {result.parent_run_id}: "
        f"{result.created} configuration run(s) created, {result.found} found and brought up to date"
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.add_typer(export_app, name="export")
