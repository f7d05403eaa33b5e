"""The README's example spec is a valid spec that plans within its own budget, at the cost it states."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from trainsweep.spec import load_spec, plan_sweep


def test_the_readme_spec_plans_within_its_budget_at_the_stated_worst_case():
    text = (ROOT / "README.md").read_text()
    yaml_block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    plan = plan_sweep(load_spec(yaml_block))  # raises if over budget
    stated = re.search(r"worst case \(([0-9.]+) USD here\)", yaml_block).group(1)  # type: ignore[union-attr]
    assert plan.worst_case_cost_usd == float(stated)
