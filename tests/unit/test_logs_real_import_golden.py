"""``trainsweep import`` on the real data writes the seed-format outputs
(``execution-times/<VMTYPE>/<BS>/eN.json`` and ``eN.summary``) byte for byte: their SHA-256 are
``golden/real-data-seed-outputs.sha256``, written from an import of ``../shared/fixtures/real-data``
(``sha256sum`` of those files, paths relative to the output folder, sorted). However the log readers are
arranged, these bytes stay."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainsweep.cli import app

GOLDEN = Path(__file__).parent / "golden" / "real-data-seed-outputs.sha256"


def _seed_outputs(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in out.rglob("e*.*")
        if "execution-times" in p.parts and p.suffix in (".json", ".summary")
    }


@pytest.mark.slow
def test_importing_the_real_data_writes_the_golden_seed_outputs(real_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["import", str(real_data), "--out", str(out), "--no-report", "--workers", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    pairs = (line.split("  ", 1) for line in GOLDEN.read_text().splitlines())
    golden = {path: digest for digest, path in pairs}
    written = _seed_outputs(out)
    assert sorted(written) == sorted(golden)
    assert [path for path, digest in golden.items() if written[path] != digest] == []
