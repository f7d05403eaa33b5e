"""cdk-nag AwsSolutions and cfn-lint on the synthesized template."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.synth_helpers import ROOT


def test_synth_with_aws_solutions_checks_raises_nothing(template):
    # The module's shared synth ran with the checks; an unacknowledged finding would have raised.
    assert template["Resources"]


def test_every_acknowledgement_carries_a_reason(tmp_path, monkeypatch):
    import aws_cdk

    from tests.infra.synth_helpers import synth

    seen: list[tuple[str, str]] = []
    original = aws_cdk.Validations.acknowledge

    def spy(self, *acks):  # type: ignore[no-untyped-def]
        seen.extend((a.id, a.reason) for a in acks)
        return original(self, *acks)

    monkeypatch.setattr(aws_cdk.Validations, "acknowledge", spy)
    synth(tmp_path)
    assert seen
    for finding, reason in seen:
        assert finding.startswith("AwsSolutions-"), finding
        assert reason and len(reason.split()) >= 5, (finding, reason)


def test_an_unacknowledged_finding_makes_synth_fail(tmp_path, monkeypatch):
    import infra.nag

    monkeypatch.setattr(infra.nag, "acknowledge", lambda stack: None)
    import infra.app

    monkeypatch.setattr(infra.app, "acknowledge", lambda stack: None)
    from tests.infra.synth_helpers import synth

    with pytest.raises(Exception, match=r"(?i)validation"):
        synth(tmp_path)


def test_cfn_lint_is_clean(template_file: Path):
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--ignore-checks", "W3005", "--", str(template_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
