"""The accelerators of SageMaker training instances: memory, CUDA compute capability and peak FLOPs.

One row per accelerator model, each with the vendor document its figures come from (docs/spec.md,
"Instance catalogue", lists them). Peak figures are TFLOPS per accelerator, **dense** (NVIDIA's
datasheets print tensor-core figures with 2:4 structured sparsity and mark them; the dense figure is
half of it), for the precisions a training step runs in: ``fp32`` (CUDA cores, no tensor cores),
``tf32``, ``bf16``, ``fp16`` and ``fp8`` (tensor cores). A precision the chip has no fast path for is
absent (a V100 or a T4 has no bf16, TF32 or FP8 tensor cores). :mod:`trainsweep.instances` says which
instance carries how many of which; this module knows chips only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""The precisions a peak figure may be given for."""

NVIDIA, AWS = "NVIDIA", "AWS"


@dataclass(frozen=True)
class Accelerator:
    """One accelerator model, as its vendor describes it."""

    key: str
    """The catalogue's short name: ``V100``, ``A100-80GB``, ``Trainium2``."""
    vendor: str
    model: str
    """The vendor's name for it (``H100 SXM``, ``Trainium``)."""
    memory_gb: float
    """Memory of one accelerator as its vendor gives it (NVIDIA: GB; AWS Neuron docs: GiB)."""
    compute_capability: tuple[int, int] | None
    """CUDA compute capability (NVIDIA only; developer.nvidia.com/cuda-gpus)."""
    peak_tflops: Mapping[str, float] = field(default_factory=dict)
    """Dense peak TFLOPS of one accelerator by precision (:data:`PRECISIONS`); empty when the vendor
    publishes none."""
    source: str = ""
    """Where the figures come from."""

    @property
    def is_cuda(self) -> bool:
        return self.vendor == NVIDIA

    def peak(self, precision: str) -> float | None:
        """Dense peak TFLOPS at ``precision``; None when the chip has no such path or none is published."""
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; one of: {', '.join(PRECISIONS)}")
        return self.peak_tflops.get(precision)


def _a(
    key: str,
    vendor: str,
    model: str,
    memory_gb: float,
    cc: tuple[int, int] | None,
    source: str,
    **tflops: float,
) -> Accelerator:
    return Accelerator(key, vendor, model, memory_gb, cc, MappingProxyType(dict(tflops)), source)


_K80 = "NVIDIA Tesla K80 board specification BD-07317-001 (per board: two GK210 GPUs, 8.73 TFLOPS FP32 with boost, 24 GB); a SageMaker p2 GPU is one GK210"  # noqa: E501
_V100 = "NVIDIA V100 Tensor Core GPU datasheet (V100 SXM2: 15.7 TFLOPS FP32, 125 TFLOPS tensor)"
_T4 = "NVIDIA T4 Tensor Core GPU datasheet (8.1 TFLOPS FP32, 65 TFLOPS mixed FP16/FP32)"
_A10G = "AWS G5 instance page (NVIDIA A10G, 24 GB); NVIDIA publishes no A10G datasheet, so no peak is given"
_L4 = "NVIDIA L4 Tensor Core GPU datasheet (30.3 TFLOPS FP32; TF32 120, FP16/BF16 242, FP8 485 TFLOPS with sparsity)"  # noqa: E501
_L40S = "NVIDIA L40S datasheet (91.6 TFLOPS FP32; TF32 183, BF16/FP16 362.05, FP8 733 TFLOPS dense)"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (SXM: 19.5 TFLOPS FP32; TF32 156, BF16/FP16 312 TFLOPS dense)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: 67 TFLOPS FP32; TF32 989, BF16/FP16 1,979, FP8 3,958 TFLOPS with sparsity)"  # noqa: E501
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: 141 GB; compute as H100 SXM)"
_B200 = "NVIDIA HGX B200 specifications, per GPU (180 GB; FP32 75 TFLOPS; TF32 2.2, FP16/BF16 4.5, FP8 9 PFLOPS with sparsity)"  # noqa: E501
_TRN1 = "AWS Neuron documentation, Trainium architecture (per chip: 32 GiB; 190 TFLOPS FP16/BF16/cFP8/TF32, 47.5 TFLOPS FP32)"  # noqa: E501
_TRN2 = "AWS Neuron documentation, Trainium2 architecture (per chip: 96 GiB; 1,299 TFLOPS FP8, 667 BF16/FP16/TF32, 181 FP32)"  # noqa: E501

