"""The Lambda bundles hold exactly their locks, and the asset hashes name what is deployed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import functions
from infra.functions import BundleMismatchError, build_asset, installed_packages, locked_packages

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "lambdas").glob("*/handler.py"))
PROJECT_LOCK = ROOT / "requirements.lock"


@pytest.mark.slow
def test_a_built_bundle_holds_exactly_the_packages_of_its_lock(tmp_path):
    # parse_run carries matplotlib, whose unpinned `packaging` once resolved past the project's pin.
    build_asset("parse_run", tmp_path)
    installed = installed_packages(tmp_path)
    assert installed == locked_packages(ROOT / "lambdas" / "parse_run" / "requirements.lock")
    assert installed["packaging"] == locked_packages(PROJECT_LOCK)["packaging"]
    assert (tmp_path / "handler.py").is_file()
    assert (tmp_path / "trainsweep" / "layout.py").is_file()


def test_a_bundle_whose_installed_packages_differ_from_its_lock_is_refused(tmp_path, monkeypatch):
    lock = tmp_path / "requirements.lock"
    lock.write_text("six==1.17.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")

    def pip_that_installs_another_version(cmd, check):
        target = Path(cmd[cmd.index("--target") + 1])
        meta = target / "six-1.16.0.dist-info" / "METADATA"
        meta.parent.mkdir(parents=True)
        meta.write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")

    monkeypatch.setattr(functions.subprocess, "run", pip_that_installs_another_version)
    with pytest.raises(BundleMismatchError, match=r"\('six', '1.16.0'\), \('six', '1.17.0'\)"):
        functions.install_locked(lock, tmp_path / "asset")


def test_a_function_with_requirements_but_no_lock_is_not_built(tmp_path, monkeypatch):
    lambdas = tmp_path / "lambdas"
    shutil.copytree(ROOT / "lambdas" / "plan_sweep", lambdas / "plan_sweep")
    (lambdas / "plan_sweep" / "requirements.lock").unlink()
    monkeypatch.setattr(functions, "LAMBDAS", lambdas)
    with pytest.raises(FileNotFoundError, match="run scripts/lock"):
        build_asset("plan_sweep", tmp_path / "asset")


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_has_a_lock_that_agrees_with_the_project_lock(name):
    project = locked_packages(PROJECT_LOCK)
    lock = locked_packages(ROOT / "lambdas" / name / "requirements.lock")
    assert lock, f"{name}: its lock pins nothing"
    differ = {pkg: (v, project[pkg]) for pkg, v in lock.items() if pkg in project and project[pkg] != v}
    assert not differ, f"{name}: lock vs project lock {differ}"


def test_the_asset_hash_changes_with_any_locked_dependency(tmp_path, monkeypatch):
    lambdas = tmp_path / "lambdas"
    shutil.copytree(ROOT / "lambdas" / "parse_run", lambdas / "parse_run")
    monkeypatch.setattr(functions, "LAMBDAS", lambdas)
    monkeypatch.setattr(functions, "ROOT", Path("/"))  # file names are hashed relative to it
    before = functions.source_hash("parse_run")
    lock = lambdas / "parse_run" / "requirements.lock"
    # A transitive dependency moves (its direct pins in requirements.txt stay the same).
    lock.write_text(lock.read_text().replace("packaging==26.3", "packaging==26.4", 1))
    assert functions.source_hash("parse_run") != before


def _synth(out: Path, hash_seed: str) -> tuple[dict[str, str], dict[str, object]]:
    env = {
        **os.environ,
        "CDK_OUTDIR": str(out),
        "PYTHONHASHSEED": hash_seed,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": []}),
    }
    proc = subprocess.run(
        [sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (manifest,) = out.glob("*.assets.json")
    assets = json.loads(manifest.read_text())
    # An asset's key in the manifest is its hash; its source says which part of the repository it is.
    hashes = {k: Path(v["source"]["path"]).name for k, v in assets.get("files", {}).items()}
    hashes |= {k: v["source"]["dockerFile"] for k, v in assets.get("dockerImages", {}).items()}
    (template,) = [p for p in out.glob("*.template.json")]
    code = {
        lid: res["Properties"]["Code"]
        for lid, res in json.loads(template.read_text())["Resources"].items()
        if res["Type"] == "AWS::Lambda::Function"
    }
    return hashes, code


@pytest.mark.slow
def test_two_synths_of_the_same_commit_give_the_same_asset_hashes(tmp_path):
    first = _synth(tmp_path / "one", "1")
    second = _synth(tmp_path / "two", "2")
    assert set(FUNCTIONS) | {"container/Dockerfile"} <= set(first[0].values())
    assert first == second
