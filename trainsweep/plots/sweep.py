"""Sweep-level figures over instance type x batch size: heatmaps, throughput, Pareto, step breakdown.

Every function takes the per-configuration rows of :mod:`trainsweep.cost.metrics` and returns a
``matplotlib.figure.Figure`` (render with :func:`trainsweep.plots.figure_png`). Cells without a value
(failed, infeasible, no price) are drawn, labelled with their status, never silently dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from trainsweep.axes import label as axis_label
from trainsweep.cost.metrics import OK, ConfigMetrics
from trainsweep.cost.recommend import Recommendation
from trainsweep.plots import literal, log_ticks

_DATA_COLOUR = "#d95f02"
_COMPUTE_COLOUR = "#1b9e77"


def _empty(fig: Figure, message: str) -> Figure:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
    return fig


def _types_and_sizes(rows: Sequence[ConfigMetrics]) -> tuple[list[str], list[int]]:
    types = list(dict.fromkeys(_row_name(r) for r in rows))
    sizes = sorted({r.batch_size for r in rows if r.batch_size is not None})
    return types, sizes


def _row_name(r: ConfigMetrics) -> str:
    """The instance type of a row, with its setting of the axes in a sweep with axes (each setting is a
    row of the heatmaps and a line of the curves, not drawn over another's)."""
    return r.instance_type + (f" {axis_label(r.axes)}" if r.axes else "")


def _short(instance_type: str) -> str:
    """The label of an instance type (an imported log's may be anything its file name says)."""
    return literal(instance_type.removeprefix("ml."))


def _fmt(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def heatmap_figure(
    rows: Sequence[ConfigMetrics],
    value: Callable[[ConfigMetrics], float | None],
    *,
    title: str,
    colorbar_label: str,
    lower_is_better: bool,
) -> Figure:
    """A grid of one metric over instance type (rows) x batch size (columns), values written in cells."""
    types, sizes = _types_and_sizes(rows)
    # rows named with a setting of the axes need room for their names
    names = 0.07 * max((len(t) for t in types), default=0) if any(r.axes for r in rows) else 0.0
    fig = Figure(figsize=(1.6 + names + 1.25 * max(len(sizes), 1), 1.4 + 0.55 * max(len(types), 1)))
    if not types or not sizes:
        return _empty(fig, "no configurations to show")
    grid = np.full((len(types), len(sizes)), np.nan)
    label = [["not run" for _ in sizes] for _ in types]
    for r in rows:
        if r.batch_size is None:
            continue
        i, j = types.index(_row_name(r)), sizes.index(r.batch_size)
        v = value(r) if r.status == OK else None
        if v is not None and math.isfinite(v):
            grid[i, j] = v
            label[i][j] = _fmt(v)
        elif r.status != OK:
            label[i][j] = r.status
        else:
            label[i][j] = "no price" if r.usd_per_hour is None else "n/a"
    ax = fig.add_subplot()
    finite = grid[np.isfinite(grid)]
    cmap = "viridis_r" if lower_is_better else "viridis"
    norm = None
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 20:
        norm = LogNorm(vmin=finite.min(), vmax=finite.max())
    masked = np.ma.masked_invalid(grid)
    im = ax.imshow(masked, cmap=cmap, norm=norm, aspect="auto")
    ax.set_facecolor("#eeeeee")
    if finite.size:
        bar = fig.colorbar(im, ax=ax, label=colorbar_label)
        ticks = log_ticks(float(finite.min()), float(finite.max())) if norm is not None else []
        if ticks:  # a log colour scale over 20x can hold a single power of ten: label 1-2-5 too
            bar.set_ticks(ticks)
            bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _fmt(v)))
            bar.ax.yaxis.set_minor_formatter(NullFormatter())
    for i in range(len(types)):
        for j in range(len(sizes)):
            v = grid[i, j]
            colour = "black"
            if math.isfinite(v):
                # White text on dark cells: relative luminance of the cell's colour.
                red, green, blue, _ = im.cmap(im.norm(v))
                if 0.2126 * red + 0.7152 * green + 0.0722 * blue < 0.45:
                    colour = "white"
            ax.text(j, i, label[i][j], ha="center", va="center", fontsize=8, color=colour)
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_yticks(range(len(types)), [_short(t) for t in types])
    ax.set_xlabel("Batch size")
    ax.set_ylabel("Instance type")
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def cost_per_epoch_heatmap(rows: Sequence[ConfigMetrics]) -> Figure:
    return heatmap_figure(
        rows,
        lambda r: r.cost_per_epoch_usd,
        title="Cost per epoch (USD, steady epoch, on-demand price)",
        colorbar_label="USD per epoch",
        lower_is_better=True,
    )


