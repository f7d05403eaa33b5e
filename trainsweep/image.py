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
    """Why the stack's image cannot use ``instance_type``'s GPUs, or None when it can (or it has none)."""
    t = instances.CATALOGUE.get(instance_type)
    if t is None or t.gpus == 0 or t.compute_capability is None:
        return None
    if runs_on(t.compute_capability, ARCH_LIST):
        return None
    cc = "{}.{}".format(*t.compute_capability)
    return (
        f"{instance_type} has NVIDIA {t.gpu_model} GPUs (compute capability {cc}); the training image "
        f"({DESCRIPTION}) has kernels for compute capability {supported_capabilities()} only, so a job "
        f"there could not use its GPUs. Choose a type it can use (ml.g4dn, ml.g5, ml.g6, ml.p3, ml.p4d, "
        f"ml.p5), or run your own image built with a PyTorch that has sm_{cc.replace('.', '')} kernels "
        "(workload.image_uri with workload.entry_point)"
    )
