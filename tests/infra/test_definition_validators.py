"""The synthesized state machine definition checked by AWS's language rules (``asl-validator``, pinned in
package.json) and the template by checkov, each finding fixed or acknowledged with its reason."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra.synth_helpers import ROOT, resources

ACCOUNT, REGION = "123456789012", "us-east-1"


def _value(part: Any, template: dict[str, Any]) -> str:
    """A plausible literal for one token of the definition (the state machine's ARNs and names)."""
    if isinstance(part, str):
        return part
    res = template["Resources"]
    if "Ref" in part:
        name = part["Ref"]
        if name == "AWS::Partition":
            return "aws"
        return {
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}",
            "AWS::S3::Bucket": name.lower(),
        }[res[name]["Type"]]
    name, _attribute = part["Fn::GetAtt"]
    return {
        "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
        "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{name}",
        "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
    }[res[name]["Type"]]


def definition(template: dict[str, Any]) -> dict[str, Any]:
    """The state machine's definition with its CloudFormation tokens replaced by literal ARNs and names."""
    sm = next(iter(resources(template, "AWS::StepFunctions::StateMachine").values()))
    parts = sm["Properties"]["DefinitionString"]["Fn::Join"][1]
    return json.loads("".join(_value(p, template) for p in parts))


@pytest.fixture(scope="module")
def asl_validator() -> Path:
    """The pinned asl-validator (``npm ci`` installs it with the CDK CLI)."""
    exe = ROOT / "node_modules" / ".bin" / "asl-validator"
    if not exe.is_file():
        assert shutil.which("npm"), "Node.js (npm) is needed for asl-validator"
        env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, env=env, check=True, timeout=600)
    return exe


def _validate(exe: Path, doc: dict[str, Any], tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / "definition.json"
    path.write_text(json.dumps(doc))
    return subprocess.run(
        [str(exe), "--json-path", str(path)], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_definition_is_valid_amazon_states_language(asl_validator, template, tmp_path):
    proc = _validate(asl_validator, definition(template), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_asl_validator_refuses_a_broken_definition(asl_validator, template, tmp_path):
    # the check can fail: a state that leads nowhere is refused
    doc = definition(template)
    doc["States"][doc["StartAt"]]["Next"] = "NoSuchState"
    assert _validate(asl_validator, doc, tmp_path).returncode != 0


# ---- checkov ------------------------------------------------------------------------------------------

CHECKOV_VENV = ROOT / ".venv-checkov"


@pytest.fixture(scope="module")
def checkov() -> Path:
    """checkov from its own environment (requirements-checkov.lock; .ci/run makes it, else this does)."""
    exe = CHECKOV_VENV / "bin" / "checkov"
    if not exe.is_file():
        subprocess.run(["python3", "-m", "venv", str(CHECKOV_VENV)], check=True, timeout=300)
        pip = [
            str(CHECKOV_VENV / "bin" / "pip"),
            "install",
            "-q",
            "--require-hashes",
            "-r",
            str(ROOT / "requirements-checkov.lock"),
        ]
        subprocess.run(pip, check=True, timeout=900)
    return exe


def _checkov(exe: Path, template: dict[str, Any], tmp: Path) -> dict[str, Any]:
    path = tmp / "template.json"
    path.write_text(json.dumps(template))
    command = [str(exe), "-f", str(path), "--framework", "cloudformation", "--skip-download", "-o", "json"]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(proc.stdout)
    return report[0] if isinstance(report, list) else report


def test_checkov_finds_nothing_unacknowledged_and_every_skip_says_why(checkov, template, tmp_path):
    report = _checkov(checkov, template, tmp_path)
    failed = [(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]]
    assert failed == [] and report["summary"]["parsing_errors"] == 0, failed
    skipped = report["results"]["skipped_checks"]
    assert skipped
    for check in skipped:
        assert len(check["check_result"].get("suppress_comment", "").split()) >= 10, check["check_id"]


def test_checkov_fails_the_template_without_the_acknowledgements(checkov, template, tmp_path):
    bare = json.loads(json.dumps(template))
    for resource in bare["Resources"].values():
        resource.get("Metadata", {}).pop("checkov", None)
    assert _checkov(checkov, bare, tmp_path)["results"]["failed_checks"]
