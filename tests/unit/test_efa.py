"""Multi-node sweeps of EFA instance types on the stack's image: NCCL falls back to TCP there, and the plan
and the report say so."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from typer.testing import CliRunner

from trainsweep.cli import app
from trainsweep.report.html import _efa_note
from trainsweep.spec import load_spec, plan_sweep

SPEC = {
    "name": "big",
    "workload": {"model": "resnet50-cifar10", "epochs": 1},
    "instance_types": ["ml.p4d.24xlarge", "ml.g5.xlarge"],
    "batch_sizes": [256],
    "instance_counts": [1, 2],
}


def test_the_plan_warns_for_each_multi_node_efa_type_on_the_stacks_image(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    result = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "ml.p4d.24xlarge x2: the stack's training image has no EFA libraries or aws-ofi-nccl" in out
    assert "workload.image_uri" in out and "ml.g5.xlarge x2" not in out


def test_no_warning_for_one_node_or_an_own_image() -> None:
    one = load_spec({**SPEC, "instance_counts": None, "instance_count": 1})
    assert not plan_sweep(one, region="us-east-1").warnings
    image = {"image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/efa:1"}
    own = load_spec({**SPEC, "workload": image})
    assert not [w for w in plan_sweep(own, region="us-east-1").warnings if "EFA" in w]


def test_the_reports_scaling_section_says_it_for_efa_rows() -> None:
    rows = [
        SimpleNamespace(instance_type="ml.p5.48xlarge", instance_count=2),
        SimpleNamespace(instance_type="ml.g5.xlarge", instance_count=2),
    ]
    note = _efa_note(SimpleNamespace(rows=rows))  # type: ignore[arg-type]
    assert "ml.p5.48xlarge: the stack&#x27;s training image has no EFA" in note and "ml.g5.xlarge" not in note
    single = [SimpleNamespace(instance_type="ml.p5.48xlarge", instance_count=1)]
    assert _efa_note(SimpleNamespace(rows=single)) == ""  # type: ignore[arg-type]
