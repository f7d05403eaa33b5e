"""The synthesized state machine, executed in moto: one synth per session, a fresh moto per sweep."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sweep_harness import RETRY_CONTEXT, moto_sweeps


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from synth_helpers import synth

    return synth(tmp_path_factory.mktemp("cdk-sm"), {"retry": RETRY_CONTEXT}, nag=False)


@pytest.fixture
def deploy(template: dict[str, Any]) -> Iterator[Any]:
    """``deploy({batch_size: outcome})`` -> a :class:`Sweep` in a fresh moto."""
    with moto_sweeps(template) as make:
        yield make
