"""The interval's calibration: the epoch jitter as a multiple of a run's own noise (:func:`run_noise`),
per family of runs (and pooled), scaled per instance class, as shipped in
``trainsweep/data/predict-calibration.json``; :func:`epoch_jitter_for` is the jitter it gives a run.
Fitting it on replays is :mod:`trainsweep.predict.fitting`."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from trainsweep.predict.steady import StopRule

if TYPE_CHECKING:
    from pathlib import Path

    from trainsweep.class_calibration import ClassCalibration
    from trainsweep.logs.model import RunTimings

CALIBRATION_FILE = "predict-calibration.json"
CONTAINER_FAMILIES = ("container-cpu", "container-gpu")
"""Runs of trainsweep's own worker (a built-in workload), on the CPU or on GPUs: a CPU shared with other
work and a dedicated GPU do not jitter alike."""


def container_family(gpus: int) -> str:
    """The family of a run of trainsweep's own worker on ``gpus`` GPUs (0: the CPU)."""
    return CONTAINER_FAMILIES[1] if gpus > 0 else CONTAINER_FAMILIES[0]


NOISE_FLOOR = 0.002
"""The least noise (relative sd of an epoch) a run is taken to have, however quiet its steps: epochs
move by more than their steps' own standard error shows (hand-offs, validation, the machine), and a
run of many quiet steps would otherwise get an interval of nothing. Chosen on the calibration logs
(``bench_predict.py`` prints the cross-validated coverage at the floors around it)."""


def run_noise(stat_rel: float) -> float:
    """The unit a run's epoch jitter is calibrated in: the relative standard error of its predicted
    epoch time from its steps' own noise (batch means), floored at :data:`NOISE_FLOOR` in quadrature.

    A run whose steps scatter more (a shared CPU, a loaded host, a short epoch) gets a wider interval
    from its own steps, whatever class or family it is: what the calibration fits is how many times
    that noise the epochs move, which transfers to instances it has not seen better than a jitter
    fitted on other instances' runs.
    """
    return math.hypot(stat_rel, NOISE_FLOOR)


COVERAGE_GOAL = (0.85, 0.95)
"""The 90 % interval is honest for a family when it covers this share of held-out logs."""
MEDIAN_ERROR_GOAL = 0.005
"""Above this median |error| in cross-validation, a family's predictions carry a note that says so."""
FAMILY_KEYWORDS: dict[str, tuple[str, ...]] = {
    "fcn": ("fcn", "seismic"),
    "mnist": ("mnist",),
    "resnet": ("resnet", "cifar"),
}
"""Families of the seeds' logs (cloud-ML dialect, no header) by a word in the log's path or name."""


def run_family(run: RunTimings, path: str | Path | None = None) -> str | None:
    """The family a run belongs to for the interval's calibration; None when unknown.

    ``container-cpu``/``container-gpu``: a log written by trainsweep's own worker (MLLOG dialect, a
    built-in workload in its header; its GPU count); ``mo833``: the MO833 per-rank dialect; the seeds'
    cloud-ML logs carry no workload, so a word of their path (or run name) tells ``fcn``, ``mnist`` or
    ``resnet``. Anything else (an instrumented script, an MLPerf log) is unknown and gets the pooled
    calibration.
    """
    from trainsweep.workloads import WORKLOADS

    if run.dialect == "mllog":
        return container_family(run.header.gpus or 0) if run.header.workload in WORKLOADS else None
    if run.dialect == "mo833":
        return "mo833"
    text = str(path if path is not None else run.name).lower()
    for family, words in FAMILY_KEYWORDS.items():
        if any(w in text for w in words):
            return family
    return None


