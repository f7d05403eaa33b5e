"""report.html in a real headless browser (Debian's chromium): offline, every image renders, no errors; the
layout at a laptop's and a phone's width."""

from __future__ import annotations

from array import array

import pytest

from trainsweep import layout
from trainsweep.logs.model import Epoch, RunHeader, RunTimings
from trainsweep.report import sweep_artefacts


@pytest.fixture(scope="module")
def browser(chromium):
    return chromium


@pytest.fixture(scope="module")
def report_file(tmp_path_factory, fcn_runs):
    out = tmp_path_factory.mktemp("report")
    jobs = [
        {
            "run_name": "oom",
            "instance_type": "ml.p3.2xlarge",
            "batch_size": 8192,
            "status": "infeasible",
            "reason": "CUDA out of memory",
            "billable_s": 90,
        },
    ]
    arts = sweep_artefacts(
        fcn_runs, jobs=jobs, quality={"problems": [{"run": "x", "message": "<b>not bold</b>"}]}
    )
    path = out / layout.REPORT_HTML
    path.write_bytes(arts[layout.REPORT_HTML])
    return path


def test_report_loads_offline_renders_every_image_without_console_errors(browser, report_file):
    browser.get(report_file.as_uri())
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.src.slice(0, 22)]);"
    )
    assert len(images) >= 7
    assert all(complete and width > 0 for complete, width, _ in images), images
    assert all(src.startswith("data:image/png;base64") for _, _, src in images)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    # Quality text is escaped, not markup.
    assert browser.execute_script("return document.querySelectorAll('#quality b').length;") == 0


def test_clicking_a_column_header_sorts_the_table(browser, report_file):
    browser.get(report_file.as_uri())
    heads = "Array.from(document.querySelectorAll('#sweep-table th'))"
    col = browser.execute_script(f"return {heads}.findIndex(t => t.textContent === 'USD to train');")
    rows = "Array.from(document.querySelectorAll('#sweep-table tbody tr'))"
    values = f"return {rows}.map(r => r.cells[{col}].getAttribute('data-v'));"
    browser.execute_script(f"document.querySelectorAll('#sweep-table th')[{col}].click();")
    got = [v for v in browser.execute_script(values) if v]
    assert got == sorted(got, key=float) and len(got) == 24
    browser.execute_script(f"document.querySelectorAll('#sweep-table th')[{col}].click();")
    got = [v for v in browser.execute_script(values) if v]
    assert got == sorted(got, key=float, reverse=True)


def _local_run(bs: int, step: float, steps: int, accuracies: list[float]) -> RunTimings:
    eps = [
        Epoch(i, array("d", [2 * step] + [step] * (steps - 1)), array("l", range(1, steps + 1)),
              epoch_s=step * (steps + 1), validation_accuracy=acc)
        for i, acc in enumerate(accuracies, start=1)
    ]  # fmt: skip
    header = RunHeader(instance_type="local", batch_size=bs, epochs=2, eval_samples=320)
    return RunTimings(name=f"q-local-cpu-{bs}-e0", batch_size=bs, run_index=0, epochs=eps, header=header)


@pytest.fixture(scope="module")
def excluded_report(tmp_path_factory):
    """A local sweep in which two of three batch sizes are set aside (too short to judge): long reasons."""
    runs = [
        _local_run(32, 0.040, 60, [0.959, 1.0]),
        _local_run(64, 0.070, 30, [0.40, 0.884]),
        _local_run(128, 0.060, 15, [0.097, 0.1125]),
    ]
    arts = sweep_artefacts(runs, spec={"name": "q", "workload": {"epochs": 2}})
    path = tmp_path_factory.mktemp("excluded") / layout.REPORT_HTML
    path.write_bytes(arts[layout.REPORT_HTML])
    return path


@pytest.mark.parametrize("viewport", ["laptop", "phone"])
def test_excluded_rows_are_one_line_high_and_nothing_overflows_the_page(
    browser, layout_at, excluded_report, viewport
):
    page = layout_at(browser, excluded_report, viewport)
    assert page["innerWidth"] == {"laptop": 1366, "phone": 390}[viewport]
    assert page["pageWidth"] <= page["innerWidth"]  # the table scrolls inside its box, not the page
    assert all(right <= page["innerWidth"] for right in page["images"])
    assert page["recommendation"] <= page["innerWidth"]
    rows = page["rows"]
    assert [r["cls"] for r in rows] == ["pick", "bad", "bad"]
    # one line: the cell's line (1.45 x the font) and its padding, not the reason wrapped over lines
    assert all(r["height"] < 2.5 * page["font"] for r in rows), (page["font"], rows)


def test_the_reason_of_an_excluded_row_is_its_cells_tooltip(browser, excluded_report):
    browser.get(excluded_report.as_uri())
    cell = browser.execute_script(
        "const r = document.querySelector('#sweep-table tbody tr.bad');"
        "const c = Array.from(r.cells).find(c => c.textContent === 'too short to judge');"
        "return c && c.title;"
    )
    assert cell.startswith("too short to judge: eval_accuracy 0.884 ± 0.018 after 60 optimizer steps")
