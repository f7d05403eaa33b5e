"""Sweep figures: each is a PNG, labels what it shows, and copes with missing values."""

from __future__ import annotations

import re
from array import array

import numpy as np
import pytest

from trainsweep.cost.metrics import FAILED, INFEASIBLE, ConfigMetrics
from trainsweep.cost.recommend import recommend
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.plots import figure_png
from trainsweep.plots import steps as st
from trainsweep.plots import sweep as sp

PNG = b"\x89PNG\r\n\x1a\n"


def _row(itype, bs, sps, status="ok", **kw) -> ConfigMetrics:
    step = bs / sps if sps else None
    return ConfigMetrics(
        itype,
        1,
        bs,
        3,
        samples_per_s=sps,
        samples_per_s_std=sps * 0.05 if sps else None,
        step_time_s=step,
        cost_per_epoch_usd=0.01 * bs / 256 if sps else None,
        time_to_train_s=1000 / (sps or 1) * 100,
        cost_to_train_usd=bs / 1000,
        status=status,
        **kw,
    )


ROWS = [
    _row("ml.p3.2xlarge", 256, 16000.0),
    _row("ml.p3.2xlarge", 512, 17500.0),
    _row("ml.g4dn.xlarge", 256, 5000.0, data_wait_share=0.3),
    _row("ml.g4dn.xlarge", 512, None, status=INFEASIBLE),
]


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_heatmap_writes_values_and_the_status_of_empty_cells():
    fig = sp.samples_per_s_heatmap(ROWS)
    assert "infeasible" in _texts(fig)
    assert "16,000" in _texts(fig)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Batch size" and ax.get_ylabel() == "Instance type"
    assert figure_png(fig).startswith(PNG)


def test_cost_heatmap_uses_a_log_scale_when_values_span_decades():
    rows = [_row("ml.p3.2xlarge", 256, 1.0), _row("ml.p2.xlarge", 256, 1.0)]
    rows[0].cost_per_epoch_usd, rows[1].cost_per_epoch_usd = 0.001, 1.0
    fig = sp.cost_per_epoch_heatmap(rows)
    assert fig.axes[0].images[0].norm.__class__.__name__ == "LogNorm"


def test_a_log_colour_bar_over_little_more_than_a_decade_gets_three_labelled_ticks():
    rows = [_row("ml.p3.2xlarge", 256, 1.0), _row("ml.p2.xlarge", 256, 1.0)]
    rows[0].cost_per_epoch_usd, rows[1].cost_per_epoch_usd = 0.03, 0.7  # 23x: one power of ten inside
    fig = sp.cost_per_epoch_heatmap(rows)
    bar = fig.axes[1].yaxis
    lo, hi = fig.axes[1].get_ylim()
    locs = [v for v in bar.get_major_locator()() if lo <= v <= hi]
    labels = [t for t in bar.get_major_formatter().format_ticks(locs) if t]
    assert len(labels) >= 3, labels


def test_throughput_has_a_line_and_a_band_per_instance_type():
    fig = sp.throughput_figure(ROWS)
    ax = fig.axes[0]
    assert len(ax.lines) == 2 and len(ax.collections) == 2
    assert "samples/s" in ax.get_ylabel()


def test_pareto_marks_front_and_pick():
    rec = recommend([r for r in ROWS if r.status == "ok"], deadline_s=1e6)
    fig = sp.pareto_figure(ROWS, rec)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "Pareto front" in labels and "recommended" in labels and "deadline" in labels


def test_step_breakdown_stacks_wait_on_compute_and_says_so_when_there_is_no_data():
    fig = sp.step_breakdown_figure(ROWS)
    bars = fig.axes[0].patches
    assert len(bars) == 2  # one configuration with wait data: compute + wait
    assert bars[1].get_height() == pytest.approx(ROWS[2].step_time_s * 0.3)
    empty = sp.step_breakdown_figure(ROWS[:2])
    assert any("data-wait" in t for t in _texts(empty))


def test_every_figure_survives_an_all_failed_sweep():
    rows = [_row("ml.p3.2xlarge", 256, None, status=FAILED)]
    rec = recommend(rows)
    for fig in (
        sp.cost_per_epoch_heatmap(rows),
        sp.samples_per_s_heatmap(rows),
        sp.throughput_figure(rows),
        sp.pareto_figure(rows, rec),
        sp.step_breakdown_figure(rows),
        sp.heatmap_figure([], lambda r: 1.0, title="t", colorbar_label="c", lower_is_better=True),
        st.distribution_figure({}),
        st.rank_timeline_figure(RunTimings(name="empty")),
    ):
        assert figure_png(fig).startswith(PNG)


def test_trim_keeps_the_p1_to_p99_range():
    x = np.concatenate([np.full(98, 1.0), [1000.0, -1000.0]])
    assert st.trim_p1_p99(x).tolist() == [1.0] * 98


def test_distribution_panel_fits_a_normal_to_the_trimmed_steps():
    rng = np.random.default_rng(0)
    steps = [*rng.normal(0.1, 0.01, 2000), 5.0]  # one warm-up-like outlier
    fig = st.distribution_figure({"p3.2xlarge bs 256": steps})
    mu, sigma = (float(v) for v in re.findall(r"[μσ]=([\d.]+) ms", fig.axes[0].get_title()))
    assert mu == pytest.approx(100, abs=1) and sigma == pytest.approx(9.5, abs=0.6)
    assert len(fig.axes[0].lines) == 1  # the fitted curve


def test_rank_timeline_draws_one_row_per_rank_with_wait_and_compute():
    ranks = {
        r: [
            Epoch(
                1, array("d", [1, 1, 1]), array("l", [1, 2, 3]), array("d", [0.2] * 3), array("d", [0.8] * 3)
            )
        ]
        for r in range(4)
    }
    run = RunTimings(name="ddp", epochs=ranks[0], ranks=ranks)
    fig = st.rank_timeline_figure(run)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    spans = [len(c.get_paths()) for c in ax.collections]
    assert spans == [2, 2] * 4  # steps 2-3 of 4 ranks: a wait and a compute bar each
    assert "waiting for data" in ax.get_title()
