"""The ``trainsweep`` command line (typer + rich).

Each command group lives in its own module with a ``register(app)`` function. Modules here import only
the standard library, typer and rich at import time; everything heavy (pandas, boto3, moto, torch,
matplotlib) is imported inside the command, so ``trainsweep --help`` stays instant.

The app is built on first use (``from trainsweep.cli import app``, or :func:`main`): ``trainsweep parse
LOG`` with plain arguments runs without it (:mod:`trainsweep.cli.fast`), since building it costs more
CPU than parsing a 25 MB log.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

    app: typer.Typer

# Command groups, in the order they appear in --help.
COMMAND_MODULES = (
    "trainsweep.cli.plan",  # plan, schema
    "trainsweep.cli.sweep",  # run, status, download, doctor
    "trainsweep.cli.logs",  # logs
    "trainsweep.cli.analyse",  # parse, summary, import
    "trainsweep.cli.report",  # report, prices
    "trainsweep.cli.predict",  # predict-eval
    "trainsweep.cli.simulate",  # simulate
    "trainsweep.cli.export",  # export mlflow
)


def _print_version(value: bool) -> None:
    """Print the version and stop, before click asks for a command (``--version`` alone is a full call)."""
    if value:
        import typer

        from trainsweep import __version__

        typer.echo(__version__)
        raise typer.Exit()


def _build_app() -> typer.Typer:
    import typer

    built = typer.Typer(
        name="trainsweep",
        help="Find the instance type and batch size that train your model fastest and cheapest.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(built)

    @built.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ) -> None:
        pass

    return built


def __getattr__(name: str) -> Any:
    """``app``, built once on first use."""
    if name == "app":
        built = globals()["app"] = _build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    from trainsweep.cli import fast

    if fast.run(sys.argv[1:]):
        return
    __getattr__("app")()