def samples_per_s_heatmap(rows: Sequence[ConfigMetrics]) -> Figure:
    return heatmap_figure(
        rows,
        lambda r: r.samples_per_s,
        title="Training throughput (samples/s, steady state)",
        colorbar_label="samples/s",
        lower_is_better=False,
    )


def throughput_figure(rows: Sequence[ConfigMetrics]) -> Figure:
    """Samples/s against batch size, one line per instance type, the spread over runs as a band."""
    fig = Figure(figsize=(8, 4.8))
    ok = [r for r in rows if r.status == OK and r.samples_per_s is not None and r.batch_size]
    if not ok:
        return _empty(fig, "no configuration has throughput figures")
    ax = fig.add_subplot()
    types = list(dict.fromkeys(_row_name(r) for r in ok))
    colours = _palette(len(types))
    for itype, colour in zip(types, colours, strict=True):
        pts = sorted((r for r in ok if _row_name(r) == itype), key=lambda r: r.batch_size or 0)
        x = np.array([r.batch_size for r in pts], dtype=float)
        y = np.array([r.samples_per_s for r in pts], dtype=float)
        s = np.array([r.samples_per_s_std or 0.0 for r in pts], dtype=float)
        ax.plot(x, y, marker="o", color=colour, label=_short(itype), linewidth=1.5)
        ax.fill_between(x, y - s, y + s, color=colour, alpha=0.2, linewidth=0)
    ax.set_xscale("log", base=2)
    sizes = sorted({r.batch_size for r in ok if r.batch_size})
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("Batch size")
    ax.set_ylabel("Throughput (samples/s)")
    ax.set_title("Throughput vs batch size (band: ± 1 std over repetitions)", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _train_minutes(r: ConfigMetrics) -> float:
    return (r.time_to_train_s or 0.0) / 60


def _train_usd(r: ConfigMetrics) -> float:
    return r.cost_to_train_usd or 0.0


def _target_minutes(r: ConfigMetrics) -> float:
    return (r.time_to_target_s or 0.0) / 60


def _target_usd(r: ConfigMetrics) -> float:
    return r.cost_to_target_usd or 0.0


def pareto_figure(rows: Sequence[ConfigMetrics], rec: Recommendation) -> Figure:
    """Time to train against cost to train (to reach the target, when the recommendation ranks by one);
    the Pareto front joined, the pick starred."""
    fig = Figure(figsize=(8, 5))
    by_target = rec.target is not None
    _minutes = _target_minutes if by_target else _train_minutes
    _usd = _target_usd if by_target else _train_usd
    ok = [
        r
        for r in rows
        if r.status == OK
        and (r.time_to_target_s if by_target else r.time_to_train_s) is not None
        and (r.cost_to_target_usd if by_target else r.cost_to_train_usd) is not None
    ]
    if not ok:
        return _empty(fig, "no configuration has both a time and a cost")
    ax = fig.add_subplot()
    types = list(dict.fromkeys(_row_name(r) for r in ok))
    colours = dict(zip(types, _palette(len(types)), strict=True))
    for itype in types:
        pts = [r for r in ok if _row_name(r) == itype]
        ax.scatter(
            [_minutes(r) for r in pts],
            [_usd(r) for r in pts],
            color=colours[itype],
            label=_short(itype),
            s=36,
            zorder=3,
        )
    front = rec.pareto
    if front:
        ax.plot(
            [_minutes(r) for r in front],
            [_usd(r) for r in front],
            color="black",
            linewidth=1,
            linestyle="--",
            label="Pareto front",
            zorder=2,
        )
        for r in front:
            ax.annotate(
                f"{_short(_row_name(r))} bs {r.batch_size}",
                (_minutes(r), _usd(r)),
                textcoords="offset points",
                xytext=(5, 5),
                fontsize=7,
            )
    if rec.pick is not None:
        ax.scatter(
            [_minutes(rec.pick)],
            [_usd(rec.pick)],
            marker="*",
            s=260,
            facecolor="none",
            edgecolor="red",
            linewidth=1.5,
            label="recommended",
            zorder=4,
        )
    if rec.deadline_s is not None:
        ax.axvline(rec.deadline_s / 60, color="red", alpha=0.4, linestyle=":", label="deadline")
    if rec.budget_usd is not None:
        ax.axhline(rec.budget_usd, color="red", alpha=0.4, linestyle="-.", label="budget")
    what = f"reach {rec.target}" if rec.target is not None else "train"
    ax.set_xlabel(f"Time to {what} (min)")
    ax.set_ylabel(f"Cost to {what} (USD, billable time)")
    ax.set_title("Time vs cost per configuration (lower left is better)", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncols=2)
    fig.tight_layout()
    return fig


_PICK_COLOUR = "#2a8a2a"
_ASIDE_COLOUR = "#bbbbbb"


def time_to_train_figure(rows: Sequence[ConfigMetrics], rec: Recommendation) -> Figure:
    """Time to train per configuration, fastest at the top: the pick in green, configurations set aside
    for their accuracy in grey with the reason (for sweeps without prices, where a time-vs-cost plot would
    put every point at 0)."""
    ok = sorted(
        (r for r in rows if r.status == OK and r.time_to_train_s is not None),
        key=lambda r: r.time_to_train_s or 0.0,
    )
    fig = Figure(figsize=(8, 1.4 + 0.45 * max(len(ok), 1)))
    if not ok:
        return _empty(fig, "no configuration has a time to train")
    ax = fig.add_subplot()
    y = np.arange(len(ok))
    colours = [_PICK_COLOUR if r is rec.pick else (_ASIDE_COLOUR if r.quality else "#4c72b0") for r in ok]
    seconds = [r.time_to_train_s or 0.0 for r in ok]
    ax.barh(y, seconds, color=colours)
    for yi, r, t in zip(y, ok, seconds, strict=True):
        why = f"  set aside: {r.quality.split(':', 1)[0]}" if r.quality else ""
        why = "  recommended" if r is rec.pick else why
        ax.text(t, float(yi), f" {_fmt(t)} s{why}", va="center", fontsize=8)
    ax.set_yticks(y, [f"{_short(_row_name(r))} bs {r.batch_size}" for r in ok], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(seconds) * 1.6)
    ax.set_xlabel("Time to train (s)")
    ax.set_title("Time to train per configuration (fastest at the top)", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def step_breakdown_figure(rows: Sequence[ConfigMetrics]) -> Figure:
    """Stacked bars per configuration: data wait vs compute share of the steady step (seconds)."""
    fig = Figure(figsize=(max(6.0, 0.55 * len(rows) + 2), 4.8))
    ok = [r for r in rows if r.status == OK and r.data_wait_share is not None and r.step_time_s is not None]
    if not ok:
        return _empty(
            fig,
            "no configuration reports data-wait vs compute time\n"
            "(only logs written by the trainsweep container carry it)",
        )
    ax = fig.add_subplot()
    labels = [f"{_short(_row_name(r))}\nbs {r.batch_size}" for r in ok]
    wait = np.array([r.step_time_s * r.data_wait_share for r in ok])  # type: ignore[operator]
    comp = np.array([r.step_time_s * (1 - r.data_wait_share) for r in ok])  # type: ignore[operator]
    x = np.arange(len(ok))
    ax.bar(x, comp, color=_COMPUTE_COLOUR, label="compute")
    ax.bar(x, wait, bottom=comp, color=_DATA_COLOUR, label="waiting for data")
    for xi, r, top in zip(x, ok, comp + wait, strict=True):
        share = r.data_wait_share or 0.0
        ax.text(float(xi), float(top), f"{100 * share:.0f}%", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, labels, fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("Steady step time (s)")
    ax.set_title("Step breakdown: data wait vs compute (label: data-wait share)", fontsize=11)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _palette(n: int) -> list[tuple[float, float, float, float]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]
