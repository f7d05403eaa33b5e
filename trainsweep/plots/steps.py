"""Step-level figures: step-time distributions with a fitted normal, and a per-rank timeline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.plots import literal

_DATA_COLOUR = "#d95f02"
_COMPUTE_COLOUR = "#1b9e77"
_ALT_COLOUR = "#66c2a5"
MAX_PANELS = 24


def trim_p1_p99(values: Sequence[float]) -> np.ndarray:
    """The values inside the 1st..99th percentile (inclusive)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 3:
        return x
    lo, hi = np.percentile(x, [1, 99])
    return x[(x >= lo) & (x <= hi)]


def distribution_figure(samples: Mapping[str, Sequence[float]], *, title: str | None = None) -> Figure:
    """One histogram per configuration of its steady step times (p1-p99), with the fitted normal curve.

    ``samples`` maps a label (e.g. ``p3.2xlarge bs 256``) to step times in seconds; at most
    :data:`MAX_PANELS` panels are drawn, in the order given.
    """
    items = [(k, trim_p1_p99(v)) for k, v in samples.items()]
    items = [(k, v) for k, v in items if v.size >= 2][:MAX_PANELS]
    cols = min(4, max(1, len(items)))
    nrows = max(1, math.ceil(len(items) / cols))
    fig = Figure(figsize=(3.2 * cols, 2.6 * nrows + 0.4), layout="constrained")
    if not items:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no step times to show", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    axes = fig.subplots(nrows, cols, squeeze=False)
    for ax in axes.flat[len(items) :]:
        ax.set_visible(False)
    for ax, (label, x) in zip(axes.flat, items, strict=False):
        mu, sigma = float(x.mean()), float(x.std(ddof=1))
        ax.hist(x * 1000, bins=min(40, max(8, x.size // 10)), density=True, color="#7570b3", alpha=0.6)
        if sigma > 0:
            grid = np.linspace(x.min(), x.max(), 200)
            pdf = np.exp(-0.5 * ((grid - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
            ax.plot(grid * 1000, pdf / 1000, color="black", linewidth=1.2)
        stats = f"μ={mu * 1000:.1f} ms σ={sigma * 1000:.1f} ms (n={x.size})"
        ax.set_title(f"{literal(label)}\n{stats}", fontsize=8)
        ax.set_xlabel("Step time (ms)", fontsize=8)
        ax.set_ylabel("Density (1/ms)", fontsize=8)
        ax.tick_params(labelsize=7)
    default = "Steady step-time distributions (p1-p99) with fitted normal"
    fig.suptitle(literal(title) if title else default, fontsize=11)
    return fig


def _rank_epochs(run: RunTimings) -> dict[int, list[Epoch]]:
    return dict(sorted(run.ranks.items())) if run.ranks else {0: run.epochs}


def rank_timeline_figure(run: RunTimings, *, max_steps: int = 60, skip: int = 1) -> Figure:
    """Per-rank timeline of ``max_steps`` steps after the first ``skip`` (warm-up) steps of the run:
    data wait and compute as horizontal bars.

    Logs without the wait/compute split show each step as one bar. Time is measured from the start of
    the first drawn step of each rank (logs carry durations, not clocks).
    """
    ranks = _rank_epochs(run)
    fig = Figure(figsize=(10, 1.2 + 0.5 * max(1, len(ranks))))
    ax = fig.add_subplot()
    drawn = 0
    split = False
    for row, epochs in enumerate(ranks.values()):
        t = 0.0
        n = 0
        seen = 0
        # (start, width) per colour; one collection per colour and rank keeps long runs cheap to draw.
        bars: dict[str, list[tuple[float, float]]] = {_DATA_COLOUR: [], _COMPUTE_COLOUR: [], _ALT_COLOUR: []}
        for e in epochs:
            if n >= max_steps:
                break
            times = e.step_s  # once per epoch: a very long log's epoch may read it back from disk
            for k in range(e.steps):
                seen += 1
                if seen <= skip:
                    continue
                if n >= max_steps:
                    break
                wait = e.data_wait_s[k] if e.data_wait_s is not None and k < len(e.data_wait_s) else None
                comp = e.compute_s[k] if e.compute_s is not None and k < len(e.compute_s) else None
                if wait is not None and comp is not None:
                    split = True
                    bars[_DATA_COLOUR].append((t, wait))
                    bars[_COMPUTE_COLOUR].append((t + wait, comp))
                    t += wait + comp
                else:
                    bars[_COMPUTE_COLOUR if n % 2 else _ALT_COLOUR].append((t, times[k]))
                    t += times[k]
                n += 1
        for colour, spans in bars.items():
            if spans:
                ax.broken_barh(spans, (row - 0.3, 0.6), facecolors=colour, edgecolor="white", linewidth=0.4)
        drawn = max(drawn, n)
    if not drawn:
        ax.text(0.5, 0.5, "no step times in this log", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    ax.set_ylim(len(ranks) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
    ax.set_xlabel(f"Time since the start of step {skip + 1} (s)")
    what = "orange = waiting for data, green = compute" if split else "alternating shades = consecutive steps"
    ax.set_title(f"{literal(run.name)}: steps {skip + 1}-{skip + drawn} per rank ({what})", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
