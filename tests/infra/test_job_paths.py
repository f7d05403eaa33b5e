"""The state machine reads the planned job by its fields: every ``$.job.<field>`` path in the synthesized
definition names a field of ``PlannedJob``, and the training task reads all that CreateTrainingJob takes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.infra.synth_helpers import resources
from trainsweep.jobs import FIELDS, job_path

# A path into the job: ``$.job.<field>``, whole or inside an intrinsic (``States.Format(.., $.job.x)``).
_JOB_FIELD = re.compile(r"\$\.job\.([A-Za-z0-9_]+)")


def _definition_text(template: dict[str, Any]) -> str:
    sm = next(iter(resources(template, "AWS::StepFunctions::StateMachine").values()))
    parts = sm["Properties"]["DefinitionString"]["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else "TOKEN" for p in parts)  # tokens lie inside strings


def _strings(value: Any) -> list[str]:
    """Every string of a JSON document, keys and values (nested state graphs are JSON text too)."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def job_fields_read(definition: dict[str, Any]) -> set[str]:
    return {m for s in _strings(definition) for m in _JOB_FIELD.findall(s)}


def test_every_job_path_of_the_definition_names_a_field_of_the_planned_job(template):
    read = job_fields_read(json.loads(_definition_text(template)))
    unknown = read - set(FIELDS)
    assert not unknown, f"the definition reads job fields PlannedJob does not have: {sorted(unknown)}"
    # what the training task, the routing and the failure record read
    assert read >= {
        "job_name", "image_uri", "hyperparameters", "output_s3_uri", "instance_type", "instance_count",
        "max_runtime_seconds", "keep_alive_seconds", "max_wait_seconds", "checkpoint_s3_uri",
        "data_s3_uri", "spot",
    }  # fmt: skip


def test_a_path_to_a_field_the_job_lacks_is_found(template):
    definition = json.loads(_definition_text(template).replace("$.job.instance_type", "$.job.instance_typo"))
    assert job_fields_read(definition) - set(FIELDS) == {"instance_typo"}


def test_a_job_path_is_built_only_for_a_field_of_the_record():
    assert job_path("instance_type") == "$.job.instance_type"
    with pytest.raises(KeyError, match="'instance_typo' is not a field of PlannedJob"):
        job_path("instance_typo")
