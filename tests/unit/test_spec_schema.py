"""The JSON Schema shipped for editors and the state machine is the one the model generates."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from trainsweep import instances
from trainsweep.spec import SCHEMA_FILE, json_schema, schema_text, shipped_schema

SHIPPED = Path(__file__).resolve().parents[2] / "trainsweep" / "data" / SCHEMA_FILE


def test_shipped_schema_is_up_to_date_with_the_model() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == schema_text(), (
        "trainsweep/data/sweep-spec.schema.json is stale: regenerate it with "
        "`trainsweep schema --out trainsweep/data/sweep-spec.schema.json`"
    )


def test_shipped_schema_is_what_the_package_loads() -> None:
    assert shipped_schema() == json.loads(SHIPPED.read_text(encoding="utf-8"))


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json_schema())


def test_schema_forbids_unknown_fields_and_lists_instance_types_for_editors() -> None:
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["instance_types"]["items"]["enum"] == sorted(instances.CATALOGUE)
    assert set(schema["required"]) == {"name", "workload", "instance_types", "batch_sizes"}
    assert schema["properties"]["max_runtime_seconds"]["default"] == 3600
