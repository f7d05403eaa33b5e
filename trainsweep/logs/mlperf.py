"""Reader of ``:::MLLOG {json}`` lines (MLPerf logging; the trainsweep container's structured events).

The vocabulary is :mod:`trainsweep.logs.mllog`. A line may carry a prefix (``0: :::MLLOG ...`` from a
launcher, a CloudWatch time stamp): the token is found anywhere in the line. ``metadata.rank`` selects
the rank; without it a launcher's rank prefix (``0: ``, ``[3] ``) does, else rank 0. ``metadata.epoch_num``
the epoch; epoch numbers are 1-based, and a log whose epochs start at 0 is shifted by one so that indexes
match the seed layout.

An MLPerf result log (one with ``run_start``) is also read as MLPerf defines it
(:class:`~trainsweep.logs.mlperf_result.MlperfRun`):
``run_stop``'s status, the time to train ``run_stop - run_start``, the blocks (``block_start``/``block_stop``)
with their samples and throughput, every evaluation's accuracy, the system of ``:::SYSJSON``.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from trainsweep.logs import checks, mllog, mlperf_result, native
from trainsweep.logs.limits import MAX_EPOCHS, MAX_PROBLEMS_PER_CODE, MAX_RANKS, ProblemLog
from trainsweep.logs.lines import LineCounter
from trainsweep.logs.mlperf_result import KEYS as _MLPERF_KEYS
from trainsweep.logs.mlperf_result import MlperfRun, system_facts
from trainsweep.logs.model import Epoch, Problem, RunHeader, RunTimings
from trainsweep.logs.numbers import duration_problem
from trainsweep.logs.ranks import ranks_to_run

DIALECT = "mllog"
TOKEN = mllog.TOKEN.encode()
_LINE = re.compile(re.escape(TOKEN) + rb"[ \t]*([^\n]*)")
_RANK_PREFIX = re.compile(rb"[ \t]*(?:\[(\d{1,9})\]|(\d{1,9}):)[ \t]*")
"""A launcher's rank prefix, the whole of what precedes the token: ``0: `` (srun, mpirun) or ``[0] ``."""
SYSJSON = b":::SYSJSON"
_COLONS = b":::"
"""What both :data:`SYSJSON` and :data:`TOKEN` begin with."""
_SYSJSON_LINE = re.compile(re.escape(SYSJSON) + rb"[ \t]*([^\n]*)")

_RUN_DURATIONS = {
    mllog.INIT_TIME: "init_s",
    mllog.FIT_TIME: "fit_s",
    mllog.TOTAL_TIME: "total_s",
    mllog.MODEL_SAVE_TIME: "model_save_s",
}
_HEADER_INTS = {
    mllog.GLOBAL_BATCH_SIZE: "batch_size",
    mllog.TRAIN_SAMPLES: "train_samples",
    mllog.EVAL_SAMPLES: "eval_samples",
    mllog.EPOCH_COUNT: "epochs",
    mllog.TRAIN_STEPS: "steps",
    mllog.GPUS: "gpus",
    mllog.WORLD_SIZE: "world_size",
}
_HEADER_STRS = {
    mllog.INSTANCE_TYPE: "instance_type",
    mllog.WORKLOAD: "workload",
    mllog.COMMAND_LINE: "command_line",
    mllog.STEP_MARKER: "step_marker",
}


