"""Matplotlib figures as PNG bytes: ``Figure`` objects only, never pyplot's global state.

``run`` draws one run (step times per epoch); the other modules here draw sweep-level figures.

Names in titles, labels and legends (a run's, a log file's, an instance type's) go through :func:`literal`:
a ``$`` in a name is a dollar sign, not the start of mathtext that may not parse and would lose the plot
(and the report with it). Numbers keep matplotlib's own mathtext (log-scale ticks).
"""

from __future__ import annotations

import io
import math

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


_LOG_SUBS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))


def log_ticks(lo: float, hi: float, *, least: int = 3) -> list[float]:
    """Ticks for a log axis over ``[lo, hi]`` (both > 0): powers of ten, else 1-2-5 of each decade, else
    finer, whichever first gives at least ``least`` ticks inside; [] when even the finest does not (the
    range is too narrow for a log axis to help)."""
    if not (0 < lo < hi):
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in _LOG_SUBS:
        ticks = [s * 10.0**k for k in range(first, last + 1) for s in subs]
        inside = [t for t in ticks if lo <= t <= hi]
        if len(inside) >= least:
            return inside
    return []
