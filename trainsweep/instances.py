"""SageMaker training instance types: accelerator counts and the seeds' short VMTYPE names.

VMTYPE is the directory name of the seed layout (``execution-times/<VMTYPE>/...``): family plus GPU
count (``p3-1`` = ml.p3.2xlarge). Where a family has several sizes with the same GPU count, the size is
folded into the family part (``g4dn2x-1`` = ml.g4dn.2xlarge); CPU types end in ``-0`` (``c5x-0``).
Prices live in :mod:`trainsweep.cost`; this module only knows hardware.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache

from trainsweep.accelerators import ACCELERATORS, Accelerator

LOCAL_CPU = "local"
LOCAL_GPU = "local_gpu"
MAX_LOCAL_HOSTS = 8
"""Most hosts a local job may run (``instance_count`` with ``local``): each is a process on this machine."""


@dataclass(frozen=True)
class InstanceType:
    name: str  # ml.p3.2xlarge
    gpus: int
    """CUDA GPUs (0 on CPU and Trainium types)."""
    gpu_model: str | None  # the GPUs' accelerator key: K80, V100, T4, A10G, L4, L40S, A100, H100, H200, B200
    vcpus: int
    memory_gib: float
    # The GPUs' CUDA compute capability, e.g. (7, 5), as NVIDIA lists it (developer.nvidia.com/cuda-gpus);
    # which image can use it is trainsweep.image's question.
    compute_capability: tuple[int, int] | None = None
    accelerator: str | None = None
    """Key of the accelerator in :data:`trainsweep.accelerators.ACCELERATORS` (GPUs and Trainium chips)."""
    accelerators: int = 0
    """How many accelerators one instance has (its GPUs, or its Trainium chips)."""

    @property
    def is_local(self) -> bool:
        return self.name in (LOCAL_CPU, LOCAL_GPU)

    @property
    def family(self) -> str:
        return self.name.split(".")[1] if self.name.startswith("ml.") else self.name

    @property
    def size(self) -> str:
        return self.name.split(".")[2] if self.name.startswith("ml.") else ""

    @property
    def chip(self) -> Accelerator | None:
        """The accelerator's facts (memory, peak FLOPs per precision, source); None for CPU types."""
        return ACCELERATORS[self.accelerator] if self.accelerator is not None else None


def _t(name: str, accelerator: str | None, count: int, vcpus: int, mem: float) -> InstanceType:
    """A training type with ``count`` accelerators of the model ``accelerator`` (None: CPU only)."""
    chip = ACCELERATORS[accelerator] if accelerator is not None else None
    cuda = chip is not None and chip.is_cuda
    return InstanceType(
        name,
        count if cuda else 0,
        accelerator if cuda else None,
        vcpus,
        mem,
        chip.compute_capability if chip is not None and cuda else None,
        accelerator,
        count if chip is not None else 0,
    )


_SIZE_VCPUS = {"large": 2, "xlarge": 4}


def _vcpus(size: str) -> int:
    """vCPUs of an EC2 size: large 2, xlarge 4, Nxlarge 4N."""
    return _SIZE_VCPUS.get(size) or 4 * int(size.removesuffix("xlarge"))


def _cpu(family: str, gib_per_vcpu: float, sizes: str, **odd: tuple[int, float]) -> list[InstanceType]:
    """A CPU family's training sizes; ``odd`` gives (vCPUs, GiB) where the family's ratio does not hold
    (size names with ``x`` for ``.``: ``c4_8xlarge``)."""
    rows = []
    for size in sizes.split():
        vcpus, mem = odd.get(f"{family}_{size}", (_vcpus(size), _vcpus(size) * gib_per_vcpu))
        rows.append(_t(f"ml.{family}.{size}", None, 0, vcpus, mem))
    return rows


_STANDARD = "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge"

