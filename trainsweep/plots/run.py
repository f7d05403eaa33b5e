"""Per-run figures: the seed's "step times per epoch" plot."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from trainsweep.logs.model import RunTimings
from trainsweep.plots import figure_png

_LEGEND_MAX_EPOCHS = 10


def step_times_figure(run: RunTimings) -> Figure:
    """Step time against step number, one line per epoch (log scale: step 1 dwarfs the rest)."""
    fig = Figure(figsize=(8, 4.5))
    # Fixed margins: tight_layout would measure every tick label and double the rendering time.
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.12, top=0.92)
    ax = fig.add_subplot()
    title = run.name
    if run.computing_system and run.batch_size is not None:
        title = f"{run.name} ({run.computing_system}, batch size {run.batch_size})"
    ax.set_title(title, fontsize=10)
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
    for epoch, colour in zip(epochs, colours, strict=True):
        xs = list(range(1, epoch.steps + 1))
        ys = list(epoch.step_s)
        positive = positive and all(y > 0 for y in ys)
        ax.plot(
            xs,
            ys,
            color=colour,
            linewidth=1.0,
            marker="." if epoch.steps < 60 else None,
            label=f"epoch {epoch.index}",
        )
    if positive:
        ax.set_yscale("log")
        # Plain numbers ("0.1", "10"): easier to read than 10^-1 and no mathtext layout per label.
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
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


def _epoch_colours(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def step_times_png(run: RunTimings) -> bytes:
    """The step-times-per-epoch plot of a run as PNG bytes (``execution-times/.../e<N>.png``)."""
    return figure_png(step_times_figure(run))
