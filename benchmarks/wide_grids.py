"""Wide synthetic sweep grids resampled from the shared real logs, for ``bench_simulate.py``.

A grid has N instance types drawn from the catalogue's 174 cloud types (the 36 the price catalogue prices
in us-east-1 at their real price, the others at a price fitted on those 36 and given to the spec as its
``prices``, as a user gives a rate the catalogue lacks) and the batch sizes of one seed family (FCN,
MNIST, ResNet). Each instance type gets a speed: its price's square root (dearer types are faster, less
than in proportion), times a lognormal factor (sd 0.3 in log) drawn from the grid's seed. A
configuration (type, batch size) gets ``repetitions`` runs, each a log of the family at that batch size
drawn at random from the real logs (any instance type), its step, validation and epoch times scaled by
``reference / speed``, where ``reference`` is the family's median epoch time at that batch size over the
log's own epoch time median: the batch size's real cost, the drawn log's own noise (step to step, epoch
to epoch, warm-up), the type's speed. Logs are kept in memory as an import.
"""

from __future__ import annotations

import copy
import functools
import math
import random
import statistics
from array import array
from collections import Counter
from dataclasses import dataclass

from trainsweep.cost.prices import hourly_usd
from trainsweep.importer import FileOutcome, ImportResult
from trainsweep.instances import InstanceType, vmtype
from trainsweep.logs.model import RunTimings
from trainsweep.predict import run_family


@dataclass
class Pool:
    """The complete logs of one family, by batch size, with each one's median epoch time."""

    family: str
    epochs: int
    by_batch: dict[int, list[tuple[RunTimings, float]]]


def pools(result: ImportResult) -> dict[str, Pool]:
    """The families' pools from an import of the real logs (complete logs with a batch size only)."""
    out: dict[str, dict[int, list[tuple[RunTimings, float]]]] = {}
    lengths: dict[str, Counter] = {}
    for o in result.files:
        run = result.runs.get(o.path)
        if run is None or run.status != "complete" or not o.batch_size or o.instance_type is None:
            continue
        family = run_family(run, o.path)
        times = [e.epoch_s for e in run.epochs if e.steps and e.epoch_s]
        if family not in ("fcn", "mnist", "resnet") or len(times) < 3:
            continue
        out.setdefault(family, {}).setdefault(o.batch_size, []).append((run, statistics.median(times[1:])))
        lengths.setdefault(family, Counter())[len(times)] += 1
    return {f: Pool(f, lengths[f].most_common(1)[0][0], b) for f, b in out.items()}


def _scaled(run: RunTimings, k: float, name: str, system: str) -> RunTimings:
    new = copy.copy(run)
    new.name, new.computing_system, new.real_time, new.sha256 = name, system, [], None
    new.fit_s = run.fit_s * k if run.fit_s else run.fit_s
    new.total_s = run.total_s * k if run.total_s else run.total_s
    new.epochs = []
    for e in run.epochs:
        f = copy.copy(e)
        f.step_s = array("d", (x * k for x in e.step_s))
        f.real_time = []
        f.epoch_s = e.epoch_s * k if e.epoch_s else e.epoch_s
        f.validation_s = e.validation_s * k if e.validation_s else e.validation_s
        new.epochs.append(f)
    new.ranks = {}
    return new


def _features(t: InstanceType) -> list[float]:
    """What the fitted price reads of a type: log vCPUs, log memory, log(1 + accelerators)."""
    return [1.0, math.log(t.vcpus), math.log(t.memory_gib), math.log1p(t.accelerators or t.gpus)]


@functools.cache
def cloud_types(region: str = "us-east-1") -> list[tuple[str, float, bool]]:
    """Every cloud instance type of the catalogue with an hourly price, cheapest first: (type, USD per
    hour, whether the price catalogue prices it). The unpriced ones are priced by a least-squares fit of
    log price on :func:`_features` over the priced ones (a synthetic rate, in the range the real ones
    span for such a machine)."""
    import numpy as np

    from trainsweep.instances import CATALOGUE

    cloud = [t for t in CATALOGUE.values() if not t.is_local]
    priced = {t.name: p for t in cloud if (p := hourly_usd(t.name, region))}
    known = [t for t in cloud if t.name in priced]
    coef, *_ = np.linalg.lstsq(
        np.array([_features(t) for t in known]), np.log([priced[t.name] for t in known]), rcond=None
    )

    def fitted(t: InstanceType) -> float:
        return round(math.exp(float(np.dot(coef, _features(t)))), 3)

    out = [(t.name, priced[t.name], True) if t.name in priced else (t.name, fitted(t), False) for t in cloud]
    return sorted(out, key=lambda x: x[1])


def grid(
    pool: Pool, width: int, seed: int, repetitions: int = 3, batch_sizes: int | None = None
) -> tuple[ImportResult, dict]:
    """A synthetic import of ``width`` instance types x the pool's batch sizes (``batch_sizes`` of them,
    drawn with the seed: all by default), and its spec (recommended strategy: early stop, packed, 1
    repetition; ``epochs``: the family's usual count). The seed draws the same types whatever
    ``batch_sizes`` is."""
    rng = random.Random(seed)
    types = sorted(rng.sample(cloud_types(), width), key=lambda x: x[1])
    sizes = sorted(b for b, logs in pool.by_batch.items() if logs)
    if batch_sizes is not None:
        sizes = sorted(random.Random(f"{seed}-sizes").sample(sizes, batch_sizes))
    ref = {b: statistics.median(m for _, m in pool.by_batch[b]) for b in sizes}
    files, runs = [], {}
    for itype, price, _ in types:
        speed = math.sqrt(price) * math.exp(rng.gauss(0.0, 0.3))
        for b in sizes:
            for k in range(repetitions):
                src, own = rng.choice(pool.by_batch[b])
                name = f"result-{vmtype(itype)}-{b}-e{k + 1}"
                path = f"{pool.family}-{seed}/{name}.txt"
                runs[path] = _scaled(src, ref[b] / own / speed, name, vmtype(itype))
                files.append(FileOutcome(path, f"{pool.family}-{seed}", name, "complete",
                                         instance_type=itype, batch_size=b, run_index=k + 1))  # fmt: skip
    spec = {
        "name": "wide",
        "workload": {"model": "resnet50-cifar10", "epochs": pool.epochs},
        "instance_types": [t for t, _, _ in types],
        "prices": {t: p for t, p, real in types if not real},
        "batch_sizes": sizes,
        "max_concurrency": 4,
        "mode": "early-stop",
        "packing": "per-instance",
        "repetitions": 1,
    }
    return ImportResult(None, files, [], {"duplicates": [], "skipped": []}, runs), spec  # type: ignore[arg-type]