CATALOGUE: dict[str, InstanceType] = {
    t.name: t
    for t in [
        _t("ml.p2.xlarge", "K80", 1, 4, 61),
        _t("ml.p2.8xlarge", "K80", 8, 32, 488),
        _t("ml.p2.16xlarge", "K80", 16, 64, 732),
        _t("ml.p3.2xlarge", "V100", 1, 8, 61),
        _t("ml.p3.8xlarge", "V100", 4, 32, 244),
        _t("ml.p3.16xlarge", "V100", 8, 64, 488),
        _t("ml.p3dn.24xlarge", "V100-32GB", 8, 96, 768),
        _t("ml.p4d.24xlarge", "A100", 8, 96, 1152),
        _t("ml.p4de.24xlarge", "A100-80GB", 8, 96, 1152),
        _t("ml.p5.4xlarge", "H100", 1, 16, 256),
        _t("ml.p5.48xlarge", "H100", 8, 192, 2048),
        _t("ml.p5e.48xlarge", "H200", 8, 192, 2048),
        _t("ml.p5en.48xlarge", "H200", 8, 192, 2048),
        _t("ml.p6-b200.48xlarge", "B200", 8, 192, 2048),
        _t("ml.g4dn.xlarge", "T4", 1, 4, 16),
        _t("ml.g4dn.2xlarge", "T4", 1, 8, 32),
        _t("ml.g4dn.4xlarge", "T4", 1, 16, 64),
        _t("ml.g4dn.8xlarge", "T4", 1, 32, 128),
        _t("ml.g4dn.12xlarge", "T4", 4, 48, 192),
        _t("ml.g4dn.16xlarge", "T4", 1, 64, 256),
        _t("ml.g5.xlarge", "A10G", 1, 4, 16),
        _t("ml.g5.2xlarge", "A10G", 1, 8, 32),
        _t("ml.g5.4xlarge", "A10G", 1, 16, 64),
        _t("ml.g5.8xlarge", "A10G", 1, 32, 128),
        _t("ml.g5.12xlarge", "A10G", 4, 48, 192),
        _t("ml.g5.16xlarge", "A10G", 1, 64, 256),
        _t("ml.g5.24xlarge", "A10G", 4, 96, 384),
        _t("ml.g5.48xlarge", "A10G", 8, 192, 768),
        _t("ml.g6.xlarge", "L4", 1, 4, 16),
        _t("ml.g6.2xlarge", "L4", 1, 8, 32),
        _t("ml.g6.4xlarge", "L4", 1, 16, 64),
        _t("ml.g6.8xlarge", "L4", 1, 32, 128),
        _t("ml.g6.12xlarge", "L4", 4, 48, 192),
        _t("ml.g6.16xlarge", "L4", 1, 64, 256),
        _t("ml.g6.24xlarge", "L4", 4, 96, 384),
        _t("ml.g6.48xlarge", "L4", 8, 192, 768),
        _t("ml.g6e.xlarge", "L40S", 1, 4, 32),
        _t("ml.g6e.2xlarge", "L40S", 1, 8, 64),
        _t("ml.g6e.4xlarge", "L40S", 1, 16, 128),
        _t("ml.g6e.8xlarge", "L40S", 1, 32, 256),
        _t("ml.g6e.12xlarge", "L40S", 4, 48, 384),
        _t("ml.g6e.16xlarge", "L40S", 1, 64, 512),
        _t("ml.g6e.24xlarge", "L40S", 4, 96, 768),
        _t("ml.g6e.48xlarge", "L40S", 8, 192, 1536),
        _t("ml.trn1.2xlarge", "Trainium", 1, 8, 32),
        _t("ml.trn1.32xlarge", "Trainium", 16, 128, 512),
        _t("ml.trn1n.32xlarge", "Trainium", 16, 128, 512),
        _t("ml.trn2.48xlarge", "Trainium2", 16, 192, 2048),
        *_cpu("c4", 1.875, "xlarge 2xlarge 4xlarge 8xlarge", c4_8xlarge=(36, 60)),
        *_cpu("c5", 2, "xlarge 2xlarge 4xlarge 9xlarge 18xlarge"),
        *_cpu(
            "c5n",
            2,
            "xlarge 2xlarge 4xlarge 9xlarge 18xlarge",
            c5n_xlarge=(4, 10.5),
            c5n_2xlarge=(8, 21),
            c5n_4xlarge=(16, 42),
            c5n_9xlarge=(36, 96),
            c5n_18xlarge=(72, 192),
        ),
        *_cpu("c6i", 2, "xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge"),
        *_cpu("c7i", 2, _STANDARD + " 48xlarge"),
        *_cpu("c8i", 2, _STANDARD.removeprefix("large ") + " 32xlarge 48xlarge 96xlarge"),
        *_cpu("m4", 4, "xlarge 2xlarge 4xlarge 10xlarge 16xlarge"),
        *_cpu("m5", 4, "large xlarge 2xlarge 4xlarge 12xlarge 24xlarge"),
        *_cpu("m6i", 4, _STANDARD + " 32xlarge"),
        *_cpu("m7i", 4, _STANDARD + " 48xlarge"),
        *_cpu("m8i", 4, _STANDARD + " 32xlarge 48xlarge 96xlarge"),
        *_cpu("r5", 8, _STANDARD),
        *_cpu("r5d", 8, _STANDARD),
        *_cpu("r6i", 8, _STANDARD + " 32xlarge"),
        *_cpu("r7i", 8, _STANDARD + " 48xlarge"),
        *_cpu("r8i", 8, _STANDARD + " 32xlarge 48xlarge 96xlarge"),
        InstanceType(LOCAL_CPU, 0, None, 0, 0),
        InstanceType(LOCAL_GPU, 1, None, 0, 0),
    ]
}
"""Every SageMaker training instance type trainsweep knows (the SageMaker API's ``TrainingInstanceType``
values of the families above), with its accelerators; docs/spec.md ("Instance catalogue") says where
each fact comes from. Burstable (t3) and flex (``*-flex``) CPU types are left out."""

