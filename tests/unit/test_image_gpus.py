"""Which instance types the training image can use: the catalogue's accelerators, the image's PyTorch
build, and the plan-time refusal of types it has no kernels for (``trainsweep plan`` as users run it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainsweep import image, instances
from trainsweep.cli import app
from trainsweep.cli.plan import EXIT_INVALID

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
SPEC = {
    "name": "gpus",
    "workload": {"model": "mnist-cnn", "epochs": 1},
    "instance_types": ["ml.g4dn.xlarge", "ml.p2.xlarge"],
    "batch_sizes": [256],
}


def test_every_gpu_type_knows_its_accelerator_and_compute_capability():
    for t in instances.CATALOGUE.values():
        if t.gpus and not t.is_local:
            assert t.gpu_model and t.compute_capability, t.name
        if not t.gpus:
            assert t.compute_capability is None, t.name
    assert instances.lookup("ml.p2.xlarge").compute_capability == (3, 7)
    assert instances.lookup("ml.g6.xlarge").compute_capability == (8, 9)


def test_the_image_module_describes_the_dockerfiles_base_image():
    text = (ROOT / "container" / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert base is not None and base.group(1) == image.BASE_IMAGE, "update trainsweep/image.py with the image"
    torch_version, cuda = re.match(r"pytorch/pytorch:([\d.]+)-cuda([\d.]+)-", image.BASE_IMAGE).groups()  # type: ignore[union-attr]
    assert f"PyTorch {torch_version} with CUDA {cuda}" == image.DESCRIPTION


@pytest.mark.parametrize(
    ("capability", "arch_list", "ok"),
    [
        ((3, 7), image.ARCH_LIST, False),  # K80: no sm_3x in the cu126 build
        ((8, 9), image.ARCH_LIST, True),  # L4 runs sm_86 code (same major, higher minor)
        ((10, 0), image.ARCH_LIST, False),  # no sm_10x and no PTX
        ((10, 0), ["sm_90", "compute_90"], True),  # PTX is compiled for newer GPUs
        ((9, 0), ["sm_90a"], True),
        ((9, 1), ["sm_90a"], False),  # arch-specific code runs on its own capability only
        ((7, 5), [], False),  # a CPU build
    ],
)
def test_cuda_compatibility_rules(capability, arch_list, ok):
    assert image.runs_on(capability, arch_list) is ok


def test_the_k80_b200_and_trainium_types_are_the_ones_the_image_cannot_use():
    unusable = sorted(n for n in instances.CATALOGUE if image.unusable_reason(n))
    assert unusable == [
        "ml.p2.16xlarge",
        "ml.p2.8xlarge",
        "ml.p2.xlarge",
        "ml.p6-b200.48xlarge",  # compute capability 10.0: the cu126 build stops at sm_90
        "ml.trn1.2xlarge",
        "ml.trn1.32xlarge",
        "ml.trn1n.32xlarge",
        "ml.trn2.48xlarge",
    ]


def test_plan_refuses_trainium_for_the_stacks_image_with_the_neuron_reason(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "instance_types": ["ml.trn1.2xlarge"]}))
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == EXIT_INVALID, result.output
    out = " ".join(result.output.split())
    assert "not a known value" not in out
    assert "ml.trn1.2xlarge has AWS Trainium accelerators" in out and "Neuron SDK" in out
    assert "workload.image_uri" in out and "ml.g6e" in out


def test_a_trainium_type_is_planned_with_an_image_of_ones_own(tmp_path: Path):
    own = {
        **SPEC,
        "instance_types": ["ml.trn1.2xlarge"],
        "workload": {"image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/neuron-train:1", "epochs": 1},
        "packing": "per-cell",
        "prices": {"ml.trn1.2xlarge": 1.5},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(own))
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "trn1-1" in result.output  # its VMTYPE counts its Trainium chips


def test_plan_refuses_a_type_the_image_cannot_use_and_says_which_would(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == EXIT_INVALID, result.output
    out = " ".join(result.output.split())
    assert "instance_types" in out and "ml.p2.xlarge has NVIDIA K80 GPUs (compute capability 3.7)" in out
    assert f"({image.DESCRIPTION})" in out and "5.0, 6.0, 7.0, 7.5, 8.0, 8.6, 9.0" in out
    assert "ml.g4dn" in out and "workload.image_uri" in out


def test_a_users_own_image_is_not_judged_by_the_stacks(tmp_path: Path):
    own = {
        **SPEC,
        "workload": {"image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/k80-train:1", "epochs": 1},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(own))
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
