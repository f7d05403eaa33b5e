"""A built-in job counts its model's FLOPs once and logs them; ``num_workers`` (a hyperparameter or an axis)
feeds its real data through that many DataLoader worker processes, whose data wait the log then shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.container.conftest import QUICK
from tests.mnist_data import write_mnist
from trainsweep import axes
from trainsweep.instrument.flops import count_on_meta
from trainsweep.logs import mllog, parse
from trainsweep.training.models import MnistCNN

pytestmark = pytest.mark.slow


def _mnist(channel: Path) -> None:
    write_mnist(channel / "mnist.npz", train=256, test=64)


def test_each_cell_logs_its_flops_and_trains_through_its_loader_workers(run_job) -> None:
    settings = [{"num_workers": 0}, {"num_workers": 2}]
    names = ["w-0-local-cpu-32-e0", "w-2-local-cpu-32-e0"]
    hyper = {
        **QUICK,
        "synthetic": "false",
        "epochs": "2",
        "max-steps-per-epoch": "4",
        "batch-sizes": "32,32",
        "run-names": ",".join(names),
        "trainsweep-axes": json.dumps(settings),
    }
    res = run_job(hyper, channel=_mnist, timeout=600)
    assert res.returncode == 0, res.stderr
    assert [c["status"] for c in res.job_summary["cells"]] == ["ok", "ok"], res.job_summary
    per_sample = count_on_meta(MnistCNN, (1, 28, 28), 32).flops / 32
    for name, setting in zip(names, settings, strict=True):
        run = parse(res.log_path(name))
        assert run.status == "complete" and run.steps_total == 8
        assert run.extra[axes.LOG_KEY] == setting
        flops = run.extra[mllog.FLOPS]
        assert flops["per_sample"] == pytest.approx(per_sample) and flops["per_step"] == per_sample * 32
        assert (flops["precision"], flops["device"], flops["accelerators"]) == ("fp32", "cpu", 0)
        assert all(w > 0 for e in run.epochs for w in (e.data_wait_s or [])[1:])


def test_num_workers_with_synthetic_data_is_refused(run_job) -> None:
    res = run_job({**QUICK, "epochs": "1", "batch-size": "8", "num_workers": "2"})
    assert res.returncode != 0
    assert "num_workers" in (res.failure or "") and "synthetic=false" in (res.failure or "")
