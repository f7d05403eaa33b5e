"""The effect of each axis of a sweep with ``axes``: a figure per axis, its values along x.

One panel per instance type (and a second row for the cost per epoch when the sweep has prices); in a
panel, one line per batch size and values of the other axes, with ± one standard deviation over
repetitions as error bars. A value that did not train (failed, infeasible) leaves a gap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from trainsweep.cost.axis_effects import FIGURES, Effect
from trainsweep.plots import literal

MAX_PANELS = 4
"""Instance types shown side by side (the first ones, in the sweep's order)."""


def axis_effect_figure(name: str, figures: dict[str, list[Effect]]) -> Figure:
    """The effect of axis ``name``: ``figures`` maps a figure of :data:`FIGURES` to its effects
    (:func:`trainsweep.cost.axis_effects.axis_effects`), one row of panels each."""
    shown = {f: effects for f, effects in figures.items() if effects}
    types = list(dict.fromkeys(e.instance_type for effects in shown.values() for e in effects))
    types = types[:MAX_PANELS]
    fig = Figure(figsize=(3.6 * max(len(types), 1) + 1.5, 3.2 * max(len(shown), 1)))
    if not shown:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, f"no configuration trained: no effect of {literal(name)} to show", ha="center")
        ax.set_axis_off()
        return fig
    grid = fig.subplots(len(shown), len(types), squeeze=False)
    for row, (figure, effects) in enumerate(shown.items()):
        for col, itype in enumerate(types):
            _panel(grid[row][col], [e for e in effects if e.instance_type == itype], figure)
            grid[row][col].set_title(literal(itype.removeprefix("ml.")), fontsize=9)
            grid[row][col].set_xlabel(literal(name), fontsize=8)
    fig.suptitle(f"Effect of {literal(name)} per instance type and batch size", fontsize=11)
    fig.tight_layout()
    return fig


def _panel(ax: object, effects: Sequence[Effect], figure: str) -> None:
    """One instance type's lines of ``figure`` against the axis's values."""
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    if not effects:
        ax.set_axis_off()
        return
    values = effects[0].values
    x = np.arange(len(values))
    for e in effects:
        y = np.array([np.nan if v is None else v for v in e.mean], dtype=float)
        err = np.array([0.0 if s is None else s for s in e.spread], dtype=float)
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=literal(e.line))
    ax.set_xticks(x, [literal(v) for v in values], fontsize=8)
    ax.set_ylabel(FIGURES[figure][2], fontsize=8)
    ax.set_ylim(bottom=0)
    ax.margins(x=0.15)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, loc="best")
