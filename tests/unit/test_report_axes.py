"""The report of a sweep with axes, rebuilt by ``trainsweep report`` from imported logs: the best
setting per instance type by time and by cost, a plot of each axis's effect, and a recommendation that
names the whole configuration. A sweep without axes has none of these."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.axis_logs import EPOCHS, G5, G6, seed_log, time_to_train, write_axis_logs
from trainsweep import layout
from trainsweep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results root of the axis logs, imported, then its report rebuilt offline."""
    tmp = tmp_path_factory.mktemp("axes")
    result = runner.invoke(
        app, ["import", str(write_axis_logs(tmp / "src")), "--out", str(tmp / "out"), "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    root = tmp / "out" / "exp"
    for p in (root / layout.SWEEP_JSON, root / layout.REPORT_HTML):
        p.unlink()
    result = runner.invoke(app, ["report", str(root)])
    assert result.exit_code == 0, result.output
    return root


def _fastest_setting(itype: str) -> tuple[str, int]:
    cells = [(dtype, bs) for (t, dtype, bs) in EPOCHS if t == itype]
    return min(cells, key=lambda c: time_to_train(itype, *c))


def test_each_instance_type_names_its_fastest_and_cheapest_setting(reported: Path) -> None:
    doc = json.loads((reported / layout.SWEEP_JSON).read_text())
    best = {
        (b["instance_type"], b["by"]): (b["axes"]["dtype"], b["batch_size"]) for b in doc["best_settings"]
    }
    # the price of one instance type is one figure: its cheapest is its fastest
    assert best == {(t, by): _fastest_setting(t) for t in (G5, G6) for by in ("time", "cost")}
    assert best[(G5, "time")][0] == "bfloat16" and best[(G6, "time")][0] == "float32"
    g5 = next(b for b in doc["best_settings"] if b["instance_type"] == G5 and b["by"] == "time")
    other = min(time_to_train(G5, "float32", bs) for bs in (256, 512))
    assert g5["time_to_train_s"] == pytest.approx(time_to_train(G5, *_fastest_setting(G5)))
    assert g5["other_settings_behind"] == pytest.approx(other / g5["time_to_train_s"] - 1)


def test_the_recommendation_names_the_whole_configuration(reported: Path) -> None:
    rec = json.loads((reported / layout.SWEEP_JSON).read_text())["recommendation"]
    dtype, bs = _fastest_setting(G5)
    assert rec["fastest"]["instance_type"] == G5 and rec["fastest"]["axes"] == {"dtype": dtype}
    assert any(s.startswith(f"Fastest: {G5} with batch size {bs} and dtype={dtype} (") for s in rec["text"])
    pick = rec["pick"]
    setting = f"dtype={pick['axes']['dtype']}"
    assert rec["text"][0].startswith(
        f"Use {pick['instance_type']} with batch size {pick['batch_size']} and {setting} ("
    )


def test_the_page_shows_the_best_settings_each_axis_effect_and_a_setting_column(reported: Path) -> None:
    page = (reported / layout.REPORT_HTML).read_text()
    assert 'id="best-settings-table"' in page and 'id="plot-axis-dtype"' in page
    assert '<th class="t">Setting</th>' in page and "and setting of the axes" in page
    assert (reported / layout.plot_path("axis-dtype")).read_bytes().startswith(b"\x89PNG")


def test_a_sweep_without_axes_has_no_setting_figures(tmp_path: Path) -> None:
    logs = tmp_path / "src" / "logs"
    logs.mkdir(parents=True)
    for bs in (256, 512):
        (logs / f"result-g5-1-{bs}-e0.txt").write_text(seed_log(bs, (10.0, 8.0 + bs / 256)))
    result = runner.invoke(
        app, ["import", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "out" / layout.SWEEP_JSON).read_text())
    assert "best_settings" not in doc and "axes" not in doc["recommendation"]["pick"]
    page = (tmp_path / "out" / layout.REPORT_HTML).read_text()
    assert "best-settings" not in page and "plot-axis-" not in page and ">Setting</th>" not in page
    assert not list((tmp_path / "out" / layout.PLOTS_DIR).glob("axis-*"))


def test_each_setting_is_a_row_of_the_heatmaps_and_a_line_of_the_curves() -> None:
    from trainsweep.cost.metrics import ConfigMetrics
    from trainsweep.plots.sweep import samples_per_s_heatmap, throughput_figure

    rows = [
        ConfigMetrics(G5, 1, 256, 1, samples_per_s=100.0 * n, axes={"dtype": d})
        for n, d in enumerate(("float32", "bfloat16"), 1)
    ]
    (heat,) = samples_per_s_heatmap(rows).axes[:1]
    assert [t.get_text() for t in heat.get_yticklabels()] == [
        "g5.xlarge dtype=float32",
        "g5.xlarge dtype=bfloat16",
    ]
    (curves,) = throughput_figure(rows).axes
    assert len(curves.get_lines()) == 2
