"""The ``trainsweep`` command line (typer + rich).

Each command group lives in its own module with a ``register(app)`` function. Modules here import only
the standard library, typer and rich at import time; everything heavy (pandas, boto3, moto, torch,
matplotlib) is imported inside the command, so ``trainsweep --help`` stays instant.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="trainsweep",
    help="Find the instance type and batch size that train your model fastest and cheapest.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command groups, in the order they appear in --help.
COMMAND_MODULES = (
    "trainsweep.cli.plan",  # plan, schema
    "trainsweep.cli.sweep",  # run, status, download, doctor
    "trainsweep.cli.logs",  # logs
    "trainsweep.cli.analyse",  # parse, summary, import
    "trainsweep.cli.report",  # report, prices
    "trainsweep.cli.predict",  # predict-eval
    "trainsweep.cli.simulate",  # simulate
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def _print_version(value: bool) -> None:
    """Print the version and stop, before click asks for a command (``--version`` alone is a full call)."""
    if value:
        from trainsweep import __version__

        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    pass


def main() -> None:
    app()
