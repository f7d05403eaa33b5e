"""Reader of ``:::MLLOG {json}`` lines (MLPerf logging; the trainsweep container's structured events).

The vocabulary is :mod:`trainsweep.logs.mllog`. A line may carry a prefix (``0: :::MLLOG ...`` from a
launcher, a CloudWatch time stamp): the token is found anywhere in the line. ``metadata.rank`` selects
the rank; without it a launcher's rank prefix (``0: ``, ``[3] ``) does, else rank 0. ``metadata.epoch_num``
the epoch; epoch numbers are 1-based, and a log whose epochs start at 0 is shifted by one so that indexes
match the seed layout.

An MLPerf result log (one with ``run_start``) is also read as MLPerf defines it (:class:`MlperfRun`):
``run_stop``'s status, the time to train ``run_stop - run_start``, the blocks (``block_start``/``block_stop``)
with their samples and throughput, every evaluation's accuracy, the system of ``:::SYSJSON``.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from typing import Any

from trainsweep.logs import mllog, native
from trainsweep.logs.limits import MAX_EPOCHS, MAX_PROBLEMS_PER_CODE, MAX_RANKS, ProblemLog
from trainsweep.logs.lines import LineCounter
from trainsweep.logs.model import Epoch, RunHeader
from trainsweep.logs.numbers import duration_problem

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

        if key == mllog.STEP:
            self._step(rank, meta, value)
        elif key in _INSTRUMENTED:
            self._instrumented(key, rank, meta, value)
        elif key == mllog.EPOCH_START:
            ep = self._epoch(rank, meta)
            self._current_epoch[rank] = ep.index
            self._pending.pop(rank, None)
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
            if "epoch_num" in meta or not self.mlperf.started:  # MLPerf may count samples instead
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
                if isinstance(status, str) and (rank == 0 or self.run_stop_status is None):
                    self.run_stop_status = status  # rank 0's word wins
        elif key in _MLPERF_KEYS:
            pass  # read by self.mlperf above
        elif key.startswith(mllog.METRIC_PREFIX) and "epoch_num" in meta:
            self._metric(key[len(mllog.METRIC_PREFIX) :], rank, meta, value)
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
        self._step(
            rank,
            {"epoch_num": epoch},
            {
                "step": ep.steps + 1,
                "step_s": seconds,
                "data_wait_s": pending.get(mllog.LOAD_BATCH_MEM),
                "compute_s": pending.get(mllog.ALL_COMPUTE),
            },
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

    @property
    def has_data(self) -> bool:
        return self.records > 0


def _prefix_rank(region: bytes, token_at: int) -> int | None:
    """The rank of a launcher prefix (``0: ``, ``[3] ``) when that is all that precedes the token."""
    start = region.rfind(b"\n", 0, token_at) + 1
    if start == token_at:
        return None
    m = _RANK_PREFIX.fullmatch(region, start, token_at)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


_INSTRUMENTED = frozenset({mllog.LOAD_BATCH_MEM, mllog.ALL_COMPUTE, mllog.STEP_END})
_MLPERF_KEYS = frozenset(
    {mllog.RUN_START, mllog.RUN_STOP, mllog.BLOCK_START, mllog.BLOCK_STOP, mllog.EVAL_ACCURACY}
)
MAX_BLOCKS = 10_000
"""Blocks and evaluations kept per run (a real MLPerf run has tens to a few thousand)."""


class MlperfRun:
    """A log read as MLPerf defines a run (the MLPerf Training rules and ``mlperf-logging``):

    - the time to train is ``run_stop - run_start`` (rank 0's, else the first seen), the benchmark's score
      for one run; the status is ``run_stop``'s ``metadata.status`` (``success`` or ``aborted``);
    - a block is ``block_start``..``block_stop``; its samples are ``metadata.samples_count`` of its stop
      minus its start's (large-language and diffusion models count samples), else ``epoch_count`` x
      ``train_samples`` (a block of whole epochs: ``first_epoch_num``, ``epoch_count``); its throughput is
      samples over its wall time;
    - every ``eval_accuracy`` is one evaluation, at the epoch or sample count its metadata gives.
    """

    def __init__(self) -> None:
        self.run_start_ms: float | None = None
        self.run_stop_ms: float | None = None
        self.status: str | None = None
        self.blocks: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self.system: dict[str, Any] | None = None
        self._open: dict[str, Any] | None = None

    @property
    def started(self) -> bool:
        return self.run_start_ms is not None

    def record(self, key: str, value: Any, meta: dict[str, Any], time_ms: Any, rank: int) -> None:
        if key == mllog.RUN_START:
            if time_ms is not None and (self.run_start_ms is None or rank == 0):
                self.run_start_ms = float(time_ms)
        elif key == mllog.RUN_STOP:
            if time_ms is not None and (self.run_stop_ms is None or rank == 0):
                self.run_stop_ms = float(time_ms)
                status = meta.get("status")
                self.status = status if isinstance(status, str) else None
        elif rank != 0 or time_ms is None:
            return  # blocks and evaluations: rank 0's (every rank logs the same ones)
        elif key == mllog.BLOCK_START:
            self._open = {
                "start_ms": float(time_ms),
                "first_epoch_num": _number(meta.get("first_epoch_num")),
                "epoch_count": _number(meta.get("epoch_count")),
                "samples_count": _number(meta.get("samples_count")),
            }
        elif key == mllog.BLOCK_STOP:
            opened, self._open = self._open, None
            if opened is not None and len(self.blocks) < MAX_BLOCKS:
                opened["stop_ms"] = float(time_ms)
                opened["stop_samples_count"] = _number(meta.get("samples_count"))
                self.blocks.append(opened)
        elif key == mllog.EVAL_ACCURACY and value is not None and len(self.evals) < MAX_BLOCKS:
            acc = float(value)
            if math.isfinite(acc):
                at: dict[str, Any] = {
                    k: _number(meta[k]) for k in ("epoch_num", "samples_count") if k in meta
                }
                if isinstance(meta.get("metric"), str):  # a benchmark with two metrics (FID and CLIP)
                    at["metric"] = meta["metric"][:80]
                self.evals.append({"accuracy": acc, "time_ms": float(time_ms), **at})

    def summary(self, train_samples: int | None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The ``run.extra["mlperf"]`` entry and the problems (code, message) found making it."""
        problems: list[tuple[str, str]] = []
        start = self.run_start_ms
        ttt = None
        if start is not None and self.run_stop_ms is not None:
            ttt = (self.run_stop_ms - start) / 1000.0
            why = duration_problem(ttt)
            if why is not None:
                problems.append(("absurd-value", f"run_stop - run_start = {ttt!r} s {why}: no time to train"))
                ttt = None
        in_samples = self._epochs_count_samples(train_samples)
        if in_samples:
            problems.append(
                (
                    "mlperf-epochs-in-samples",
                    f"the first block starts at epoch {self.blocks[0]['first_epoch_num']:g} = train_samples: "
                    "this log's first_epoch_num and epoch_count count samples, read as such",
                )
            )
        blocks = [self._block(b, i, train_samples, in_samples) for i, b in enumerate(self.blocks)]
        timed = [b for b in blocks if b["samples"] is not None and b["duration_s"] > 0]
        secs = sum(b["duration_s"] for b in timed)
        evals = [
            {k: v for k, v in e.items() if k != "time_ms"}
            | {"at_s": (e["time_ms"] - start) / 1000.0 if start is not None else None}
            for e in self.evals
        ]
        entry = {
            "status": self.status,
            "time_to_train_s": ttt,
            "run_start_ms": start,
            "run_stop_ms": self.run_stop_ms,
            "blocks": blocks,
            "samples_per_s": sum(b["samples"] for b in timed) / secs if secs > 0 else None,
            "evals": evals,
            "system": self.system,
        }
        return entry, problems

    def _epochs_count_samples(self, train_samples: int | None) -> bool:
        first = self.blocks[0]["first_epoch_num"] if self.blocks else None
        return bool(train_samples and first is not None and first not in (0, 1) and first == train_samples)

    def _block(
        self, b: dict[str, Any], i: int, train_samples: int | None, in_samples: bool
    ) -> dict[str, Any]:
        samples = None
        start_count = b["samples_count"]
        if start_count is None and i > 0:
            start_count = self.blocks[i - 1]["stop_samples_count"]
        if b["stop_samples_count"] is not None and start_count is not None:
            samples = b["stop_samples_count"] - start_count
        elif b["epoch_count"] is not None:
            samples = (
                b["epoch_count"]
                if in_samples
                else (b["epoch_count"] * train_samples if train_samples else None)
            )
        duration = (b["stop_ms"] - b["start_ms"]) / 1000.0
        start = self.run_start_ms
        return {
            "first_epoch_num": b["first_epoch_num"],
            "epoch_count": b["epoch_count"],
            "samples": samples,
            "start_s": (b["start_ms"] - start) / 1000.0 if start is not None else None,
            "duration_s": duration,
            "samples_per_s": samples / duration if samples is not None and duration > 0 else None,
        }


def _number(v: Any) -> float | int | None:
    """A metadata count as logged (int or float), None when absent or not a finite number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if isinstance(v, int) or math.isfinite(v) else None


def system_facts(desc: dict[str, Any], source: str) -> dict[str, Any]:
    """What an MLPerf system description (``systems/<system>.json``, ``:::SYSJSON``) says about the
    run's hardware: name, submitter, status (``onprem``, ``cloud``...), nodes, accelerators per node,
    accelerator."""

    def count(k: str) -> int | None:
        try:
            n = int(str(desc.get(k, "")).strip())
        except ValueError:
            return None
        return n if n > 0 else None

    def text(k: str) -> str | None:
        v = desc.get(k)
        return str(v).strip()[:200] or None if v is not None else None

    nodes, per_node = count("number_of_nodes"), count("accelerators_per_node")
    return {
        "system_name": text("system_name"),
        "submitter": text("submitter"),
        "status": text("status"),
        "nodes": nodes,
        "accelerators_per_node": per_node,
        "accelerators": nodes * per_node if nodes and per_node else None,
        "accelerator": text("accelerator_model_name"),
        "source": source,
    }


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