@dataclass(frozen=True)
class JitterCalibration:
    """The epoch jitter fitted on one family's logs (or on all of them), as a multiple of a run's own
    noise (:func:`run_noise`), with its cross-validated figures."""

    noise_multiple: float | None
    """Split-conformal: the smallest multiple of each log's own noise whose interval covers
    ``interval`` of the logs, finite-sample corrected; None when too few logs for that."""
    logs: int
    experiments: int
    cv_logs: int = 0
    cv_interval_coverage: float | None = None
    """Coverage of the interval on each held-out experiment, calibrated without it (leave one out)."""
    cv_median_abs_error: float | None = None

    @property
    def validated(self) -> bool:
        """Whether cross-validation showed the interval honest (coverage within :data:`COVERAGE_GOAL`)."""
        c = self.cv_interval_coverage
        return c is not None and COVERAGE_GOAL[0] <= c <= COVERAGE_GOAL[1]


@dataclass(frozen=True)
class Calibration:
    """Epoch jitter per family and pooled (all families), as multiples of a run's own noise, scaled per
    instance class; see :func:`fit_calibration`."""

    pooled: JitterCalibration
    families: dict[str, JitterCalibration] = field(default_factory=dict)
    interval: float = 0.90
    created: str = ""
    source: str = ""
    classes: dict[str, ClassCalibration] = field(default_factory=dict)
    unseen_class_factor: dict[str, float] = field(default_factory=dict)
    """Per kind (``cpu``, ``gpu``): the factor for a class without one of its own. Each seen class of
    the kind is held out in turn and its logs scored against the family jitters refitted without it:
    the factor covers the interval of those held-out logs, classes weighing alike (at least 1; see
    :func:`trainsweep.class_calibration.unseen_factor`)."""
    unseen_pooled_factor: dict[str, float] = field(default_factory=dict)
    """The same fitted over the pooled multiple: the fallback for a run whose family part is the pooled
    multiple (an instrumented script, a family with too few logs), so that the factor is fitted over
    the base it multiplies. A table without it uses :attr:`unseen_class_factor`."""

    def class_factor(
        self, instance_class: str | None, *, pooled: bool = False
    ) -> tuple[float, str | None, list[str]]:
        """(factor on the family's jitter, ``class`` / ``unseen-class`` / ``unknown-class`` / None, notes).

        A table without classes scales nothing (None). A class with its own factor uses it (``pooled``:
        the family part is the pooled multiple, and the factor the one fitted over it); a class without
        one (not in the calibration logs, or too few of them) and an unknown class get the unseen-class
        fallback of their kind (an unknown class: the widest kind's; ``pooled``: the one fitted over the
        pooled multiple), never below 1.
        """
        if not self.classes:
            return 1.0, None, []
        own = self.classes.get(instance_class) if instance_class else None
        factor = None if own is None else own.pooled_factor if pooled else own.factor
        if factor is not None:
            # the family's jitter already covers its logs: a class widens it where its own logs needed
            # more, and never narrows it (a quiet class of a noisy family would undercover the family)
            return max(1.0, factor), "class", []
        from trainsweep.instance_class import kind

        fallback = dict(
            self.unseen_pooled_factor if pooled and self.unseen_pooled_factor else self.unseen_class_factor
        )
        if instance_class is None:
            factor = max(fallback.values(), default=1.0)
            why, source = "instance class unknown", "unknown-class"
        else:
            factor = fallback.get(kind(instance_class), max(fallback.values(), default=1.0))
            why = f"no calibration logs of instance class {instance_class!r}"
            if own is not None:
                why = f"instance class {instance_class!r} has too few calibration logs ({own.logs})"
            source = "unseen-class"
        factor = max(1.0, factor)
        return (
            factor,
            source,
            [f"{why}: the interval's jitter is widened {factor:.2f}x (unseen-class fallback)"],
        )

    def jitter_for(self, family: str | None) -> tuple[float, str, list[str]]:
        """(epoch jitter as a multiple of the run's own noise, ``family`` or ``pooled``, notes) for a run
        of ``family``.

        A family with its own fitted jitter uses it; an unknown family, or one with too few logs, the
        pooled one. A family whose interval fell short of the coverage goal in cross-validation gets the
        wider of its own and the pooled jitter, and a note that says so.
        """
        pooled = self.pooled.noise_multiple
        if pooled is None:
            raise ValueError("the calibration has no pooled epoch jitter")
        own = self.families.get(family) if family else None
        if own is None or own.noise_multiple is None:
            if family is None:
                why = "family unknown"
            elif own is None:
                why = f"no calibration logs of family {family!r}"
            else:
                why = f"family {family!r} has too few calibration logs ({own.logs})"
            note = f"{why}: the interval uses the pooled calibration (epoch jitter {pooled:.2f}x the run's "
            note += "noise)"
            if self.pooled.cv_interval_coverage is not None:
                note += f", which covered {self.pooled.cv_interval_coverage:.0%} of held-out logs"
            return pooled, "pooled", [note]
        notes = []
        if own.cv_median_abs_error is not None and own.cv_median_abs_error > MEDIAN_ERROR_GOAL:
            notes.append(
                f"predictions of family {family!r} were off by a median {own.cv_median_abs_error:.1%} "
                f"in cross-validation (epoch jitter {own.noise_multiple:.2f}x the run's noise): two epochs "
                "do not pin its epoch time down"
            )
        if own.validated or own.cv_interval_coverage is None:
            return own.noise_multiple, "family", notes
        low = own.cv_interval_coverage < COVERAGE_GOAL[0]
        jitter = max(own.noise_multiple, pooled) if low else own.noise_multiple
        note = (
            f"the 90 % interval of family {family!r} covered {own.cv_interval_coverage:.0%} of held-out "
            f"logs in cross-validation (goal {COVERAGE_GOAL[0]:.0%}-{COVERAGE_GOAL[1]:.0%}): "
            + ("two epochs do not pin its epoch time down; the interval is widened to the pooled one"
               if low else "the interval is wider than it needs to be")
        )  # fmt: skip
        return jitter, "family", [*notes, note]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pooled"]["validated"] = self.pooled.validated
        for name, cal in self.families.items():
            d["families"][name]["validated"] = cal.validated
        for name, cc in self.classes.items():
            d["classes"][name]["validated"] = cc.validated
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        from trainsweep.class_calibration import ClassCalibration

        def one(x: dict[str, Any]) -> JitterCalibration:
            return JitterCalibration(**{k: v for k, v in x.items() if k != "validated"})

        return cls(
            pooled=one(d["pooled"]),
            families={k: one(v) for k, v in d.get("families", {}).items()},
            interval=d.get("interval", 0.90),
            created=d.get("created", ""),
            source=d.get("source", ""),
            classes={k: ClassCalibration.from_dict(v) for k, v in d.get("classes", {}).items()},
            unseen_class_factor=dict(d.get("unseen_class_factor", {})),
            unseen_pooled_factor=dict(d.get("unseen_pooled_factor", {})),
        )


