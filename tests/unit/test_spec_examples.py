"""The shipped example specs validate, fit their budgets and state their true worst-case cost."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from trainsweep import hyperparameters as hp
from trainsweep.spec import load_spec, plan_sweep, shipped_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = [
    *sorted(EXAMPLES.glob("*.yaml")),
    *sorted(EXAMPLES.glob("*.json")),
    *sorted(EXAMPLES.glob("byo-*/*.yaml")),
]
COST_LINE = re.compile(r"^# (Worst-case cost: .*)$", re.MULTILINE)


@pytest.fixture(autouse=True)
def _shipped_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The comments quote the shipped catalogue, not a user's refreshed cache."""
    monkeypatch.setenv("TRAINSWEEP_CACHE_DIR", str(tmp_path / "cache"))


def test_there_are_a_quickstart_and_cloud_examples() -> None:
    names = {p.name for p in SPECS}
    assert "quickstart.yaml" in names
    assert len(names) >= 3


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_validates_against_the_shipped_schema(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), shipped_schema())
    load_spec(path)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_comment_states_the_planners_worst_case(path: Path) -> None:
    lines = COST_LINE.findall(path.read_text())
    assert len(lines) == 1, f"{path.name} needs exactly one '# Worst-case cost: ...' comment line"
    plan = plan_sweep(path)  # also: within its own budget_usd, else this raises
    assert lines[0] == plan.summary_line(), f"{path.name}: update the comment to '# {plan.summary_line()}'"


def test_quickstart_is_a_small_synthetic_local_sweep() -> None:
    spec = load_spec(EXAMPLES / "quickstart.yaml")
    assert spec.is_local
    assert spec.workload.synthetic
    assert 2 <= len(spec.batch_sizes) <= 3
    # one small epoch of the same size for every batch size, so the report compares like with like
    assert int(spec.workload.hyperparameters[hp.SYNTHETIC_SAMPLES]) <= 4096
    assert hp.MAX_STEPS_PER_EPOCH not in spec.workload.hyperparameters


@pytest.mark.parametrize("model", ["mnist-cnn", "resnet50-cifar10"])
def test_cloud_examples_cover_both_workloads_on_the_seed_grid(model: str) -> None:
    specs = [load_spec(p) for p in SPECS]
    cloud = [s for s in specs if not s.is_local and s.workload.model == model]
    assert cloud, f"no cloud example for {model}"
    for spec in cloud:
        assert set(spec.batch_sizes) == {256, 512, 1024, 2048}
        families = {t.split(".")[1] for t in spec.instance_types}
        assert families & {"p2", "p3", "g4dn"}
        assert spec.budget_usd is not None
