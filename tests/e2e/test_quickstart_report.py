"""End to end: the README's first command (``trainsweep run examples/quickstart.yaml --local``), and its
``report.html`` read in headless Chromium as a newcomer reads it: the recommendation names the fastest
configuration of the whole table (and why it was set aside, when it was), no plot of zeros or of nothing
is drawn, and the page holds together at a laptop's and a phone's width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"

# Each drawn plot and the table column whose values it shows: some of them must be above 0.
PLOTTED = {
    "samples-per-s": "Samples/s",
    "throughput": "Samples/s",
    "time-to-train": "Time to train",
    "step-breakdown": "Data wait",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert "trainsweep run examples/quickstart.yaml --local" in (ROOT / "README.md").read_text()
    out = tmp_path_factory.mktemp("quickstart")
    result = CliRunner().invoke(app, ["run", str(QUICKSTART), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (page,) = out.glob(f"*/{layout.RESULTS_DIR}/{layout.REPORT_HTML}")
    return page


def _table(driver: Any) -> list[dict[str, Any]]:
    """The configuration table as the page shows it: per row its class and each column's sort value."""
    return list(
        driver.execute_script(
            "const t = document.querySelector('#sweep-table');"
            "const heads = Array.from(t.tHead.rows[0].cells).map(c => c.textContent);"
            "return Array.from(t.tBodies[0].rows).map(r => {"
            "  const row = {cls: r.className};"
            "  Array.from(r.cells).forEach((c, i) => {"
            "    const v = c.getAttribute('data-v'); row[heads[i]] = v === null ? c.textContent : v;"
            "  });"
            "  return row;"
            "});"
        )
    )


def test_the_recommendation_names_the_fastest_of_the_table_and_why_when_it_was_set_aside(chromium, report):
    chromium.get(report.as_uri())
    rows = _table(chromium)
    assert len(rows) == 3
    text = chromium.execute_script("return document.querySelector('#recommendation').innerText;")
    fastest = min(rows, key=lambda r: float(r["Time to train"]))
    named = f"local with batch size {fastest['Batch size']}"
    if fastest["cls"] == "bad":
        assert f"local x {fastest['Batch size']} trains in" in text and "but is set aside: " in text
    else:
        assert f"Use {named} (" in text and f"Fastest: {named} (" in text
    # The quickstart's settings let every batch size learn within the margin: the answer is the speed
    # trade-off, not the guard.
    assert [r["cls"] for r in rows if r["cls"] == "bad"] == []
    assert chromium.execute_script("return document.querySelector('#not-judged');") is None
    assert all(float(r["Eval accuracy"]) >= 0.95 for r in rows), rows


def test_no_plot_of_zeros_or_of_nothing_is_drawn(chromium, report):
    chromium.get(report.as_uri())
    figures = chromium.execute_script(
        "return Array.from(document.querySelectorAll('#plots figure')).map(f => {"
        "  const i = f.querySelector('img'); return [f.id, i.complete, i.naturalWidth]; });"
    )
    drawn = {fid.removeprefix("plot-") for fid, _, _ in figures}
    assert all(complete and width > 0 for _, complete, width in figures), figures
    assert not drawn & {"cost-per-epoch", "pareto"}  # local runs have no price: costs are all 0
    line = chromium.execute_script("return document.querySelector('#no-prices').textContent;")
    assert line.startswith("No cost plots: no configuration has a price (local runs cost nothing)")
    assert {"samples-per-s", "throughput", "time-to-train"} <= drawn
    rows = _table(chromium)
    for plot, column in PLOTTED.items():
        if plot in drawn:
            values = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
            assert any(v > 0 for v in values), (plot, column, values)
    assert all(column not in rows[0] for column in ("USD/h", "USD to train", "Samples/USD"))


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_the_quickstart_report_fits_a_laptop_and_a_phone(chromium, layout_at, report, viewport):
    page = layout_at(chromium, report, viewport)
    assert page["pageWidth"] <= page["innerWidth"]
    assert all(right <= page["innerWidth"] for right in page["images"])
    assert page["recommendation"] <= page["innerWidth"]
    assert all(r["height"] < 2.5 * page["font"] for r in page["rows"]), page["rows"]