_SIZE_ABBR = re.compile(r"^(\d*)(x?)large$")


def _size_abbr(size: str) -> str:
    m = _SIZE_ABBR.match(size)
    if not m:
        return size
    n, x = m.groups()
    return f"{n}x" if x else f"{n}l"


# Training types whose inter-node bandwidth comes from EFA (Elastic Fabric Adapter): NCCL reaches it only
# through the aws-ofi-nccl plug-in and the EFA libraries, which the stack's image does not carry, so its
# multi-node jobs fall back to TCP sockets on these types.
EFA_TRAINING_TYPES = frozenset(
    {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge",
     "ml.p5en.48xlarge", "ml.g5.48xlarge", "ml.trn1.32xlarge", "ml.trn1n.32xlarge"}
)  # fmt: skip
EFA_NOTE = (
    "the stack's training image has no EFA libraries or aws-ofi-nccl, so NCCL between its nodes falls back "
    "to TCP: multi-node throughput and scaling efficiency understate this type; for a fair figure run an "
    "image with EFA support (workload.image_uri, e.g. an AWS Deep Learning Container for PyTorch training)"
)


def efa_without_plugin(name: str, nodes: int, own_image: bool) -> bool:
    """Whether a job of ``nodes`` instances of ``name`` runs NCCL over TCP where EFA was there to use."""
    return nodes > 1 and not own_image and name in EFA_TRAINING_TYPES


