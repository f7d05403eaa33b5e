"""report.html in a real headless browser (Debian's chromium): offline, every image renders, no errors."""

from __future__ import annotations

import shutil

import pytest

from trainsweep import layout
from trainsweep.report import sweep_artefacts

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


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
