"""The issue's "done when": `trainsweep import` of the real FCN grid gives table, plots and report."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def imported(real_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("fcn-import")
    res = CliRunner().invoke(app, ["import", str(real_data / "cloud-ML/seismic-fcn"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    roots = [p.parent for p in out.rglob(layout.SWEEP_CSV)]
    assert len(roots) == 1
    return roots[0]


def test_import_writes_the_sweep_artefacts_for_the_fcn_grid(imported):
    for name in (layout.SWEEP_CSV, layout.SWEEP_JSON, layout.REPORT_HTML):
        assert (imported / name).is_file()
    for plot in ("cost-per-epoch", "samples-per-s", "throughput", "pareto", "step-time-distributions"):
        assert (imported / layout.plot_path(plot)).is_file()
    rows = list(csv.DictReader((imported / layout.SWEEP_CSV).open()))
    assert len(rows) == 24 and {r["status"] for r in rows} == {"ok"}


def test_the_misfiled_byte_copy_is_left_out_of_its_cell(imported):
    rows = {
        (r["instance_type"], r["batch_size"]): r for r in csv.DictReader((imported / layout.SWEEP_CSV).open())
    }
    assert rows[("ml.p2.xlarge", "256")]["runs"] == "2"
    assert rows[("ml.p2.8xlarge", "256")]["runs"] == "3"
    warnings = json.loads((imported / layout.SWEEP_JSON).read_text())["warnings"]
    assert any(w["code"] == "excluded-duplicate" and w["run"] == "result-p2-1-256-e2" for w in warnings)


def test_recommendation_agrees_with_the_imported_table(imported):
    rows = list(csv.DictReader((imported / layout.SWEEP_CSV).open()))
    rec = json.loads((imported / layout.SWEEP_JSON).read_text())["recommendation"]
    cheapest = min(rows, key=lambda r: float(r["cost_to_train_usd"]))
    fastest = min(rows, key=lambda r: float(r["time_to_train_s"]))
    assert (rec["pick"]["instance_type"], str(rec["pick"]["batch_size"])) == (
        cheapest["instance_type"],
        cheapest["batch_size"],
    )
    assert rec["fastest"]["instance_type"] == fastest["instance_type"]
    page = (imported / layout.REPORT_HTML).read_text()
    assert rec["text"][0].split(":")[0] in page