ACCELERATORS: dict[str, Accelerator] = {
    a.key: a
    for a in [
        _a("K80", NVIDIA, "Tesla K80 (one GK210)", 12, (3, 7), _K80, fp32=4.365),
        _a("V100", NVIDIA, "V100 SXM2 16GB", 16, (7, 0), _V100, fp32=15.7, fp16=125.0),
        _a("V100-32GB", NVIDIA, "V100 SXM2 32GB", 32, (7, 0), _V100, fp32=15.7, fp16=125.0),
        _a("T4", NVIDIA, "T4", 16, (7, 5), _T4, fp32=8.1, fp16=65.0),
        _a("A10G", NVIDIA, "A10G", 24, (8, 6), _A10G),
        _a("L4", NVIDIA, "L4", 24, (8, 9), _L4, fp32=30.3, tf32=60.0, bf16=121.0, fp16=121.0, fp8=242.5),
        _a(
            "L40S",
            NVIDIA,
            "L40S",
            48,
            (8, 9),
            _L40S,
            fp32=91.6,
            tf32=183.0,
            bf16=362.05,
            fp16=362.05,
            fp8=733.0,
        ),
        _a(
            "A100", NVIDIA, "A100 SXM4 40GB", 40, (8, 0), _A100, fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0
        ),
        _a(
            "A100-80GB",
            NVIDIA,
            "A100 SXM4 80GB",
            80,
            (8, 0),
            _A100,
            fp32=19.5,
            tf32=156.0,
            bf16=312.0,
            fp16=312.0,
        ),
        _a(
            "H100",
            NVIDIA,
            "H100 SXM",
            80,
            (9, 0),
            _H100,
            fp32=67.0,
            tf32=494.5,
            bf16=989.5,
            fp16=989.5,
            fp8=1979.0,
        ),
        _a(
            "H200",
            NVIDIA,
            "H200 SXM",
            141,
            (9, 0),
            _H200,
            fp32=67.0,
            tf32=494.5,
            bf16=989.5,
            fp16=989.5,
            fp8=1979.0,
        ),
        _a(
            "B200",
            NVIDIA,
            "B200 (HGX)",
            180,
            (10, 0),
            _B200,
            fp32=75.0,
            tf32=1100.0,
            bf16=2250.0,
            fp16=2250.0,
            fp8=4500.0,
        ),
        _a(
            "Trainium",
            AWS,
            "Trainium",
            32,
            None,
            _TRN1,
            fp32=47.5,
            tf32=190.0,
            bf16=190.0,
            fp16=190.0,
            fp8=190.0,
        ),
        _a(
            "Trainium2",
            AWS,
            "Trainium2",
            96,
            None,
            _TRN2,
            fp32=181.0,
            tf32=667.0,
            bf16=667.0,
            fp16=667.0,
            fp8=1299.0,
        ),
    ]
}

# A GPU's name as CUDA gives it -> its row. Names that match none (H100 PCIe or NVL,
# whose peaks differ from the SXM part's, a laptop GPU) get no peak rather than a wrong one.
_GPU_NAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.I), key)
    for p, key in (
        (r"\b(pcie|nvl)\b", ""),
        (r"\bB200\b", "B200"),
        (r"\bH200\b", "H200"),
        (r"\bH100\b", "H100"),
        (r"\bA100\b.*\b80\s?GB\b", "A100-80GB"),
        (r"\bA100\b", "A100"),
        (r"\bL40S\b", "L40S"),
        (r"\bL4\b", "L4"),
        (r"\bA10G\b", "A10G"),
        (r"\bT4\b", "T4"),
        (r"\bV100\b.*\b32\s?GB\b", "V100-32GB"),
        (r"\bV100\b", "V100"),
    )
)


def accelerator_named(device: str) -> Accelerator | None:
    """The accelerator a device name stands for, as CUDA gives it (``NVIDIA H200``); None when the
    name matches no row of :data:`ACCELERATORS` (a CPU, an H100 PCIe, a laptop GPU)."""
    for pattern, key in _GPU_NAMES:
        if pattern.search(device):
            return ACCELERATORS.get(key)
    return None