@functools.cache
def load_calibration() -> Calibration:
    """The calibration shipped in the package (``trainsweep/data/predict-calibration.json``)."""
    import json
    from importlib import resources

    text = resources.files("trainsweep").joinpath("data", CALIBRATION_FILE).read_text(encoding="utf-8")
    return Calibration.from_dict(json.loads(text))


def epoch_jitter_for(
    family: str | None,
    rule: StopRule,
    calibration: Calibration | None,
    notes: list[str],
    instance_class: str | None = None,
    stat_rel: float = 0.0,
) -> tuple[float, str, bool | None, str | None]:
    """(epoch jitter, a relative sd; where the family's part came from, whether cross-validation found it
    honest, how the instance class scaled it: :meth:`Calibration.class_factor`); appends notes. The
    calibration's jitter is the family's multiple x the class's factor x the run's own noise
    (:func:`run_noise` of ``stat_rel``, the predicted epoch's relative standard error); the rule's is
    taken as it is."""
    if rule.epoch_jitter is not None:
        return rule.epoch_jitter, "rule", None, None
    cal = calibration or load_calibration()
    jitter, source, more = cal.jitter_for(family)
    notes.extend(more)
    chosen = cal.pooled if source == "pooled" else cal.families[family or ""]
    factor, by_class, class_notes = cal.class_factor(instance_class, pooled=source == "pooled")
    notes.extend(class_notes)
    validated = chosen.validated if chosen.cv_interval_coverage is not None else None
    return jitter * factor * run_noise(stat_rel), source, validated, by_class
