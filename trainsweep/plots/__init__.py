"""Matplotlib figures as PNG bytes: ``Figure`` objects only, never pyplot's global state.

``run`` draws one run (step times per epoch); the other modules here draw sweep-level figures.

Names in titles, labels and legends (a run's, a log file's) are drawn as they are: every figure is built
and rendered with ``text.parse_math`` off (:func:`plain_text`), so a ``$`` in a name is a dollar sign, not
the start of mathtext that may not parse and would lose the plot (and the report with it).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import Any, TypeVar

from matplotlib import rc_context
from matplotlib.figure import Figure

PNG_DPI = 100

F = TypeVar("F", bound=Callable[..., Any])


def plain_text(fn: F) -> F:
    """Run ``fn`` with ``text.parse_math`` off (texts take the setting when they are made, tick labels when
    the figure is drawn: both the figure functions and :func:`figure_png` use this)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with rc_context({"text.parse_math": False}):  # text is never parsed as mathtext
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@plain_text
def figure_png(fig: Figure, *, dpi: int = PNG_DPI) -> bytes:
    """Render a figure to PNG bytes (same figure, same bytes: no timestamp in the metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()
