"""``trainsweep simulate --race``: the racing strategy replayed stage by stage, through the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.cost.billing import FIXED_OVERHEAD_S, cost_usd
from trainsweep.cost.prices import hourly_usd
from trainsweep.race import RaceRule

FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"
G4, P3, P38 = "ml.g4dn.xlarge", "ml.p3.2xlarge", "ml.p3.8xlarge"


def _log(step_s: float, seed: int, *, noise: float, epochs: int = 4, steps: int = 300) -> str:
    """A seed-style (cloud-ML) log of ``epochs`` epochs of ``steps`` steps of about ``step_s`` seconds."""
    rng = random.Random(seed)
    lines = ["Initialization time 0.5"]
    for e in range(1, epochs + 1):
        lines.append(f"Epoch {e}/{epochs}")
        st = [step_s * (1 + rng.gauss(0.0, noise)) for _ in range(steps)]
        if e == 1:
            st[0] = 20 * step_s
        lines += [f"{i} step training time: {s:.6f}s" for i, s in enumerate(st, 1)]
        lines += ["Validation time: 1.0s", f"Epoch time: {sum(st) + 1.0:.6f}s"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def grid(tmp_path: Path) -> tuple[Path, Path]:
    """ml.g4dn.xlarge and ml.p3.2xlarge close in cost per run, and noisy; ml.p3.8xlarge slower than
    ml.p3.2xlarge and four times dearer: out of the race after one look."""
    step = {G4: 0.20, P3: 0.040, P38: 0.10}
    vm = {G4: "g4dn-1", P3: "p3-1", P38: "p3-4"}
    logs = tmp_path / "logs"
    logs.mkdir()
    for k, (itype, s) in enumerate(step.items()):
        for rep in range(2):
            noise = 0.01 if itype == P38 else 0.25
            (logs / f"result-{vm[itype]}-256-e{rep + 1}.txt").write_text(_log(s, 10 * k + rep, noise=noise))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "race", "workload": {"model": "mnist-cnn", "epochs": 4}, "instance_types": [G4, P3, P38],
        "batch_sizes": [256], "repetitions": 1, "max_concurrency": 3,
    }))  # fmt: skip
    return spec, logs


def _race(spec: Path, logs: Path) -> dict:
    result = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs), "--race", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_race_drops_what_its_intervals_rule_out_and_watches_the_contenders_longer(grid):
    out = _race(*grid)
    stages = out["strategy"]["stages"]
    assert out["strategy"]["mode"] == "race"
    assert stages[0]["configurations_watched"] == 3 and stages[0]["steps"] == RaceRule().first_steps
    dropped = [d for st in stages for d in st["dropped"]]
    assert dropped == [f"{P38} x 256"]
    later = [st for st in stages if st["stage"] > 0 and st["configurations_watched"]]
    assert later, stages  # the two close, noisy ones are looked at again
    assert out["strategy"]["finalists"] == [f"{G4} x 256", f"{P3} x 256"]
    assert out["picks"]["fastest"]["instance_type"] == P3


def test_each_stage_says_what_it_cost_and_the_stages_add_up_to_the_bill(grid):
    out = _race(*grid)
    s = out["strategy"]
    assert sum(st["cost_usd"] for st in s["stages"]) == pytest.approx(s["cost_usd"])
    start_up = sum(cost_usd(FIXED_OVERHEAD_S, hourly_usd(t) or 0.0) for t in (G4, P3, P38))
    assert s["stages"][0]["cost_usd"] > start_up  # the jobs' start-up, and every first look
    assert all(st["cost_usd"] > 0 for st in s["stages"] if st["configurations_watched"])
    assert out["cost_ratio"] < 1


def test_the_race_prices_its_stages_with_the_specs_prices(grid):
    spec, logs = grid
    data = yaml.safe_load(spec.read_text())
    prices = {G4: 0.25, P3: 9.0, P38: 20.0}
    data["prices"] = prices
    spec.write_text(yaml.safe_dump(data))
    s = _race(spec, logs)["strategy"]
    start_up = sum(cost_usd(FIXED_OVERHEAD_S, p) for p in prices.values())
    assert s["start_up_usd"] == pytest.approx(start_up)
    assert s["unpriced_instance_types"] == []


def test_the_text_output_shows_the_stages(grid):
    spec, logs = grid
    result = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs), "--race"])
    assert result.exit_code == 0, result.output
    assert "Race stage 0 (up to 24 steps each): watched 3" in result.output
    assert f"Dropped: {P38} x 256" in result.output


def test_the_race_refuses_a_target_it_cannot_reach(grid, tmp_path):
    spec, logs = grid
    data = yaml.safe_load(spec.read_text())
    data.update(mode="full", target={"metric": "eval_accuracy", "value": 0.9})
    spec.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["simulate", str(spec), "--from", str(logs), "--race"])
    assert result.exit_code == 1
    assert "never evaluates" in result.output


def test_on_the_fcn_grid_the_race_picks_within_the_repetition_spread(real_data, tmp_path):
    folder = real_data / FCN
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "fcn", "workload": {"model": "resnet50-cifar10", "epochs": 5},
        "instance_types": ["ml.p2.xlarge", "ml.p2.8xlarge", "ml.p2.16xlarge", P3, P38, "ml.p3.16xlarge"],
        "batch_sizes": [256, 512, 1024, 2048], "repetitions": 1, "max_concurrency": 4,
    }))  # fmt: skip
    out = _race(spec, folder)
    assert out["strategy"]["runs"] == 24 and out["strategy"]["stages"][0]["configurations_watched"] == 24
    assert out["cost_ratio"] <= 0.10
    spread = out["repetition_spread"]
    assert out["regret_time"] <= spread["time_of_true_fastest"]
    assert out["regret_cost"] <= spread["cost_of_true_cheapest"]
