"""One synthesis of the stack per test session (synth is slow, and no test changes the template it
returns); asset bundling skipped in unit tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from tests.infra.synth_helpers import synth


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return synth(tmp_path_factory.mktemp("cdk"))


@pytest.fixture(scope="session")
def template_file(template: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tpl") / "template.json"
    path.write_text(json.dumps(template))
    return path
