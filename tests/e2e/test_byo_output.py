"""End to end: a script's own words and its printed metrics, through ``trainsweep run SPEC --local``.

One script, two cells: at batch size 9 argparse refuses its arguments, and its message reaches
``trainsweep status`` and the report; at batch size 8 it prints ``val_acc: ...`` each epoch, which the
spec's ``metric_definitions`` read, and the cell ends at the spec's target. The job's whole output stays
readable after the sweep (``trainsweep logs JOB --local``).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app

pytestmark = pytest.mark.slow
runner = CliRunner()

SCRIPT = """
import argparse
import torch
from torch.utils.data import DataLoader, TensorDataset
ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int)
ap.add_argument("--epochs", type=int)
args = ap.parse_args()
if args.batch_size % 2:
    ap.error(f"argument --batch-size: {args.batch_size} is odd, this model needs pairs")
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(args.epochs):
    for x, y in DataLoader(data, batch_size=args.batch_size):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    print(f"epoch {epoch}: val_acc: {0.5 + 0.2 * epoch:.2f}", flush=True)
"""


def test_a_scripts_own_words_and_its_printed_accuracy_reach_status_the_report_and_the_target(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: own-words\n"
        "workload:\n"
        "  entry_point: project/train.py\n"
        "  epochs: 10\n"
        "  metric_definitions: [{name: val_acc, regex: 'val_acc: ([0-9.]+)'}]\n"
        "instance_types: [local]\n"
        "batch_sizes: [8, 9]\n"
        "target: {metric: val_acc, value: 0.8}\n"
        "max_runtime_seconds: 300\n"
    )
    out = tmp_path / "out"
    ran = runner.invoke(app, ["run", str(spec), "--local", "--no-watch", "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    (folder,) = [d for d in out.iterdir() if d.is_dir()]

    said = "argument --batch-size: 9 is odd, this model needs pairs"
    shown = runner.invoke(app, ["status", folder.name, "--results", str(out), "--json"])
    assert shown.exit_code == 0, shown.output
    cells = {c["batch_size"]: c for c in json.loads(shown.output)["cells"]}
    assert cells[9]["status"] == "failed"
    assert said in cells[9]["detail"]
    assert said in (folder / layout.RESULTS_DIR / layout.REPORT_HTML).read_text()

    # batch size 8 reached val_acc 0.9 >= 0.8 at its third epoch of ten and stopped there
    assert cells[8]["status"] == "done"
    run8 = f"{folder.name}-local-cpu-8-e0"
    record = json.loads((folder / layout.RESULTS_DIR / layout.run_record_path(run8)).read_text())
    assert [e["validation_accuracy"] for e in record["epochs"]] == [0.5, 0.7, 0.9]
    sweep = json.loads((folder / layout.RESULTS_DIR / layout.SWEEP_JSON).read_text())
    rows = {r["batch_size"]: r for r in sweep["configurations"]}
    assert rows[8]["time_to_target_s"] > 0

    # the failed job's whole output, after the sweep
    job9 = next(j["job_name"] for j in json.loads((folder / layout.JOBS_JSON).read_text())["jobs"]
                if j["batch_sizes"] == [9])  # fmt: skip
    logs = runner.invoke(app, ["logs", job9, "--local", "--results", str(out)])
    assert logs.exit_code == 0, logs.output
    assert "usage: train.py" in logs.output and said in logs.output
