"""One list of workloads (trainsweep.workloads): spec, container config, datasets and models agree."""

from __future__ import annotations

import pytest

from trainsweep import spec, workloads
from trainsweep.training import config, data, models


def test_every_workload_has_its_dataset_and_a_model() -> None:
    assert set(data.DATASETS) == set(workloads.WORKLOADS) == set(models.MODELS)
    for name, dataset in workloads.WORKLOADS.items():
        assert data.DATASETS[name].name == dataset
    assert config.WORKLOADS == workloads.NAMES


def test_the_spec_accepts_exactly_these_models() -> None:
    model = spec.Workload.model_json_schema()["properties"]["model"]
    enums = [b["enum"] for b in model["anyOf"] if "enum" in b]  # the field is optional: a script needs none
    assert enums == [list(workloads.NAMES)]
    for name, dataset in workloads.WORKLOADS.items():
        assert spec.Workload(model=name).dataset in (None, dataset)
    with pytest.raises(ValueError, match="model"):
        spec.Workload(model="gpt-5")
    with pytest.raises(ValueError, match="unknown workload"):
        models.build_model("gpt-5")
