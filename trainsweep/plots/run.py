"""Per-run figures: the seed's "step times per epoch" plot."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib import rcParams
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.plots import figure_png, literal, log_ticks

_LEGEND_MAX_EPOCHS = 10
_LINE2D_MAX_EPOCHS = _LEGEND_MAX_EPOCHS
"""Up to this many epochs, one ``Line2D`` each (the legend needs them); beyond, one :class:`_EpochLines`."""


def _xy(epoch: Epoch) -> tuple[np.ndarray, np.ndarray]:
    """Step numbers 1..n and step times as arrays (what matplotlib makes of lists, without the lists)."""
    return np.arange(1, epoch.steps + 1), np.asarray(epoch.step_s, dtype=float)


def _line_style(epoch: Epoch, colour: Any) -> dict[str, Any]:
    return {"color": colour, "linewidth": 1.0, "marker": "." if epoch.steps < 60 else None}


class _EpochLines(Artist):
    """One line per epoch, drawn one after the other with a single reused ``Line2D``.

    The same pixels as one ``ax.plot`` line per epoch (same line properties, same order, same data
    limits), but no ``Line2D`` per epoch: a log with 86,000 epochs would hold them all, with copies of
    their data, until the figure is drawn. An epoch's step times are read when it is drawn.
    """

    zorder = Line2D.zorder

    def __init__(self, ax: Any, epochs: list[Epoch], colours: list[Any]) -> None:
        super().__init__()
        self._epochs, self._colours = epochs, colours
        self._line = Line2D([], [])
        self._line.set_figure(ax.figure)
        self._line.axes = ax
        self._line.set_transform(ax.transData)
        self._line.set_clip_path(ax.patch)
        self.positive = True
        """Whether every step time is above 0 (a log scale shows them all)."""
        for epoch in epochs:
            xs, ys = _xy(epoch)
            self.positive = self.positive and bool((ys > 0).all())
            self._line.set_data(xs, ys)
            ax._update_line_limits(self._line)  # what ax.plot does per line (matplotlib is pinned)
        self._line.set_data([], [])

    def draw(self, renderer: Any) -> None:
        if not self.get_visible():
            return
        line = self._line
        for epoch, colour in zip(self._epochs, self._colours, strict=True):
            line.set_data(*_xy(epoch))
            style = _line_style(epoch, colour)
            if style["marker"] is None:  # what Line2D(marker=None) takes
                style["marker"] = rcParams["lines.marker"]
            line.set(**style)
            line.draw(renderer)
        line.set_data([], [])
        self.stale = False


def step_times_figure(run: RunTimings) -> Figure:
    """Step time against step number, one line per epoch (log scale: step 1 dwarfs the rest)."""
    fig = Figure(figsize=(8, 4.5))
    # Fixed margins: tight_layout would measure every tick label and double the rendering time.
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.12, top=0.92)
    ax = fig.add_subplot()
    title = run.name
    if run.computing_system and run.batch_size is not None:
        title = f"{run.name} ({run.computing_system}, batch size {run.batch_size})"
    ax.set_title(literal(title), fontsize=10)
    ax.set_xlabel("Step within epoch")
    ax.set_ylabel("Step time (s)")
    epochs = [e for e in run.epochs if e.steps]
    if not epochs:
        ax.text(0.5, 0.5, "no step times in this log", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    colours = _epoch_colours(len(epochs))
    positive = True
    if len(epochs) <= _LINE2D_MAX_EPOCHS:
        for epoch, colour in zip(epochs, colours, strict=True):
            xs, ys = _xy(epoch)
            positive = positive and bool((ys > 0).all())
            ax.plot(xs, ys, label=f"epoch {epoch.index}", **_line_style(epoch, colour))
    else:
        lines = _EpochLines(ax, epochs, colours)
        ax.add_artist(lines)
        positive = lines.positive
        ax._request_autoscale_view()  # type: ignore[attr-defined]  # private; as ax.plot: autoscaled when drawn
    if positive:
        _log_axis(ax)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, which="major", alpha=0.3)
    if len(epochs) <= _LEGEND_MAX_EPOCHS:
        ax.legend(fontsize=8, ncols=2 if len(epochs) > 5 else 1)
    else:
        ax.text(
            0.99,
            0.97,
            f"{len(epochs)} epochs, dark = first, yellow = last",
            ha="right",
            va="top",
            fontsize=8,
            transform=ax.transAxes,
        )
    return fig


def _log_axis(ax: Any) -> None:
    """A log step-time axis with at least three labelled ticks inside the data (step 1 can be 100x the
    rest); a linear one when the step times span too little for a log axis to help."""
    lo, hi = (float(v) for v in ax.dataLim.intervaly)
    ticks = log_ticks(lo, hi)
    if not ticks:
        return
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    # Plain numbers ("0.1", "10"): easier to read than 10^-1 and no mathtext layout per label.
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _epoch_colours(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def step_times_png(run: RunTimings) -> bytes:
    """The step-times-per-epoch plot of a run as PNG bytes (``execution-times/.../e<N>.png``)."""
    return figure_png(step_times_figure(run))
