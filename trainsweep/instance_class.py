"""Instance classes: the hardware a run's timings depend on, coarser than an instance type.

A class is the accelerator's generation and whether the job spans one or several of them
(``volta-single``, ``kepler-multi``, ``ampere-single``), or ``cpu``. The early-stop interval is calibrated
per class as well as per family (:mod:`trainsweep.predict`): a multi-GPU job's epochs jitter unlike a
single GPU's, and a class the calibration never saw gets a wider interval. Facts come from the instance
catalogue (:mod:`trainsweep.instances`: GPU count, CUDA compute capability).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainsweep.instances import CATALOGUE, InstanceType, read_spelling

if TYPE_CHECKING:
    from trainsweep.logs.model import RunTimings

CPU = "cpu"
GPU_UNKNOWN = "gpu"
"""The generation part of a GPU run whose accelerator is not known (a header with a count and no GPU name
the catalogue knows)."""
GENERATIONS: dict[tuple[int, int], str] = {
    (3, 7): "kepler",
    (7, 0): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 9): "ada",
    (9, 0): "hopper",
}
"""NVIDIA's architecture names by CUDA compute capability (the catalogue's GPUs)."""


def kind(instance_class: str | None) -> str:
    """``cpu`` or ``gpu``: classes of one kind share the fallback for a class not calibrated."""
    return CPU if instance_class == CPU else "gpu"


def class_of(gpus: int, compute_capability: tuple[int, int] | None = None) -> str:
    """The class of a job on ``gpus`` GPUs (0: the CPU) of ``compute_capability`` (None: unknown)."""
    if gpus <= 0:
        return CPU
    generation = GENERATIONS.get(compute_capability, GPU_UNKNOWN) if compute_capability else GPU_UNKNOWN
    return f"{generation}-{'single' if gpus == 1 else 'multi'}"


def _instance(name: str | None) -> tuple[InstanceType, int] | None:
    """(catalogue entry, GPUs used) of an instance-type spelling; None when unknown or local."""
    if not name:
        return None
    spelling = read_spelling(name)
    if spelling is None or spelling.instance.is_local:
        return None
    return spelling.instance, spelling.gpus * max(1, spelling.nodes)


def device_capability(run: RunTimings) -> tuple[int, int] | None:
    """The compute capability of the GPU a log names (an MLLOG ``submission_platform`` such as
    ``NVIDIA H200``, as trainsweep's worker writes on a local GPU); None when it names none the
    catalogue knows."""
    from trainsweep.accelerators import accelerator_named
    from trainsweep.logs.mllog import SUBMISSION_PLATFORM

    device = run.extra.get(SUBMISSION_PLATFORM)
    chip = accelerator_named(device) if isinstance(device, str) else None
    return chip.compute_capability if chip is not None else None


def instance_class(run: RunTimings) -> str | None:
    """The class of ``run``: from its instance type (the log's computing system or header), else from
    the GPU count its header states and the GPU its log names; None when neither tells."""
    for name in (run.computing_system, run.header.instance_type):
        found = _instance(name)
        if found is not None:
            itype, gpus = found
            return class_of(gpus, itype.compute_capability)
    if run.header.gpus is not None:
        return class_of(run.header.gpus, device_capability(run) if run.header.gpus > 0 else None)
    return None


def known_classes() -> list[str]:
    """Every class of the catalogue's instance types (single and multi where the catalogue has both)."""
    return sorted({class_of(t.gpus, t.compute_capability) for t in CATALOGUE.values() if not t.is_local})
