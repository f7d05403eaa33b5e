"""Matplotlib figures as PNG bytes: ``Figure`` objects only, never pyplot's global state.

``run`` draws one run (step times per epoch); the other modules here draw sweep-level figures.
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

PNG_DPI = 100


def figure_png(fig: Figure, *, dpi: int = PNG_DPI) -> bytes:
    """Render a figure to PNG bytes (same figure, same bytes: no timestamp in the metadata)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()
