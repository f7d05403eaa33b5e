"""Synthesis for local mode: the CDK app runs once per source state, and the cache stays small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainsweep.errors import LocalModeError
from trainsweep.local import deploy

FAKE_APP = """
import json, os, pathlib
out = pathlib.Path(os.environ["CDK_OUTDIR"])
out.mkdir(parents=True, exist_ok=True)
runs = pathlib.Path(__file__).with_name("runs.txt")
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
assert "CDK_DEFAULT_ACCOUNT" not in os.environ  # environment-agnostic, like `cdk synth` without credentials
ctx = json.loads(os.environ["CDK_CONTEXT_JSON"])
(out / "manifest.json").write_text(json.dumps({"artifacts": {"S": {"type": "aws:cloudformation:stack",
    "properties": {"templateFile": "S.template.json"}}}, "bundling": ctx}))
(out / "S.template.json").write_text(json.dumps({"Resources": {}}))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    (root / "infra").mkdir(parents=True)
    (root / "app.py").write_text(FAKE_APP)
    (root / "infra" / "stack.py").write_text("# v1\n")
    monkeypatch.setenv(deploy.SYNTH_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "111111111111")
    return root


def test_synth_runs_once_per_source_state_and_skips_bundling(project: Path) -> None:
    first = deploy.synthesize(project)
    second = deploy.synthesize(project)
    assert first == second
    assert (project / "runs.txt").read_text() == "x"
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["bundling"] == {"aws:cdk:bundling-stacks": []}
    (project / "infra" / "stack.py").write_text("# v2\n")
    assert deploy.synthesize(project) != first
    assert (project / "runs.txt").read_text() == "xx"
    assert [s.name for s in deploy.read_stacks(first)] == ["S"]


def test_the_cache_keeps_only_the_newest_assemblies(project: Path, tmp_path: Path) -> None:
    for i in range(deploy.SYNTH_CACHE_KEEP + 2):
        (project / "infra" / "stack.py").write_text(f"# v{i}\n")
        deploy.synthesize(project)
    assert len(list((tmp_path / "cache").iterdir())) == deploy.SYNTH_CACHE_KEEP


def test_a_failing_app_is_a_local_mode_error_with_its_output(project: Path) -> None:
    (project / "app.py").write_text("raise SystemExit('the training image needs container/Dockerfile')\n")
    with pytest.raises(LocalModeError, match="container/Dockerfile"):
        deploy.synthesize(project)
