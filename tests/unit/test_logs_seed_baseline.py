"""The benchmark's baseline (benchmarks/seed_parse_baseline.py) really is a working seed-style parser:
on a real log it reproduces the reference output's steps, so the throughput ratio compares like with like."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FCN = (
    ROOT.parent
    / "shared/fixtures/real-data/cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
)


def _baseline():
    spec = importlib.util.spec_from_file_location(
        "seed_parse_baseline", ROOT / "benchmarks/seed_parse_baseline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_baseline_reproduces_the_reference_steps_and_epoch_times(real_data: Path) -> None:
    ref = json.loads((FCN / "execution-times/p2-1/256/e1.json").read_text())
    with (FCN / "logs/result-p2-1-256-e1.txt").open(encoding="utf-8", errors="replace") as f:
        out = _baseline().parse_lines(f)
    assert {k: e["steps"] for k, e in out["epochs"].items()} == {
        k: e["steps"] for k, e in ref["epochs"].items()
    }
    assert [e["epoch_time"] for e in out["epochs"].values()] == [
        e["epoch_time"] for e in ref["epochs"].values()
    ]
    assert out["init"] == ref["init"] and out["total_training"] == ref["total_training"]
