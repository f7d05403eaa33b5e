"""The typed model of one training run, as read from its log: the contract every part shares.

Parsers produce a :class:`RunTimings`; summaries, predictions, cost analysis, the Lambdas and the
report consume it. Step times are kept in ``array('d')`` (8 bytes a step) so that a long log costs
little memory. :meth:`RunTimings.to_record` / :meth:`RunTimings.from_record` give the schema-versioned
JSON run record (``runs/<name>.json``); the reader rejects versions it does not know.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal, final

from trainsweep.logs.spill import Spilled

SCHEMA_VERSION = 1
RECORD_KIND = "trainsweep.run"

Severity = Literal["error", "warning"]
Status = Literal["complete", "partial", "failed", "empty", "unreadable"]


class RecordVersionError(ValueError):
    """A run record was written by an unknown schema version."""


@dataclass
class Problem:
    """Something wrong with a log or a run; never fatal. ``line`` is 1-based, None for whole-file issues."""

    code: str
    message: str
    line: int | None = None
    severity: Severity = "warning"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "line": self.line, "severity": self.severity}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Problem:
        return cls(d["code"], d["message"], d.get("line"), d.get("severity", "warning"))


class JoinedStamps(Sequence[float]):
    """A run's wall-clock stamps kept once, where they are held (its epochs' ``real_time`` and the stamps
    after the last epoch): a read-only sequence of their concatenation, in log order.

    The cloud-ML reader gives it as :attr:`RunTimings.real_time`, so that a log with a stamp per step
    does not hold every stamp twice. A part is an :class:`Epoch` (its ``real_time``, read when needed:
    it may be on disk) or a list or array of stamps. It reads like the list it stands for (``len``,
    indexing, slicing, iteration, ``==`` with a list or array) and reflects the parts as they are now.
    """

    __slots__ = ("_parts",)

    def __init__(self, parts: list[Epoch | array | list[float]]) -> None:
        self._parts = parts

    @staticmethod
    def _count(part: Epoch | array | list[float]) -> int:
        return part.stamps if type(part) is Epoch else len(part)

    @staticmethod
    def _values(part: Epoch | array | list[float]) -> array | list[float]:
        return part.real_time if type(part) is Epoch else part

    def __len__(self) -> int:
        return sum(map(self._count, self._parts))

    def __iter__(self) -> Iterator[float]:
        return chain.from_iterable(map(self._values, self._parts))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        i = i.__index__()
        parts = self._parts if i >= 0 else reversed(self._parts)
        k = i if i >= 0 else -i - 1
        for part in parts:
            n = self._count(part)
            if k < n:
                values = self._values(part)
                return values[k] if i >= 0 else values[-k - 1]
            k -= n
        raise IndexError("stamp index out of range")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (JoinedStamps, list, tuple, array)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JoinedStamps({list(self)!r})"


_EPOCH_SEQUENCES = frozenset({"step_s", "step_numbers", "real_time", "data_wait_s", "compute_s"})

_EPOCH_FIELDS = (
    "index",
    "step_s",
    "step_numbers",
    "data_wait_s",
    "compute_s",
    "validation_s",
    "validation_accuracy",
    "epoch_s",
    "real_time",
    "start_time",
    "end_time",
)


@final  # never subclassed: `type(part) is Epoch` (fast) narrows as isinstance would
class Epoch:
    """One epoch of one rank. ``index`` is 1-based as in the seed layout.

    Attributes:
        step_s: duration of each training step, in log order (seconds), an ``array('d')``.
        step_numbers: step number as logged (restarts at 1 each epoch); same length as ``step_s``. An
            ``array('l')`` or, when the numbers are consecutive (the usual case), a ``range`` (the
            parser's choice: 48 bytes instead of 8 a step); read it as a sequence of ints.
        data_wait_s: per step, time waiting for the next batch (new logs only), aligned with ``step_s``.
        compute_s: per step, forward/backward/optimizer time (new logs only), aligned with ``step_s``.
        real_time: wall-clock stamps (Unix seconds) seen during the epoch, e.g. the seeds' ``Real time:``
            lines. A list or an ``array('d')`` (the parser's choice: EC2 logs print one stamp per step).

    The cloud-ML reader may move a finished epoch's ``step_s`` and ``real_time`` to disk when a log is
    very long (:mod:`trainsweep.logs.spill`); reading either attribute then gives a fresh array read back
    from there, so change such an epoch by assigning, not in place.
    """

    __slots__ = (
        "_real_time",
        "_step_s",
        "compute_s",
        "data_wait_s",
        "end_time",
        "epoch_s",
        "index",
        "start_time",
        "step_numbers",
        "validation_accuracy",
        "validation_s",
    )

    def __init__(
        self,
        index: int,
        step_s: array | None = None,
        step_numbers: array | range | None = None,
        data_wait_s: array | None = None,
        compute_s: array | None = None,
        validation_s: float | None = None,
        validation_accuracy: float | None = None,
        epoch_s: float | None = None,
        real_time: list[float] | array | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> None:
        self.index = index
        self._step_s: array | Spilled = array("d") if step_s is None else step_s
        self.step_numbers = array("l") if step_numbers is None else step_numbers
        self.data_wait_s = data_wait_s
        self.compute_s = compute_s
        self.validation_s = validation_s
        self.validation_accuracy = validation_accuracy
        self.epoch_s = epoch_s
        self._real_time: list[float] | array | Spilled = [] if real_time is None else real_time
        self.start_time = start_time
        self.end_time = end_time

    @property
    def step_s(self) -> array:
        v = self._step_s
        return v.load() if type(v) is Spilled else v  # type: ignore[union-attr,return-value]

    @step_s.setter
    def step_s(self, values: array | Spilled) -> None:
        self._step_s = values

    @property
    def real_time(self) -> list[float] | array:
        v = self._real_time
        return v.load() if type(v) is Spilled else v  # type: ignore[union-attr,return-value]

    @real_time.setter
    def real_time(self, values: list[float] | array | Spilled) -> None:
        self._real_time = values

    @property
    def steps(self) -> int:
        return len(self._step_s)

    @property
    def stamps(self) -> int:
        """How many wall-clock stamps the epoch has (without reading them back from disk)."""
        return len(self._real_time)

    @property
    def spilled(self) -> bool:
        """Whether this epoch's values were moved to disk (a very long log; see the class docstring)."""
        return type(self._step_s) is Spilled or type(self._real_time) is Spilled

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in _EPOCH_FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Epoch:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = zip(_EPOCH_FIELDS, self._values(), strict=True)
        return "Epoch(" + ", ".join(f"{f}={v!r}" for f, v in fields) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Epoch, self._values())  # spilled values travel as arrays

    def record_items(self) -> dict[str, Any]:
        """:meth:`to_dict`'s keys and values in its order, with the sequences as held (arrays, ranges,
        not copied into lists): for writing a record piece by piece (:mod:`trainsweep.jsonstream`)."""
        d: dict[str, Any] = {
            "index": self.index,
            "step_s": self.step_s,
            "step_numbers": self.step_numbers,
            "validation_s": self.validation_s,
            "validation_accuracy": self.validation_accuracy,
            "epoch_s": self.epoch_s,
            "real_time": self.real_time,
            "start_time": self.start_time,
            "end_time": self.end_time,
        }
        if self.data_wait_s is not None:
            d["data_wait_s"] = self.data_wait_s
        if self.compute_s is not None:
            d["compute_s"] = self.compute_s
        return d

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if k in _EPOCH_SEQUENCES else v for k, v in self.record_items().items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Epoch:
        return cls(
            index=d["index"],
            step_s=array("d", d.get("step_s", [])),
            step_numbers=array("l", d.get("step_numbers", [])),
            data_wait_s=array("d", d["data_wait_s"]) if d.get("data_wait_s") is not None else None,
            compute_s=array("d", d["compute_s"]) if d.get("compute_s") is not None else None,
            validation_s=d.get("validation_s"),
            validation_accuracy=d.get("validation_accuracy"),
            epoch_s=d.get("epoch_s"),
            real_time=list(d.get("real_time", [])),
            start_time=d.get("start_time"),
            end_time=d.get("end_time"),
        )


@dataclass
class RunHeader:
    """What the log says about its own run (command line, banner, MLLOG metadata). None = not stated."""

    instance_type: str | None = None
    gpus: int | None = None
    batch_size: int | None = None
    epochs: int | None = None
    train_samples: int | None = None
    eval_samples: int | None = None
    workload: str | None = None
    command_line: str | None = None
    host: str | None = None
    world_size: int | None = None
    steps: int | None = None
    """A step-based run's training steps: its one epoch is that stretch of steps."""
    step_marker: str | None = None
    """How an instrumented script's steps were marked: ``optimizer``, ``backward`` or ``explicit``."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunHeader:
        known = {k: d.get(k) for k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class RunTimings:
    """Everything a log tells about one run (one instance type x batch size x repetition)."""

    name: str
    dialect: str = "unknown"
    computing_system: str | None = None
    """Seed VMTYPE (``p3-1``), from the file/job name or given by the caller."""
    batch_size: int | None = None
    run_index: int | None = None
    header: RunHeader = field(default_factory=RunHeader)
    init_s: float | None = None
    fit_s: float | None = None
    total_s: float | None = None
    model_save_s: float | None = None
    real_time: list[float] | array | JoinedStamps = field(default_factory=list)
    """All wall-clock stamps in log order; the seeds' largest_real_time_delta is last - first.
    A list, an ``array('d')`` or a :class:`JoinedStamps` view of the epochs' stamps (the parser's
    choice: EC2 logs print one stamp per step); read it as a sequence of floats."""
    epochs: list[Epoch] = field(default_factory=list)
    """Epochs of the primary rank (rank 0, or the only rank the log shows)."""
    ranks: dict[int, list[Epoch]] = field(default_factory=dict)
    """Epochs of every rank when the log has per-rank data (includes the primary rank)."""
    status: Status = "complete"
    failure_reason: str | None = None
    prediction: dict[str, Any] | None = None
    """The early-stop prediction the training container wrote into the log, if any."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Namespaced values the parser found but the model has no field for."""
    problems: list[Problem] = field(default_factory=list)
    bytes_read: int = 0
    lines_read: int = 0
    sha256: str | None = None

    # ---- derived values ----------------------------------------------------------------------

    @property
    def steps_total(self) -> int:
        return sum(e.steps for e in self.epochs)

    @property
    def largest_real_time_delta(self) -> float | None:
        if len(self.real_time) < 1:
            return None
        return self.real_time[-1] - self.real_time[0]

    def flat_steps(self) -> array:
        """All step times of the primary rank, epoch after epoch."""
        out = array("d")
        for e in self.epochs:
            out.extend(e.step_s)
        return out

    def iter_steps(self) -> Iterator[array]:
        """The primary rank's step times epoch by epoch (:meth:`flat_steps` without one big copy)."""
        for e in self.epochs:
            yield e.step_s

    def add_problem(self, code: str, message: str, line: int | None = None, severity: Severity = "warning"):
        self.problems.append(Problem(code, message, line, severity))

    # ---- the run record ----------------------------------------------------------------------

    def record_items(self) -> dict[str, Any]:
        """:meth:`to_record`'s keys and values in its order, without copying the step data: ``real_time``
        as held, ``epochs`` and each of ``ranks`` as lists of :class:`Epoch` (whose
        :meth:`Epoch.record_items` give their entries). For writing a record piece by piece."""
        return {
            "kind": RECORD_KIND,
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "dialect": self.dialect,
            "computing_system": self.computing_system,
            "batch_size": self.batch_size,
            "run_index": self.run_index,
            "header": self.header.to_dict(),
            "init_s": _finite_or_none(self.init_s),
            "fit_s": _finite_or_none(self.fit_s),
            "total_s": _finite_or_none(self.total_s),
            "model_save_s": _finite_or_none(self.model_save_s),
            "real_time": self.real_time,
            "epochs": self.epochs,
            "ranks": {str(r): eps for r, eps in self.ranks.items() if eps is not self.epochs},
            "status": self.status,
            "failure_reason": self.failure_reason,
            "prediction": self.prediction,
            "extra": self.extra,
            "problems": [p.to_dict() for p in self.problems],
            "bytes_read": self.bytes_read,
            "lines_read": self.lines_read,
            "sha256": self.sha256,
        }

    def to_record(self) -> dict[str, Any]:
        """The schema-versioned JSON-able run record (``runs/<name>.json``)."""
        d = self.record_items()
        d["real_time"] = list(self.real_time)
        d["epochs"] = [e.to_dict() for e in self.epochs]
        d["ranks"] = {r: [e.to_dict() for e in eps] for r, eps in d["ranks"].items()}
        return d

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> RunTimings:
        """Read a run record; raises :class:`RecordVersionError` for an unknown schema version."""
        if d.get("kind") != RECORD_KIND:
            raise RecordVersionError(f"not a trainsweep run record (kind={d.get('kind')!r})")
        if d.get("schema_version") != SCHEMA_VERSION:
            raise RecordVersionError(
                f"run record schema version {d.get('schema_version')!r} is not supported "
                f"(this trainsweep reads version {SCHEMA_VERSION})"
            )
        epochs = [Epoch.from_dict(e) for e in d.get("epochs", [])]
        ranks = {int(r): [Epoch.from_dict(e) for e in eps] for r, eps in d.get("ranks", {}).items()}
        if ranks and 0 not in ranks:
            ranks[0] = epochs
        return cls(
            name=d["name"],
            dialect=d.get("dialect", "unknown"),
            computing_system=d.get("computing_system"),
            batch_size=d.get("batch_size"),
            run_index=d.get("run_index"),
            header=RunHeader.from_dict(d.get("header", {})),
            init_s=d.get("init_s"),
            fit_s=d.get("fit_s"),
            total_s=d.get("total_s"),
            model_save_s=d.get("model_save_s"),
            real_time=list(d.get("real_time", [])),
            epochs=epochs,
            ranks=ranks,
            status=d.get("status", "complete"),
            failure_reason=d.get("failure_reason"),
            prediction=d.get("prediction"),
            extra=d.get("extra", {}),
            problems=[Problem.from_dict(p) for p in d.get("problems", [])],
            bytes_read=d.get("bytes_read", 0),
            lines_read=d.get("lines_read", 0),
            sha256=d.get("sha256"),
        )


def _finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