def lookup(name: str) -> InstanceType:
    """Return the catalogue entry for an instance type name; raises KeyError with the known names."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; known: {', '.join(sorted(CATALOGUE))}") from None


def vmtype(name: str) -> str:
    """The seed-layout directory name of an instance type (``ml.p3.2xlarge`` -> ``p3-1``)."""
    if name == LOCAL_CPU:
        return "local-cpu"
    if name == LOCAL_GPU:
        return "local-gpu"
    t = lookup(name)
    count = t.accelerators or t.gpus
    same_count = sorted(
        (
            o
            for o in CATALOGUE.values()
            if o.family == t.family and (o.accelerators or o.gpus) == count and not o.is_local
        ),
        key=lambda o: o.vcpus,
    )
    family = t.family.replace("-", "")  # p6-b200: a job name's VMTYPE is <family>-<count>, one dash
    if count and same_count and same_count[0].name == t.name:
        return f"{family}-{count}"
    return f"{family}{_size_abbr(t.size)}-{count}"


# ---- spellings ------------------------------------------------------------------------------------
# Every way the seed projects' names (log files, job names, folders) spell an instance type. One table,
# read in order by :func:`read_spelling`; docs/log-formats.md shows it to users.

SEED_ALIASES = {"p3-2": "ml.p3.2xlarge", "c4x": "ml.c4.xlarge", "c5x": "ml.c5.xlarge"}
"""Older names of the seeds for the same machines: ``p3-2`` (p3.2xlarge before VMTYPE counted GPUs) and
the high-res-distributed per-instance folders ``c4x``/``c5x``."""

SEED_ALIAS_PLATFORMS = {"c4x": "ec2", "c5x": "ec2"}
"""Aliases that also say where the run was: high-res-distributed ran its c4x/c5x clusters on plain EC2
(its cost figures use the EC2 prices, 0.199 and 0.170 USD/h)."""

EC2_SUFFIX = "-ec2"
"""A spelling ending in this names a run on plain EC2 (not a SageMaker training job)."""

_FAMILY_SIZE_GPUS = re.compile(r"^(?P<family>[a-z]+\d+[a-z]*?)(?P<size>\d*x?large)-(?P<gpus>\d+)$")
_FAMILY_GPU_N = re.compile(r"^(?P<family>[a-z]+\d+[a-z]*)-gpu(?P<gpus>\d+)$")
_FAMILY_GPUS = re.compile(r"^(?P<family>[a-z]+\d+[a-z]*)-(?P<gpus>\d+)$")

SPELLING_FORMS: tuple[tuple[str, str, str], ...] = (
    (
        "vmtype",
        "p3-1, p3-4, g4dn-1, g4dn2x-1, c5x-0",
        "trainsweep's own VMTYPE (:func:`vmtype`), as written in the results layout",
    ),
    (
        "alias",
        "p3-2, c4x, c5x",
        "the seeds' older names (p3-2 = p3.2xlarge); c4x/c5x: high-res-distributed's EC2 instance folders",
    ),
    (
        "family-gpus",
        "p2-1, p2-8, g4dn-1, g4dn-4",
        "family + GPU count: the smallest size with that many GPUs",
    ),
    (
        "family-size-gpus",
        "g4dnxlarge-1, g4dn2xlarge-1, g4dn12xlarge-4, g4dn12xlarge-1",
        "family + size spelled out + GPUs used (at most the size's GPUs)",
    ),
    ("job-gpus", "p3-gpu4 (job resnet50-p3-gpu4-b512-e0)", "SageMaker job names: family + gpuN"),
    ("instance-name", "p3.2xlarge, ml.p3.2xlarge", "the instance type's own name (EC2 log folders)"),
    ("ec2", "p2-1-ec2, g4dnxlarge-1-ec2", "any of the above + -ec2: the same machine, run on plain EC2"),
    ("nodes", "p3-1x2, local-cpux4", "any of the above + xN: a job of N instances (spec instance_counts)"),
)
"""(form, examples, meaning) of every spelling :func:`read_spelling` knows, in the order it tries them."""


@dataclass(frozen=True)
class Spelling:
    """What one spelling of an instance type says."""

    text: str
    instance: InstanceType
    gpus: int
    """GPUs the spelling says the run used (``g4dn12xlarge-1``: 1 of the size's 4)."""
    form: str
    """Which row of :data:`SPELLING_FORMS` read it."""
    platform: str | None = None
    """``ec2`` when the spelling marks an EC2 run; None when it does not say."""
    nodes: int = 1
    """Instances of the job (``p3-1x2``: 2); 1 when the spelling does not say."""


def _smallest_with(family: str, gpus: int) -> InstanceType | None:
    same = [t for t in CATALOGUE.values() if not t.is_local and t.family == family and t.gpus == gpus]
    return min(same, key=lambda t: t.vcpus) if same else None


_NODES_SUFFIX = re.compile(r"^(?P<base>.+?)x(?P<nodes>[1-9]\d{0,2})$")


def vmtype_with_nodes(name: str, nodes: int = 1) -> str:
    """The VMTYPE of a job of ``nodes`` instances of ``name``: :func:`vmtype`, plus ``x<nodes>`` when more
    than one (``ml.p3.2xlarge`` x 2 -> ``p3-1x2``)."""
    short = vmtype(name)
    return short if nodes == 1 else f"{short}x{nodes}"


def read_spelling(text: str) -> Spelling | None:
    """Read an instance-type spelling of the seeds (:data:`SPELLING_FORMS`); None when no form knows it."""
    short = text.strip()
    one = _read_one_node(short)
    if one is not None:
        return one
    m = _NODES_SUFFIX.match(short)
    if m and int(m["nodes"]) > 1 and (base := _read_one_node(m["base"])) is not None:
        return replace(base, text=short, nodes=int(m["nodes"]))
    return None


@cache
def _by_vmtype() -> dict[str, InstanceType]:
    """VMTYPE -> instance type over the catalogue (the first type of each VMTYPE, in catalogue order)."""
    table: dict[str, InstanceType] = {}
    for t in CATALOGUE.values():
        table.setdefault(vmtype(t.name), t)
    return table


def _read_one_node(short: str) -> Spelling | None:
    if short.lower().endswith(EC2_SUFFIX) and len(short) > len(EC2_SUFFIX):
        inner = read_spelling(short[: -len(EC2_SUFFIX)])
        return replace(inner, text=short, platform="ec2") if inner is not None else None
    if (t := _by_vmtype().get(short)) is not None:
        return Spelling(short, t, t.gpus, "vmtype")
    if short in SEED_ALIASES:
        alias = CATALOGUE[SEED_ALIASES[short]]
        return Spelling(short, alias, alias.gpus, "alias", SEED_ALIAS_PLATFORMS.get(short))
    if (m := _FAMILY_GPUS.match(short)) and (smallest := _smallest_with(m["family"], int(m["gpus"]))):
        return Spelling(short, smallest, smallest.gpus, "family-gpus")
    if m := _FAMILY_SIZE_GPUS.match(short):
        sized = CATALOGUE.get(f"ml.{m['family']}.{m['size']}")
        used = int(m["gpus"])
        if sized is not None and (used <= sized.gpus if sized.gpus else used == 0):
            return Spelling(short, sized, used, "family-size-gpus")
    if (m := _FAMILY_GPU_N.match(short)) and (smallest := _smallest_with(m["family"], int(m["gpus"]))):
        return Spelling(short, smallest, smallest.gpus, "job-gpus")
    name = short if short.startswith("ml.") else "ml." + short
    if name in CATALOGUE:
        named = CATALOGUE[name]
        return Spelling(short, named, named.gpus, "instance-name")
    return None


def from_vmtype(short: str) -> InstanceType | None:
    """The instance type of any spelling :func:`read_spelling` knows (the inverse of :func:`vmtype`, and
    the seeds' other names: ``p3-2``, ``c5x``, ``g4dnxlarge-1``, ``p3-gpu4``, ``p2-1-ec2``...)."""
    s = read_spelling(short)
    return s.instance if s is not None else None
