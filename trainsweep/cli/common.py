"""Helpers the command modules share (stdlib, typer and rich only, like every CLI module)."""

from __future__ import annotations

import typer
from rich.console import Console


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise: ``raise fail("...")``."""
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)
