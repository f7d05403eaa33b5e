"""CI's slice of the fuzz benchmark (benchmarks/fuzz_inputs.py): 2,000 mutated real inputs, same seed.

The full run (50,000 log snippets, 10,000 specs) is on demand: ``python benchmarks/fuzz_inputs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_inputs import run


@pytest.mark.slow
def test_2000_mutated_logs_and_specs_raise_nothing_and_chunking_never_changes_a_record(
    real_data: Path,
) -> None:
    out = run(n_logs=1_600, n_specs=400, seed=11)
    assert (out.logs, out.specs) == (1_600, 400)
    assert out.uncaught == [], out.uncaught[:3]
    assert out.chunk_dependent == [], out.chunk_dependent[:3]
    assert out.spec_uncaught == [], out.spec_uncaught[:3]
    assert 0 < out.refused_specs < out.specs  # the mutations reach both the refusals and the plans
