"""End to end: a local sweep of the built-in MNIST CNN over loader workers (``num_workers: [0, 2]``)
through the CLI. Each run counts its FLOPs and says so in its run record; ``sweep.csv`` has the MFU
columns (a CPU has no peak in the catalogue: the note says so) and the report sets the measured data wait
of each worker count next to the one predicted from zero workers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.logs import mllog

from .conftest import write_mnist, write_spec

pytestmark = pytest.mark.slow


def test_a_sweep_over_loader_workers_measures_what_the_what_if_predicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    data = write_mnist(tmp_path / "mnist.npz", 512, 64)
    spec = write_spec(
        tmp_path,
        data,
        axes={"num_workers": [0, 2]},
        batch_sizes=[32],
        packing="per-instance",
        max_concurrency=1,
    )
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]
    results = folder / layout.RESULTS_DIR
    cells = json.loads((folder / layout.JOBS_JSON).read_text())["cells"]
    assert sorted((c["axes"]["num_workers"], c["status"]) for c in cells) == [
        (0, "completed"),
        (2, "completed"),
    ]
    for cell in cells:
        record = json.loads((results / layout.run_record_path(cell["run_name"])).read_text())
        assert record["extra"][mllog.FLOPS]["per_sample"] > 0

    table = list(csv.DictReader(io.StringIO((results / layout.SWEEP_CSV).read_text())))
    assert [t["num_workers"] for t in table] == ["0", "2"]
    assert all(float(t["flops_per_sample"]) > 0 and t["mfu"] == "" for t in table)
    assert all(t["mfu_note"] == "no peak: the catalogue has no accelerator peak for local" for t in table)
    page = (results / layout.REPORT_HTML).read_text()
    assert '<section id="loader-workers">' in page and 'id="tokens-mfu"' in page
