"""A script's output through the real supervisor: its own words in every failure, its whole output kept,
its metrics read from its lines (SageMaker's MetricDefinitions), and misbehaving processes contained.

The jobs are planned by ``plan_sweep`` from a script spec, the source dir is served by a moto S3 server,
and ``container/train.py`` runs as a process, as in ``test_script_mode``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trainsweep.logs import mllog, parse
from trainsweep.sagemaker_contract import Paths
from trainsweep.sourcedir import pack
from trainsweep.spec import plan_sweep
from trainsweep.training import contract, launch
from trainsweep.training.config import Cell
from trainsweep.training.supervisor import Supervisor

from .conftest import BUCKET, JobResult, S3Server, write_source

pytestmark = pytest.mark.slow

LOOP = """
import argparse, sys
import torch
from torch.utils.data import DataLoader, TensorDataset
ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int)
ap.add_argument("--epochs", type=int)
ap.add_argument("--use-optimizer", action="store_true")
args = ap.parse_args()
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def train_epoch():
    for x, y in DataLoader(data, batch_size=args.batch_size):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def _hyperparameters(s3: S3Server, root: Path, workload: dict[str, Any], batch_sizes: list[int],
                     **spec: Any) -> dict[str, str]:  # fmt: skip
    """The packed job's hyperparameters as PlanSweep writes them, with the packed source uploaded."""
    packed = pack(root)
    key = f"sweeps/s-test/code/sourcedir-{packed.digest}.tar.gz"
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=packed.data)  # type: ignore[attr-defined]
    doc = {
        "name": "s",
        "workload": {"source_dir": f"s3://{BUCKET}/{key}", **workload},
        "instance_types": ["ml.m5.xlarge"],
        "batch_sizes": batch_sizes,
        "packing": "per-instance",
        **spec,
    }
    return dict(plan_sweep(doc, sweep_id="s-test").to_dict()["jobs"][0]["hyperparameters"])


def _cells(result: JobResult) -> dict[int, dict[str, Any]]:
    return {c["batch_size"]: c for c in result.job_summary["cells"]}


def _job(run_job: Any, s3: Any, tmp_path: Path, script: str, workload: dict[str, Any] | None = None,
         batch_sizes: list[int] | None = None, **spec: Any) -> tuple[JobResult, list[str]]:  # fmt: skip
    root = write_source(tmp_path, {"train.py": script})
    work = {"entry_point": "train.py", "epochs": 1, **(workload or {})}
    hyper = _hyperparameters(s3, root, work, batch_sizes or [8], **spec)
    result = run_job(hyper, env=s3.env(), timeout=120)
    return result, hyper["trainsweep-run-names"].split(",")


def test_an_argparse_error_is_in_the_reason_the_failure_file_and_the_log(run_job, s3_server, tmp_path):
    script = LOOP + "train_epoch()\n"
    result, (run,) = _job(run_job, s3_server, tmp_path, script, {"hyperparameters": {"lr": 0.1}})

    assert result.returncode != 0
    reason = _cells(result)[8]["reason"]
    assert "the script exited with code 2 before its first training step" in reason
    assert "unrecognized arguments: --lr 0.1" in reason
    assert "unrecognized arguments: --lr 0.1" in (result.failure or "")
    parsed = parse(result.log_path(run))
    assert "unrecognized arguments: --lr 0.1" in (parsed.failure_reason or "")
    # the whole output is kept, and passed through to the job's own stderr (CloudWatch)
    kept = contract.cell_output_path(result.base / "output", run).read_text()
    assert "usage: train.py" in kept and "unrecognized arguments: --lr 0.1" in kept
    assert "unrecognized arguments: --lr 0.1" in result.stderr


def test_an_exception_gives_its_last_frame(run_job, s3_server, tmp_path):
    script = LOOP + "def configure(a):\n    assert not a.startswith('--')\ntrain_epoch()\nconfigure('--x')\n"
    result, _ = _job(run_job, s3_server, tmp_path, script)

    reason = _cells(result)[8]["reason"]
    assert reason.startswith("AssertionError")
    assert "train.py:" in reason and "in configure: assert not a.startswith('--')" in reason


def test_a_script_that_reads_stdin_fails_at_once_and_the_next_cell_goes_on(run_job, s3_server, tmp_path):
    script = LOOP + "if args.batch_size == 8:\n    input('continue? ')\ntrain_epoch()\n"
    t0 = time.monotonic()
    result, _ = _job(run_job, s3_server, tmp_path, script, batch_sizes=[8, 16])

    assert time.monotonic() - t0 < 100
    cells = _cells(result)
    assert cells[8]["status"] == "error"
    assert "EOFError" in cells[8]["reason"] and "input('continue? ')" in cells[8]["reason"]
    assert cells[16]["status"] == "ok"


def test_workers_that_outlive_the_script_are_stopped_with_its_cell(run_job, s3_server, tmp_path):
    marker = tmp_path / "orphans"
    orphan = f"import os, time; open({str(marker)!r} + str(os.getpid()), 'w').close(); time.sleep(600)"
    script = LOOP + (
        "import glob, subprocess, time\n"
        f"subprocess.Popen([sys.executable, '-c', {orphan!r}])\n"
        "train_epoch()\n"
        f"while len(glob.glob({str(marker)!r} + '*')) < (1 if args.batch_size == 8 else 2):\n"
        "    time.sleep(0.05)\n"
    )
    t0 = time.monotonic()
    result, _ = _job(run_job, s3_server, tmp_path, script, batch_sizes=[8, 16])

    assert time.monotonic() - t0 < 100  # no cell waited for its orphan's ten minutes
    cells = _cells(result)
    assert [cells[b]["status"] for b in (8, 16)] == ["ok", "ok"], cells
    assert any("outlived it" in f for f in cells[8]["flags"])
    pids = [int(p.name[len(marker.name) :]) for p in tmp_path.glob(marker.name + "*")]
    assert len(pids) == 2
    for pid in pids:  # both stopped
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


