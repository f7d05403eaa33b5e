"""CLI commands (see trainsweep/cli/__init__.py for the conventions)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
