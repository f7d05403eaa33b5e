"""``npx cdk synth`` with the pinned CLI: the real app, Lambda assets bundled locally (pip, no Docker)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.infra.synth_helpers import ROOT

LAMBDA_UNZIPPED_LIMIT = 262_144_000  # 250 MiB, code and layers unzipped


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def cloud_assembly() -> Path:
    npx = shutil.which("npx")
    assert npx, "Node.js (npx) is needed to run the pinned CDK CLI"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    if not (ROOT / "node_modules" / "aws-cdk").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, env=env, check=True, timeout=600)
    out = ROOT / "cdk.out"  # gitignored; reusing it skips re-bundling unchanged functions
    proc = subprocess.run(
        [npx, "cdk", "synth", "--quiet", "--output", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


@pytest.mark.slow
def test_the_pinned_cdk_cli_synthesizes_the_app(cloud_assembly):
    version = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert version == "2.1148.1"
    assert (cloud_assembly / "Trainsweep.template.json").is_file()


@pytest.mark.slow
def test_bundled_functions_fit_lambda_and_only_plotting_ones_carry_matplotlib(cloud_assembly):
    template = json.loads((cloud_assembly / "Trainsweep.template.json").read_text())
    sizes = {}
    for fn in template["Resources"].values():
        if fn["Type"] != "AWS::Lambda::Function" or "aws:asset:path" not in fn.get("Metadata", {}):
            continue
        name = fn["Properties"]["Environment"]["Variables"]["TRAINSWEEP_FUNCTION"]
        asset = cloud_assembly / fn["Metadata"]["aws:asset:path"]
        sizes[name] = _size(asset)
        assert (asset / "handler.py").is_file() and (asset / "trainsweep" / "layout.py").is_file()
        assert not (asset / "trainsweep" / "cli").exists() and not (asset / "trainsweep" / "local").exists()
        assert not (asset / "pandas").exists() and not (asset / "scipy").exists()
        built_here = [*(asset / "trainsweep").rglob("*.so"), *(asset / "trainsweep").rglob("*.c")]
        assert not built_here, built_here  # the C log scanner is for this machine's Python, not Lambda's
        assert (asset / "trainsweep" / "logs" / "native.py").is_file()
        assert (asset / "matplotlib").is_dir() == (name in ("parse_run", "aggregate_sweep")), name
        assert sizes[name] < LAMBDA_UNZIPPED_LIMIT, (name, sizes[name])
    assert sorted(sizes) == ["aggregate_sweep", "export_log", "parse_run", "plan_sweep"]
    print("asset sizes (MB):", {k: round(v / 1e6, 1) for k, v in sorted(sizes.items())})
