"""What the stack's training image (``container/Dockerfile``) can run on: its PyTorch build's GPU kernels.

A PyTorch CUDA build carries machine code for a fixed list of GPU architectures
(``torch.cuda.get_arch_list()`` in the image). A GPU whose compute capability none of them covers has no
kernels: torch cannot use it, and a job there would train on the CPU. The spec refuses such instance
types at plan time (:func:`unusable_reason`); the worker checks the real GPU by the same rule
(:func:`runs_on`) and fails the cell.

Where the numbers come from: the Dockerfile's base image is ``BASE_IMAGE`` (tests/unit/test_image_gpus.py
checks the two agree). Its PyTorch is the official cu126 wheel, built with
``TORCH_CUDA_ARCH_LIST="5.0;6.0;7.0;7.5;8.0;8.6;9.0"`` (pytorch/pytorch ``.ci/manywheel/build_cuda.sh``,
case 12.6; no PTX). Change ``ARCH_LIST`` with the image.
This module imports no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainsweep import instances

BASE_IMAGE = "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime"
DESCRIPTION = "PyTorch 2.7.1 with CUDA 12.6"
ARCH_LIST = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
"""``torch.cuda.get_arch_list()`` of the image's PyTorch build."""

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([a-z]?)$")


def _parse(arch: str) -> tuple[str, tuple[int, int], bool] | None:
    m = _ARCH.match(arch.strip())
    if not m:
        return None
    kind, major, minor, suffix = m.groups()
    return kind, (int(major), int(minor)), bool(suffix)


def runs_on(capability: tuple[int, int], arch_list: Iterable[str]) -> bool:
    """True when a build with ``arch_list`` has kernels for a GPU of ``capability``.

    CUDA's compatibility rules: machine code for ``sm_XY`` runs on ``X.Z`` with ``Z >= Y`` (same major;
    the ``sm_90a``-style variants only on their own capability); PTX (``compute_XY``) is compiled by the
    driver for any capability from ``X.Y`` on.
    """
    for arch in arch_list:
        parsed = _parse(arch)
        if parsed is None:
            continue
        kind, (major, minor), specific = parsed
        if kind == "compute" and capability >= (major, minor):
            return True
        same_major = kind == "sm" and capability[0] == major
        if same_major and (capability[1] == minor or (capability[1] > minor and not specific)):
            return True
    return False


def supported_capabilities(arch_list: Iterable[str] = ARCH_LIST) -> str:
    """``5.0, 6.0, ...`` for messages."""
    caps = sorted({p[1] for p in map(_parse, arch_list) if p is not None})
    return ", ".join(f"{a}.{b}" for a, b in caps)


def unusable_reason(instance_type: str) -> str | None:
    """Why the stack's image cannot use ``instance_type``'s accelerators, or None when it can (or it has
    none): GPUs its PyTorch has no kernels for, or accelerators that are not CUDA GPUs (Trainium)."""
    t = instances.CATALOGUE.get(instance_type)
    if t is None:
        return None
    chip = t.chip
    if chip is not None and not chip.is_cuda:
        return (
            f"{instance_type} has {chip.vendor} {chip.model} accelerators, which PyTorch reaches only "
            f"through the AWS Neuron SDK (torch-neuronx); the training image ({DESCRIPTION}) has CUDA "
            "PyTorch and no Neuron SDK, so a job there would train on its CPUs. Choose a GPU type it can use "
            f"({usable_families()}), or run an image with the Neuron SDK and a script written for it "
            "(workload.image_uri with workload.entry_point, e.g. an AWS Deep Learning Container for "
            "PyTorch Neuron)"
        )
    if t.gpus == 0 or t.compute_capability is None:
        return None
    if runs_on(t.compute_capability, ARCH_LIST):
        return None
    cc = "{}.{}".format(*t.compute_capability)
    return (
        f"{instance_type} has NVIDIA {t.gpu_model} GPUs (compute capability {cc}); the training image "
        f"({DESCRIPTION}) has kernels for compute capability {supported_capabilities()} only, so a job "
        f"there could not use its GPUs. Choose a type it can use ({usable_families()}), or run your own "
        f"image built with a PyTorch that has sm_{cc.replace('.', '')} kernels "
        "(workload.image_uri with workload.entry_point)"
    )


def usable_families() -> str:
    """``ml.g4dn, ml.g5, ...``: the GPU families of the catalogue whose GPUs the image can use."""
    families: dict[str, None] = {}
    for t in instances.CATALOGUE.values():
        cc = t.compute_capability
        if t.gpus and not t.is_local and cc is not None and runs_on(cc, ARCH_LIST):
            families.setdefault(f"ml.{t.family}")
    return ", ".join(sorted(families))