EPOCHS = """
for epoch in range(args.epochs):
    train_epoch()
    print(f"epoch {epoch} val_acc: {0.5 + 0.2 * epoch:.2f} val loss {2.0 - 0.5 * epoch:.2f}", flush=True)
"""
METRICS = [
    {"name": "val_acc", "regex": r"val_acc: ([0-9.]+)"},
    {"name": "val_loss", "regex": r"val loss ([0-9.]+)"},
]


def test_metric_lines_become_the_runs_evaluations(run_job, s3_server, tmp_path):
    workload = {"epochs": 3, "metric_definitions": METRICS}
    result, (run,) = _job(run_job, s3_server, tmp_path, LOOP + EPOCHS, workload)

    assert result.returncode == 0, result.stderr
    parsed = parse(result.log_path(run))
    assert [e.validation_accuracy for e in parsed.epochs] == [0.5, 0.7, 0.9]
    assert parsed.extra[mllog.METRIC_SERIES]["val_loss"] == {"1": 2.0, "2": 1.5, "3": 1.0}


def test_a_loss_target_ends_the_cell_at_the_first_epoch_below_it(run_job, s3_server, tmp_path):
    workload = {"epochs": 20, "metric_definitions": METRICS}
    target = {"metric": "val_loss", "value": 1.6}
    result, (run,) = _job(run_job, s3_server, tmp_path, LOOP + EPOCHS, workload, target=target)

    assert result.returncode == 0, result.stderr
    (cell,) = _cells(result).values()
    assert cell["status"] == "ok"
    parsed = parse(result.log_path(run))
    assert parsed.status == "complete", parsed.problems
    assert len(parsed.epochs) == 2 and parsed.epochs[-1].epoch_s is not None
    reached = parsed.extra[mllog.TARGET_REACHED]
    assert reached == {"metric": "val_loss", "target": 1.6, "value": 1.5, "epoch": 2}


def test_a_metric_that_never_matches_is_said(run_job, s3_server, tmp_path):
    metrics = [*METRICS, {"name": "val_f1", "regex": r"f1=([0-9.]+)"}]
    result, (run,) = _job(run_job, s3_server, tmp_path, LOOP + EPOCHS, {"metric_definitions": metrics})

    (cell,) = _cells(result).values()
    assert cell["status"] == "ok"
    assert any("metric val_f1 never matched the output" in f for f in cell["flags"])
    unmatched = parse(result.log_path(run)).extra[mllog.METRIC_UNMATCHED]
    assert unmatched == [{"metric": "val_f1", "regex": "f1=([0-9.]+)"}]


# ---- the supervisor's process handling, through run_cell --------------------------------------------


def _supervisor(tmp_path: Path) -> Supervisor:
    paths = Paths(tmp_path / "ml")
    for d in (paths.output / "data", paths.logs):
        d.mkdir(parents=True, exist_ok=True)
    return Supervisor(paths)


def test_a_command_that_is_not_found_fails_its_cell_with_the_systems_words(tmp_path):
    sup = _supervisor(tmp_path)
    res = sup.run_cell(Cell("r1", 8), launch.Launch(["no-such-trainer-command", "--batch_size=8"]))
    assert res.status == "error"
    assert res.reason == "cannot start 'no-such-trainer-command': No such file or directory"
    assert "No such file or directory" in parse(sup.paths.log_file("r1")).failure_reason


def test_a_launcher_that_exits_0_while_a_rank_failed_fails_the_cell(tmp_path):
    sup = _supervisor(tmp_path)
    log = sup.paths.log_file("r1")
    status = contract.cell_status_path(sup.paths.output, "r1")
    failure = mllog.format_line(mllog.FAILURE, {"reason": "ValueError: bad shard", "kind": "error"},
                                metadata={"rank": 1, "epoch_num": 0})  # fmt: skip
    rank0 = {"run_name": "r1", "batch_size": 8, "status": "ok", "reason": None, "prediction": None}
    code = (
        f"import json, pathlib; pathlib.Path({str(log)!r}).write_text({failure!r} + '\\n'); "
        f"p = pathlib.Path({str(status)!r}); p.parent.mkdir(parents=True, exist_ok=True); "
        f"p.write_text(json.dumps({rank0!r}))"
    )
    res = sup.run_cell(Cell("r1", 8), launch.Launch([sys.executable, "-c", code]))
    assert res.exit_code == 0
    assert res.status == "error"
    assert res.reason == "rank 1 failed: ValueError: bad shard"
    assert json.loads(status.read_text())["status"] == "ok"  # the launcher's word, overruled


def test_a_launcher_that_fails_without_rank_0s_word_gives_the_failed_ranks_reason(tmp_path):
    sup = _supervisor(tmp_path)
    failure = mllog.format_line(mllog.FAILURE, {"reason": "ValueError: bad shard", "kind": "error"},
                                metadata={"rank": 1, "epoch_num": 0})  # fmt: skip
    log = sup.paths.log_file("r1")
    code = f"import pathlib, sys; pathlib.Path({str(log)!r}).write_text({failure!r}); sys.exit(1)"
    res = sup.run_cell(Cell("r1", 8), launch.Launch([sys.executable, "-c", code]))
    assert res.reason == "rank 1 failed: ValueError: bad shard (training worker exited with code 1)"
