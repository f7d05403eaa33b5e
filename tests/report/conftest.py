"""Inputs for the sweep-report tests: the real FCN grid (from its seed outputs) and synthetic runs."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from trainsweep.logs.model import Epoch, RunHeader, RunTimings

FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"


def run_from_seed_json(path: Path) -> RunTimings:
    """A run rebuilt from an original ``execution-times/<VMTYPE>/<BS>/e<N>.json`` (same step timings)."""
    d = json.loads(path.read_text())
    epochs = []
    for key, e in d["epochs"].items():
        steps = list(e["steps"].values())
        epochs.append(
            Epoch(
                int(key),
                array("d", steps),
                array("l", range(1, len(steps) + 1)),
                validation_s=e.get("validation_time"),
                epoch_s=e.get("epoch_time"),
            )
        )
    vm, bs, n = path.parts[-3], int(path.parts[-2]), int(path.stem[1:])
    return RunTimings(
        name=f"result-{vm}-{bs}-e{n}",
        computing_system=vm,
        batch_size=bs,
        run_index=n,
        epochs=epochs,
        init_s=d["init"],
        header=RunHeader(epochs=len(epochs)),
    )


@pytest.fixture(scope="session")
def fcn_runs(real_data) -> list[RunTimings]:
    """The 72 runs of the FCN sweep (6 instance types x 4 batch sizes x 3 runs)."""
    paths = sorted((real_data / FCN / "execution-times").glob("*/*/e*.json"))
    return [run_from_seed_json(p) for p in paths]


def _ddp_run(
    name: str, vm: str, bs: int, *, waits: list[float], compute: float, steps: int = 30
) -> RunTimings:
    """A run whose ranks each wait ``waits[rank]`` s for data and compute ``compute`` s per step."""
    ranks = {}
    for rank, w in enumerate(waits):
        eps = []
        for i in (1, 2):
            wait = array("d", [w] * steps)
            comp = array("d", [compute] * steps)
            if i == 1:
                comp[0] = 10 * compute  # warm-up
            step = array("d", [a + b for a, b in zip(wait, comp, strict=True)])
            eps.append(Epoch(i, step, array("l", range(1, steps + 1)), wait, comp, epoch_s=sum(step)))
        ranks[rank] = eps
    return RunTimings(name=name, computing_system=vm, batch_size=bs, epochs=ranks[0], ranks=ranks)


@pytest.fixture
def ddp_run():
    """Factory: ``ddp_run(name, vmtype, batch_size, waits=[per-rank wait s], compute=s)``."""
    return _ddp_run