class MllogReader:
    """Collects per-rank epochs, the header, the prediction and a failure from MLLOG records."""

    name: ClassVar[str] = DIALECT
    precedence: ClassVar[int] = 0

    def __init__(self) -> None:
        self.ranks: dict[int, dict[int, Epoch]] = {}
        self.header = RunHeader()
        self.durations: dict[str, float] = {}
        self.real_time: list[float] = []
        self.prediction: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.run_stop_status: str | None = None
        self.extra: dict[str, Any] = {}
        self.problems = ProblemLog()
        self.records = 0
        self._epochs = 0
        self._current_epoch: dict[int, int] = {}
        self._pending: dict[int, dict[str, float]] = {}
        """Per rank, the instrumented durations (data wait, compute) of the step not yet ended."""
        self.init_start_ms: float | None = None
        self.init_stop_ms: float | None = None
        self.min_epoch_num: int | None = None
        self.mlperf = MlperfRun()
        self.seen: set[str] = set()
        """The keys with a handler that were read (:func:`checks.missing_events`)."""

    def feed(self, region: bytes, newlines_before: int) -> None:
        if not native.has(region, _COLONS):
            return  # neither SYSJSON nor TOKEN: one search instead of two (most logs have neither)
        if self.mlperf.system is None and native.has(region, SYSJSON):
            self._sysjson(region)
        if not native.has(region, TOKEN):
            return
        lc = LineCounter(region, newlines_before)
        for m in _LINE.finditer(region):
            try:
                payload = m.group(1)
                rec = mllog.parse_payload(payload.decode("utf-8").strip())
                at = m.start()
                # A token at the start of its line (the container's logs) has no prefix to read.
                prefix = None if at == 0 or region[at - 1] == 10 else _prefix_rank(region, at)
                self._record(rec, len(payload), prefix)
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
                msg = f"unreadable MLLOG record: {exc}"[:300]
                self.problems.append(Problem("bad-mllog", msg, lc.at(m.start())))
                continue
            except _AbsurdValueError as exc:
                self.problems.append(Problem("absurd-value", str(exc), lc.at(m.start())))
                continue
            except _AbsurdStructureError as exc:
                self.problems.append(Problem("absurd-structure", str(exc), lc.at(m.start())))
                continue
            self.records += 1

    # ---- one record --------------------------------------------------------------------------

    def _sysjson(self, region: bytes) -> None:
        """The first ``:::SYSJSON {json}`` line: the system description NVIDIA's launcher prints."""
        for m in _SYSJSON_LINE.finditer(region):
            try:
                desc = json.loads(m.group(1).decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            if isinstance(desc, dict):
                self.mlperf.system = system_facts(desc, ":::SYSJSON line of the log")
                return

    def _record(self, rec: dict[str, Any], size: int, prefix_rank: int | None = None) -> None:
        """One record: its key's handler (:data:`_HANDLERS`), else a metric or another key."""
        key = rec["key"]
        value: Any = rec.get("value")  # any JSON: a use of the wrong type raises, reported as unreadable
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise ValueError("metadata is not an object")
        said = meta.get("rank")
        rank = int(said or 0) if said is not None or prefix_rank is None else prefix_rank
        time_ms = rec.get("time_ms")
        stamp = None
        if isinstance(time_ms, (int, float)) and math.isfinite(time_ms):
            stamp = float(time_ms) / 1000.0
        if key in _MLPERF_KEYS:
            self.mlperf.record(key, value, meta, time_ms if stamp is not None else None, rank)
        handler = _HANDLERS.get(key)
        if handler is not None:
            handler(self, key, value, meta, rank, time_ms, stamp)
            self.seen.add(key)
        elif key.startswith(mllog.METRIC_PREFIX) and "epoch_num" in meta:
            self._metric(key[len(mllog.METRIC_PREFIX) :], rank, meta, value)
        else:
            self._other(key, value, size)

    # ---- one handler a key (:data:`_HANDLERS`) ---------------------------------------------------

    def _on_instrumented(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self._instrumented(key, rank, meta, value)

    def _on_epoch_start(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        ep = self._epoch(rank, meta)
        self._current_epoch[rank] = ep.index
        self._pending.pop(rank, None)
        if stamp is not None:
            ep.start_time = stamp
            self._stamp(ep, stamp, rank)

    def _on_epoch_stop(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        ep = self._epoch(rank, meta)
        if stamp is not None:
            ep.end_time = stamp
            self._stamp(ep, stamp, rank)

    def _on_epoch_time(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self._epoch(rank, meta).epoch_s = _duration(key, value)

    def _on_validation_time(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self._epoch(rank, meta).validation_s = _duration(key, value)

    def _on_eval_accuracy(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        if value is None:  # a run without evaluation data logs the key with no value
            return
        acc = float(value)
        if not math.isfinite(acc):
            raise _AbsurdValueError(f"{key} {acc!r} is not finite; ignored")
        if "epoch_num" in meta or not self.mlperf.started:  # MLPerf may count samples instead
            self._epoch(rank, meta).validation_accuracy = acc

    def _on_run_duration(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        if rank == 0 or _RUN_DURATIONS[key] not in self.durations:
            self.durations[_RUN_DURATIONS[key]] = _duration(key, value)

    def _on_header_int(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        setattr(self.header, _HEADER_INTS[key], int(value))

    def _on_header_str(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        setattr(self.header, _HEADER_STRS[key], str(value))

    def _on_prediction(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        if not isinstance(value, dict):
            raise ValueError("prediction value is not an object")
        self.prediction = value

    def _on_failure(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self.failure = value if isinstance(value, dict) else {"reason": str(value)}

    def _on_init_start(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self.init_start_ms = float(time_ms) if time_ms is not None else None

    def _on_init_stop(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        self.init_stop_ms = float(time_ms) if time_ms is not None else None

    def _on_run_start_or_stop(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        if stamp is not None and rank == 0:
            self.real_time.append(stamp)
        if key == mllog.RUN_STOP:
            status = meta.get("status")
            if isinstance(status, str) and (rank == 0 or self.run_stop_status is None):
                self.run_stop_status = status  # rank 0's word wins

    def _on_mlperf_only(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        """A key only :class:`MlperfRun` reads (blocks): read there already."""

    def _other(self, key: str, value: Any, size: int) -> None:
        """A key with no handler: kept in :attr:`extra` (bounded)."""
        if size > MAX_EXTRA_BYTES:
            raise _AbsurdStructureError(
                f"a record of {size} bytes for the other key {str(key)[:80]!r}: ignored"
            )
        if key in self.extra or len(self.extra) < MAX_EXTRA_KEYS:
            self.extra[key] = value
        else:
            raise _AbsurdStructureError(
                f"more than {MAX_EXTRA_KEYS} other keys: {str(key)[:80]!r} is ignored"
            )

    def _metric(self, name: str, rank: int, meta: dict[str, Any], value: Any) -> None:
        """A named metric of an epoch (rank 0's): kept per epoch in ``extra[METRIC_SERIES]``, and its last
        value under its own key (``trainsweep.metric.<name>``), as a run's other keys are."""
        v = float(value)
        if not math.isfinite(v):
            raise _AbsurdValueError(f"metric {name[:80]!r} {v!r} is not finite; ignored")
        if rank != 0:
            return
        index = self._epoch(rank, meta).index
        series: dict[str, dict[str, float]] = self.extra.setdefault(mllog.METRIC_SERIES, {})
        if name not in series and len(series) >= MAX_METRICS:
            raise _AbsurdStructureError(f"more than {MAX_METRICS} metrics: {name[:80]!r} is ignored")
        series.setdefault(name, {})[str(index)] = v
        self.extra[mllog.METRIC_PREFIX + name] = v

    def _epoch(self, rank: int, meta: dict[str, Any]) -> Epoch:
        num = meta.get("epoch_num")
        if num is None:
            raise KeyError("metadata.epoch_num is missing")
        index = int(num)
        if self.min_epoch_num is None or index < self.min_epoch_num:
            self.min_epoch_num = index
        eps = self.ranks.get(rank)
        if eps is None:
            if len(self.ranks) >= MAX_RANKS:
                raise _AbsurdStructureError(
                    f"more than {MAX_RANKS} ranks: not a real run; rank {rank} is ignored"
                )
            eps = self.ranks[rank] = {}
        ep = eps.get(index)
        if ep is None:
            if self._epochs >= MAX_EPOCHS:
                raise _AbsurdStructureError(
                    f"more than {MAX_EPOCHS} epochs: not a real run; the record is ignored"
                )
            self._epochs += 1
            ep = eps[index] = Epoch(index=index)
        return ep

    def _on_step(
        self, key: str, value: Any, meta: dict[str, Any], rank: int, time_ms: Any, stamp: float | None
    ) -> None:
        """A step (``trainsweep.step``): its time, number and, when timed, data wait and compute."""
        if not isinstance(value, dict):
            raise ValueError("step value is not an object")
        step_s = _duration("step_s", value["step_s"])
        number = int(value.get("step", 0))
        wait = value.get("data_wait_s")
        comp = value.get("compute_s")
        wait_f = _duration("data_wait_s", wait) if wait is not None else math.nan
        comp_f = _duration("compute_s", comp) if comp is not None else math.nan
        ep = self._epoch(rank, meta)
        n = len(ep.step_s)
        if wait is not None and ep.data_wait_s is None:
            ep.data_wait_s = array("d", [math.nan] * n)
        if comp is not None and ep.compute_s is None:
            ep.compute_s = array("d", [math.nan] * n)
        ep.step_s.append(step_s)
        # An epoch this parser made holds an array (only cloudml and pattern store ranges).
        ep.step_numbers.append(number)  # type: ignore[union-attr]
        if ep.data_wait_s is not None:
            ep.data_wait_s.append(wait_f)
        if ep.compute_s is not None:
            ep.compute_s.append(comp_f)

    def _instrumented(self, key: str, rank: int, meta: dict[str, Any], value: Any) -> None:
        """A McGill per-step duration: ``load_batch_mem`` and ``all_compute`` wait for their step's
        ``step_end``, which makes the step (in the rank's current epoch: the last ``epoch_start``)."""
        if not isinstance(value, dict):
            raise ValueError(f"{key} value is not an object")
        seconds = _duration(key, float(value["duration"]) / 1e9)
        if key != mllog.STEP_END:
            self._pending.setdefault(rank, {})[key] = seconds
            return
        pending = self._pending.pop(rank, {})
        epoch = meta.get("epoch_num", self._current_epoch.get(rank, 1))
        ep = self._epoch(rank, {"epoch_num": epoch})
        self._on_step(
            mllog.STEP,
            {
                "step": ep.steps + 1,
                "step_s": seconds,
                "data_wait_s": pending.get(mllog.LOAD_BATCH_MEM),
                "compute_s": pending.get(mllog.ALL_COMPUTE),
            },
            {"epoch_num": epoch},
            rank,
            None,
            None,
        )

    def _stamp(self, ep: Epoch, stamp: float, rank: int) -> None:
        ep.real_time.append(stamp)
        if rank == 0:
            self.real_time.append(stamp)

    # ---- result ------------------------------------------------------------------------------

    def finish(self) -> None:
        """Shift 0-based epoch numbers to 1-based; derive init time from init_start/init_stop."""
        if self.min_epoch_num == 0:
            for rank, eps in self.ranks.items():
                shifted = {}
                for idx, ep in eps.items():
                    ep.index = idx + 1
                    shifted[idx + 1] = ep
                self.ranks[rank] = shifted
        start, stop = self.init_start_ms, self.init_stop_ms
        if "init_s" not in self.durations and start is not None and stop is not None:
            d = (stop - start) / 1000.0
            if duration_problem(d) is None:
                self.durations["init_s"] = d

    # ---- the plug-in's answers (:mod:`trainsweep.logs.dialects`) ------------------------------------

    def steps_read(self) -> int | None:
        """The steps read, all ranks together; None when the log holds no readable MLLOG record."""
        if self.records == 0:
            return None
        return sum(e.steps for eps in self.ranks.values() for e in eps.values())

    def to_run(self, run: RunTimings, path: Path | None) -> None:
        """Write what was read into ``run``: the ranks (rank 0's epochs are the run's), the header, the
        durations, the prediction, a failure; an MLPerf result log's reading (:mod:`.mlperf_result`)."""
        run.dialect = DIALECT
        run.header = self.header
        ranks_to_run(run, self.ranks)
        for attr, v in self.durations.items():
            setattr(run, attr, v)
        run.real_time = self.real_time
        run.prediction = self.prediction
        run.extra.update(self.extra)
        if self.failure is not None:
            run.status = "failed"
            reason = str(self.failure.get("reason") or "the training container reported a failure")
            kind = self.failure.get("kind")
            run.failure_reason = reason
            if kind:
                run.extra["failure_kind"] = kind
            run.add_problem("failed", f"the job failed ({kind or 'error'}): {reason}", None, "error")
        elif self.run_stop_status not in (None, "success"):
            run.status = "failed"
            run.failure_reason = f"run_stop status {self.run_stop_status}"
            run.add_problem("failed", f"the run stopped with status {self.run_stop_status!r}", None, "error")
        if mllog.SUBMISSION_BENCHMARK in self.extra:
            mlperf_result.to_run(run, self.mlperf, self.extra, path)

    def check(self, run: RunTimings) -> bool:
        """The quality checks of the run's shape and events (:func:`checks.structured_shape`); True: it is
        partial."""
        # the run-wide events are rank 0's: a log of other ranks' steps alone has none to miss
        return checks.structured_shape(run, self.seen if 0 in self.ranks else ())


def _prefix_rank(region: bytes, token_at: int) -> int | None:
    """The rank of a launcher prefix (``0: ``, ``[3] ``) when that is all that precedes the token."""
    start = region.rfind(b"\n", 0, token_at) + 1
    if start == token_at:
        return None
    m = _RANK_PREFIX.fullmatch(region, start, token_at)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


_HANDLERS: dict[str, Callable[[MllogReader, str, Any, dict[str, Any], int, Any, float | None], None]] = {
    mllog.STEP: MllogReader._on_step,
    mllog.LOAD_BATCH_MEM: MllogReader._on_instrumented,
    mllog.ALL_COMPUTE: MllogReader._on_instrumented,
    mllog.STEP_END: MllogReader._on_instrumented,
    mllog.EPOCH_START: MllogReader._on_epoch_start,
    mllog.EPOCH_STOP: MllogReader._on_epoch_stop,
    mllog.EPOCH_TIME: MllogReader._on_epoch_time,
    mllog.VALIDATION_TIME: MllogReader._on_validation_time,
    mllog.EVAL_ACCURACY: MllogReader._on_eval_accuracy,
    **dict.fromkeys(_RUN_DURATIONS, MllogReader._on_run_duration),
    **dict.fromkeys(_HEADER_INTS, MllogReader._on_header_int),
    **dict.fromkeys(_HEADER_STRS, MllogReader._on_header_str),
    mllog.PREDICTION: MllogReader._on_prediction,
    mllog.FAILURE: MllogReader._on_failure,
    mllog.INIT_START: MllogReader._on_init_start,
    mllog.INIT_STOP: MllogReader._on_init_stop,
    mllog.RUN_START: MllogReader._on_run_start_or_stop,
    mllog.RUN_STOP: MllogReader._on_run_start_or_stop,
    mllog.BLOCK_START: MllogReader._on_mlperf_only,
    mllog.BLOCK_STOP: MllogReader._on_mlperf_only,
}
"""What each key's record does to the reader. A key not here is a named metric
(``trainsweep.metric.<name>`` with an ``epoch_num``) or another key, kept in ``run.extra``."""


class _AbsurdValueError(Exception):
    pass


class _AbsurdStructureError(Exception):
    """More ranks, epochs or keys than a real run has (:mod:`trainsweep.logs.limits`)."""


MAX_EXTRA_KEYS = MAX_PROBLEMS_PER_CODE
"""Other keys kept in ``run.extra`` (the container writes about ten)."""
MAX_METRICS = 64
"""Named metrics kept per epoch (``extra[METRIC_SERIES]``; SageMaker allows 40 metric definitions)."""
MAX_EXTRA_BYTES = 1 << 16
"""The largest record of another key kept in ``run.extra`` (a key's value is a few bytes to a few KB;
100 keys of megabytes of JSON each would cost several times that in Python objects)."""


def _duration(key: str, value: Any) -> float:
    v = float(value)
    why = duration_problem(v)
    if why is not None:
        raise _AbsurdValueError(f"{key} {v!r} {why}; the record is ignored")
    return v
