"""Synthesising the stack in tests (asset bundling skipped) and reading its template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def image_directory(tmp: Path) -> Path | None:
    """The repository (real ``container/Dockerfile``) when it exists, else a stand-in build context.

    test_stack.py::test_the_training_image_is_built_from_the_container_folder fails while the real
    Dockerfile is missing, so the stand-in never hides it.
    """
    if (ROOT / "container" / "Dockerfile").is_file():
        return None
    ctx = tmp / "image-context"
    (ctx / "container").mkdir(parents=True, exist_ok=True)
    (ctx / "container" / "Dockerfile").write_text("FROM public.ecr.aws/docker/library/python:3.12-slim\n")
    return ctx


def synth(tmp: Path, context: dict[str, Any] | None = None, *, nag: bool = True) -> dict[str, Any]:
    """Synthesise the trainsweep stack into ``tmp`` and return its template."""
    from aws_cdk import App

    from infra.app import build

    app = App(context={"aws:cdk:bundling-stacks": [], **(context or {})}, outdir=str(tmp))
    stack = build(app, nag=nag, image_directory=image_directory(tmp))
    assembly = app.synth()
    return json.loads(Path(assembly.directory, stack.template_file).read_text())


def resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def statements(template: dict[str, Any], policy_id_prefix: str) -> list[dict[str, Any]]:
    """All statements of the IAM policies whose logical id starts with ``policy_id_prefix``."""
    out: list[dict[str, Any]] = []
    for lid, res in resources(template, "AWS::IAM::Policy").items():
        if lid.startswith(policy_id_prefix):
            out += res["Properties"]["PolicyDocument"]["Statement"]
    return out


def as_list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else [x]


def states_by_name(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state of a state machine definition by name, Map item processors included."""
    out: dict[str, dict[str, Any]] = {}

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            out[name] = state
            for key in ("ItemProcessor", "Iterator"):
                if key in state:
                    walk(state[key]["States"])

    walk(definition["States"])
    return out
