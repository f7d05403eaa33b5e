"""Matplotlib figures as PNG bytes: ``Figure`` objects only, never pyplot's global state.

``run`` draws one run (step times per epoch); the other modules here draw sweep-level figures.

Names in titles, labels and legends (a run's, a log file's, an instance type's) go through :func:`literal`:
a ``$`` in a name is a dollar sign, not the start of mathtext that may not parse and would lose the plot
(and the report with it). Numbers keep matplotlib's own mathtext (log-scale ticks).
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

PNG_DPI = 100


def literal(text: str) -> str:
    """``text`` (a name from a log, a file or a spec) as matplotlib must be given it to draw it as it is:
    each ``$`` escaped, so none starts mathtext (which may not parse, and would lose the plot)."""
    return text.replace("$", r"\$")


def figure_png(fig: Figure, *, dpi: int = PNG_DPI) -> bytes:
    """Render a figure to PNG bytes (same figure, same bytes: no timestamp in the metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()
