"""The synthesized state machine, executed in moto: one synth per session, a fresh moto per sweep."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.statemachine.sweep_harness import RETRY_CONTEXT, moto_sweeps


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.infra.synth_helpers import synth

    return synth(tmp_path_factory.mktemp("cdk-sm"), {"retry": RETRY_CONTEXT}, nag=False)


@pytest.fixture
def deploy(template: dict[str, Any]) -> Iterator[Any]:
    """``deploy({batch_size: outcome})`` -> a :class:`Sweep` in a fresh moto."""
    with moto_sweeps(template) as make:
        yield make
