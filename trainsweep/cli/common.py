"""Helpers the command modules share (stdlib, typer and rich only, like every CLI module).

Every console prints text as it is (``markup=False``): paths, log lines, failure reasons and spec
values hold ``[`` and ``]`` (``run[``, ``[/opt/ml/input/data/train]``), which rich markup would read
as tags, or refuse with a MarkupError. Style comes from :class:`rich.text.Text` objects instead
(:func:`styled`); table cells given as strings are plain text too.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text


def make_console(*, stderr: bool = False, soft_wrap: bool = True) -> Console:
    """A console that never interprets what it prints as markup, nor highlights it."""
    return Console(stderr=stderr, soft_wrap=soft_wrap, markup=False, highlight=False)


def styled(*parts: str | tuple[str, str]) -> Text:
    """Text from plain strings and ``(text, style)`` pairs: ``styled(("error:", "bold red"), " ", msg)``."""
    return Text.assemble(*parts)


def error_line(message: str) -> Text:
    """``error: message``, the label in bold red, the message as it is."""
    return styled(("error:", "bold red"), " ", message)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise: ``raise fail("...")``."""
    make_console(stderr=True).print(error_line(message))
    return typer.Exit(code)


# ---- AWS options and session (boto3 is imported only when a command calls :func:`aws_session`) --------

ProfileOpt = Annotated[str | None, typer.Option("--profile", help="AWS profile (as the AWS CLI).")]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's; as `cdk deploy`).",
    ),
]


def aws_session(profile: str | None, region: str | None) -> Any:
    """A boto3 session for ``--profile`` / ``--region`` (:func:`trainsweep.aws.region.open_session`).

    Raises:
        TrainsweepError: the profile does not exist, or no region is configured anywhere.
    """
    from trainsweep.aws.region import open_session

    return open_session(profile, region)
