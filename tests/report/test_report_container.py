"""Real container logs (PyTorch on CPU, synthetic MNIST) through the parser into the sweep report:
the data-wait split the container measures reaches the table, the stall section and the breakdown plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainsweep import layout
from trainsweep.logs import parse
from trainsweep.report import sweep_artefacts

pytestmark = pytest.mark.slow
ENTRY_POINT = Path(__file__).resolve().parents[2] / "container" / "train.py"
RUNS = ["demo-local-cpu-32-e0", "demo-local-cpu-64-e0"]


@pytest.fixture(scope="module")
def container_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("job")
    (base / "input" / "config").mkdir(parents=True)
    hyper = {
        "workload": "mnist-cnn",
        "synthetic": "true",
        "epochs": "2",
        "max-steps-per-epoch": "12",
        "max-eval-batches": "2",
        "batch-sizes": "32,64",
        "run-names": ",".join(RUNS),
    }
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyper))
    env = {
        **os.environ,
        "SAGEMAKER_BASE_DIR": str(base),
        "TRAINING_JOB_NAME": "demo",
        "CUDA_VISIBLE_DEVICES": "",
    }
    env["OMP_NUM_THREADS"] = "1"
    p = subprocess.run(
        [sys.executable, str(ENTRY_POINT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return [parse(base / "output" / "data" / "logs" / f"{name}.log") for name in RUNS]


def test_container_runs_give_a_report_with_data_wait_figures(container_runs):
    arts = sweep_artefacts(container_runs, spec={"name": "demo", "workload": {"epochs": 2}})
    doc = json.loads(arts[layout.SWEEP_JSON])
    rows = {c["batch_size"]: c for c in doc["configurations"]}
    assert set(rows) == {32, 64}
    for c in rows.values():
        assert c["instance_type"] == "local" and c["status"] == "ok"
        assert 0.0 <= c["data_wait_share"] < 1.0
        assert c["utilisation"] == pytest.approx(1 - c["data_wait_share"])
        assert c["usd_per_hour"] == 0.0 and c["cost_to_train_usd"] == 0.0
    assert layout.plot_path("step-breakdown") in arts
    assert b"Loading aligned" in arts[layout.REPORT_HTML]
