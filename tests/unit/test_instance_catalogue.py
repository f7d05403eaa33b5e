"""The instance catalogue against the SageMaker API and the accelerators' datasheet figures."""

from __future__ import annotations

import botocore.session
import pytest

from trainsweep import accelerators, instances

FAMILIES = [
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "p3",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "trn1",
    "trn1n",
    "trn2",
    "c4",
    "c5",
    "c5n",
    "c6i",
    "c7i",
    "c8i",
    "m4",
    "m5",
    "m6i",
    "m7i",
    "m8i",
    "r5",
    "r5d",
    "r6i",
    "r7i",
    "r8i",
]


def _training_types() -> set[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return set(model.shape_for("TrainingInstanceType").enum)


def test_every_catalogued_type_is_a_sagemaker_training_type():
    known = _training_types()
    assert [n for n in instances.CATALOGUE if n.startswith("ml.") and n not in known] == []


@pytest.mark.parametrize("family", FAMILIES)
def test_every_training_size_of_the_families_on_sale_is_catalogued(family):
    sizes = {n for n in _training_types() if n.split(".")[1] == family}
    assert sizes and sizes <= set(instances.CATALOGUE), sorted(sizes - set(instances.CATALOGUE))


def test_each_accelerator_type_knows_its_chip_count_memory_and_source():
    for t in instances.CATALOGUE.values():
        if t.is_local:
            continue
        chip = t.chip
        assert (chip is None) == (t.accelerators == 0), t.name
        if chip is not None:
            assert chip.memory_gb > 0 and chip.source, t.name
            assert (t.gpus == t.accelerators) == chip.is_cuda, t.name


@pytest.mark.parametrize(
    ("name", "chip", "count", "memory_gb", "cc"),
    [
        ("ml.g6e.xlarge", "L40S", 1, 48, (8, 9)),
        ("ml.p4de.24xlarge", "A100-80GB", 8, 80, (8, 0)),
        ("ml.p5en.48xlarge", "H200", 8, 141, (9, 0)),
        ("ml.p6-b200.48xlarge", "B200", 8, 180, (10, 0)),
        ("ml.trn1.32xlarge", "Trainium", 16, 32, None),
        ("ml.trn2.48xlarge", "Trainium2", 16, 96, None),
    ],
)
def test_new_types_carry_their_accelerator(name, chip, count, memory_gb, cc):
    t = instances.lookup(name)
    got = (t.accelerator, t.accelerators, t.chip.memory_gb if t.chip else None, t.compute_capability)
    assert got == (chip, count, memory_gb, cc)


def test_trainium_chips_are_not_cuda_gpus():
    t = instances.lookup("ml.trn1.2xlarge")
    assert t.gpus == 0 and t.gpu_model is None and t.accelerators == 1


def test_peak_flops_are_dense_and_only_for_precisions_the_chip_has():
    h100 = accelerators.ACCELERATORS["H100"]
    assert h100.peak("bf16") == pytest.approx(1979.0 / 2)  # the datasheet's 1,979 is with sparsity
    assert h100.peak("fp8") == pytest.approx(3958.0 / 2)
    v100 = accelerators.ACCELERATORS["V100"]
    assert v100.peak("fp16") == 125.0 and v100.peak("bf16") is None and v100.peak("tf32") is None
    assert accelerators.ACCELERATORS["T4"].peak("bf16") is None
    assert accelerators.ACCELERATORS["A10G"].peak("fp32") is None  # no vendor datasheet
    with pytest.raises(ValueError, match="fp64"):
        h100.peak("fp64")


def test_every_peak_figure_names_a_known_precision():
    for chip in accelerators.ACCELERATORS.values():
        assert set(chip.peak_tflops) <= set(accelerators.PRECISIONS), chip.key
        if "fp8" in chip.peak_tflops:
            assert chip.peak_tflops["fp8"] >= chip.peak_tflops["bf16"], chip.key


def test_vmtypes_of_the_older_catalogue_are_unchanged():
    """Results already on disk are laid out by these names: a new size must not take them over."""
    assert {n: instances.vmtype(n) for n in ("ml.g6.xlarge", "ml.g6.12xlarge", "ml.p5.48xlarge")} == {
        "ml.g6.xlarge": "g6-1",
        "ml.g6.12xlarge": "g6-4",
        "ml.p5.48xlarge": "p5-8",
    }
    assert instances.vmtype("ml.p5.4xlarge") == "p5-1"
    assert instances.vmtype("ml.p6-b200.48xlarge") == "p6b200-8"  # one dash: <family>-<count>
