"""Reader of ``:::MLLOG {json}`` lines (MLPerf logging; the trainsweep container's structured events).

The vocabulary is :mod:`trainsweep.logs.mllog`. A line may carry a prefix (``0: :::MLLOG ...`` from a
launcher, a CloudWatch time stamp): the token is found anywhere in the line. ``metadata.rank`` selects
the rank (0 when absent), ``metadata.epoch_num`` the epoch; epoch numbers are 1-based, and a log whose
epochs start at 0 is shifted by one so that indexes match the seed layout.
"""

from __future__ import annotations

import math
import re
from array import array
from typing import Any

from trainsweep.logs import mllog
from trainsweep.logs.limits import MAX_EPOCHS, MAX_PROBLEMS_PER_CODE, MAX_RANKS, ProblemLog
from trainsweep.logs.lines import LineCounter
from trainsweep.logs.model import Epoch, RunHeader
from trainsweep.logs.numbers import duration_problem

DIALECT = "mllog"
TOKEN = mllog.TOKEN.encode()
_LINE = re.compile(re.escape(TOKEN) + rb"[ \t]*([^\n]*)")

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
    mllog.GPUS: "gpus",
    mllog.WORLD_SIZE: "world_size",
}
_HEADER_STRS = {
    mllog.INSTANCE_TYPE: "instance_type",
    mllog.WORKLOAD: "workload",
    mllog.COMMAND_LINE: "command_line",
}


class MllogReader:
    """Collects per-rank epochs, the header, the prediction and a failure from MLLOG records."""

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
        self.init_start_ms: float | None = None
        self.init_stop_ms: float | None = None
        self.min_epoch_num: int | None = None

    def feed(self, region: bytes, newlines_before: int) -> None:
        if TOKEN not in region:
            return
        lc = LineCounter(region, newlines_before)
        for m in _LINE.finditer(region):
            try:
                payload = m.group(1)
                rec = mllog.parse_payload(payload.decode("utf-8").strip())
                self._record(rec, len(payload))
            except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
                msg = f"unreadable MLLOG record: {exc}"[:300]
                self.problems.append(("bad-mllog", msg, lc.at(m.start()), "warning"))
                continue
            except _AbsurdValueError as exc:
                self.problems.append(("absurd-value", str(exc), lc.at(m.start()), "warning"))
                continue
            except _AbsurdStructureError as exc:
                self.problems.append(("absurd-structure", str(exc), lc.at(m.start()), "warning"))
                continue
            self.records += 1

    # ---- one record --------------------------------------------------------------------------

    def _record(self, rec: dict[str, Any], size: int) -> None:
        key = rec["key"]
        value: Any = rec.get("value")  # any JSON: a use of the wrong type raises, reported as unreadable
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise ValueError("metadata is not an object")
        rank = int(meta.get("rank", 0) or 0)
        time_ms = rec.get("time_ms")
        stamp = None
        if isinstance(time_ms, (int, float)) and math.isfinite(time_ms):
            stamp = float(time_ms) / 1000.0

        if key == mllog.STEP:
            self._step(rank, meta, value)
        elif key == mllog.EPOCH_START:
            ep = self._epoch(rank, meta)
            if stamp is not None:
                ep.start_time = stamp
                self._stamp(ep, stamp, rank)
        elif key == mllog.EPOCH_STOP:
            ep = self._epoch(rank, meta)
            if stamp is not None:
                ep.end_time = stamp
                self._stamp(ep, stamp, rank)
        elif key == mllog.EPOCH_TIME:
            self._epoch(rank, meta).epoch_s = _duration(key, value)
        elif key == mllog.VALIDATION_TIME:
            self._epoch(rank, meta).validation_s = _duration(key, value)
        elif key == mllog.EVAL_ACCURACY:
            if value is None:  # a run without evaluation data logs the key with no value
                return
            acc = float(value)
            if not math.isfinite(acc):
                raise _AbsurdValueError(f"{key} {acc!r} is not finite; ignored")
            self._epoch(rank, meta).validation_accuracy = acc
        elif key in _RUN_DURATIONS:
            if rank == 0 or _RUN_DURATIONS[key] not in self.durations:
                self.durations[_RUN_DURATIONS[key]] = _duration(key, value)
        elif key in _HEADER_INTS:
            setattr(self.header, _HEADER_INTS[key], int(value))
        elif key in _HEADER_STRS:
            setattr(self.header, _HEADER_STRS[key], str(value))
        elif key == mllog.PREDICTION:
            if not isinstance(value, dict):
                raise ValueError("prediction value is not an object")
            self.prediction = value
        elif key == mllog.FAILURE:
            self.failure = value if isinstance(value, dict) else {"reason": str(value)}
        elif key == mllog.INIT_START:
            self.init_start_ms = float(time_ms) if time_ms is not None else None
        elif key == mllog.INIT_STOP:
            self.init_stop_ms = float(time_ms) if time_ms is not None else None
        elif key in (mllog.RUN_START, mllog.RUN_STOP):
            if stamp is not None and rank == 0:
                self.real_time.append(stamp)
            if key == mllog.RUN_STOP:
                status = meta.get("status")
                if isinstance(status, str):
                    self.run_stop_status = status
        elif size > MAX_EXTRA_BYTES:
            raise _AbsurdStructureError(
                f"a record of {size} bytes for the other key {str(key)[:80]!r}: ignored"
            )
        elif key in self.extra or len(self.extra) < MAX_EXTRA_KEYS:
            self.extra[key] = value
        else:
            raise _AbsurdStructureError(
                f"more than {MAX_EXTRA_KEYS} other keys: {str(key)[:80]!r} is ignored"
            )

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

    def _step(self, rank: int, meta: dict[str, Any], value: Any) -> None:
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

    @property
    def has_data(self) -> bool:
        return self.records > 0


class _AbsurdValueError(Exception):
    pass


class _AbsurdStructureError(Exception):
    """More ranks, epochs or keys than a real run has (:mod:`trainsweep.logs.limits`)."""


MAX_EXTRA_KEYS = MAX_PROBLEMS_PER_CODE
"""Other keys kept in ``run.extra`` (the container writes about ten)."""
MAX_EXTRA_BYTES = 1 << 16
"""The largest record of another key kept in ``run.extra`` (a key's value is a few bytes to a few KB;
100 keys of megabytes of JSON each would cost several times that in Python objects)."""


def _duration(key: str, value: Any) -> float:
    v = float(value)
    why = duration_problem(v)
    if why is not None:
        raise _AbsurdValueError(f"{key} {v!r} {why}; the record is ignored")
    return v
