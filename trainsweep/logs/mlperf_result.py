"""An MLPerf result log read as MLPerf defines a run, and that reading written into the run.

The MLLOG reader (:mod:`trainsweep.logs.mlperf`) hands every record of an MLPerf key (:data:`KEYS`) to
an :class:`MlperfRun`; when the log names its ``submission_benchmark``, :func:`to_run` puts the result in
``run.extra["trainsweep.mlperf"]`` and settles the run's batch size, GPUs and instance type from it and
from the submission's system description (``systems/<system>.json``, else the log's ``:::SYSJSON``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainsweep import instances
from trainsweep.logs import mllog
from trainsweep.logs.model import Problem, RunTimings
from trainsweep.logs.numbers import duration_problem

KEYS = frozenset({mllog.RUN_START, mllog.RUN_STOP, mllog.BLOCK_START, mllog.BLOCK_STOP, mllog.EVAL_ACCURACY})
"""The keys an :class:`MlperfRun` reads (the MLLOG reader also reads ``run_*`` and ``eval_accuracy``)."""

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
        """One record of an MLPerf key (:data:`KEYS`); ``time_ms`` None when the record has no usable time."""
        if time_ms is None:
            return
        if key == mllog.RUN_START:
            if self.run_start_ms is None or rank == 0:
                self.run_start_ms = float(time_ms)
        elif key == mllog.RUN_STOP:
            if self.run_stop_ms is None or rank == 0:
                self.run_stop_ms = float(time_ms)
                status = meta.get("status")
                self.status = status if isinstance(status, str) else None
        elif rank == 0:  # blocks and evaluations: rank 0's (every rank logs the same ones)
            _RANK_0_RECORDS[key](self, value, meta, float(time_ms))

    def _block_start(self, value: Any, meta: dict[str, Any], time_ms: float) -> None:
        self._open = {
            "start_ms": time_ms,
            "first_epoch_num": _number(meta.get("first_epoch_num")),
            "epoch_count": _number(meta.get("epoch_count")),
            "samples_count": _number(meta.get("samples_count")),
        }

    def _block_stop(self, value: Any, meta: dict[str, Any], time_ms: float) -> None:
        opened, self._open = self._open, None
        if opened is not None and len(self.blocks) < MAX_BLOCKS:
            opened["stop_ms"] = time_ms
            opened["stop_samples_count"] = _number(meta.get("samples_count"))
            self.blocks.append(opened)

    def _evaluation(self, value: Any, meta: dict[str, Any], time_ms: float) -> None:
        if value is None or len(self.evals) >= MAX_BLOCKS:
            return
        acc = float(value)
        if math.isfinite(acc):
            at: dict[str, Any] = {k: _number(meta[k]) for k in ("epoch_num", "samples_count") if k in meta}
            if isinstance(meta.get("metric"), str):  # a benchmark with two metrics (FID and CLIP)
                at["metric"] = meta["metric"][:80]
            self.evals.append({"accuracy": acc, "time_ms": time_ms, **at})

    def summary(self, train_samples: int | None) -> tuple[dict[str, Any], list[Problem]]:
        """The ``run.extra["mlperf"]`` entry and the problems found making it."""
        problems: list[Problem] = []
        start = self.run_start_ms
        ttt = None
        if start is not None and self.run_stop_ms is not None:
            ttt = (self.run_stop_ms - start) / 1000.0
            why = duration_problem(ttt)
            if why is not None:
                problems.append(
                    Problem("absurd-value", f"run_stop - run_start = {ttt!r} s {why}: no time to train")
                )
                ttt = None
        in_samples = self._epochs_count_samples(train_samples)
        if in_samples:
            problems.append(
                Problem(
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


_RANK_0_RECORDS: dict[str, Callable[[MlperfRun, Any, dict[str, Any], float], None]] = {
    mllog.BLOCK_START: MlperfRun._block_start,
    mllog.BLOCK_STOP: MlperfRun._block_stop,
    mllog.EVAL_ACCURACY: MlperfRun._evaluation,
}


def to_run(run: RunTimings, result: MlperfRun, extra: dict[str, Any], path: Path | None) -> None:
    """An MLPerf result log (``extra``, the log's other keys, names its ``submission_benchmark``): the run
    as MLPerf defines it, in ``run.extra[trainsweep.mlperf]``; the batch size is the global one; the system
    is the submission's ``systems/<system>.json`` beside ``results/<system>/<benchmark>/`` (else the log's
    ``:::SYSJSON``)."""
    entry, problems = result.summary(run.header.train_samples)
    run.problems.extend(problems)
    system = entry["system"]
    described = _system_file(run, path)
    if described is not None:
        entry["system"] = system = described
    info = {
        "benchmark": str(extra.get(mllog.SUBMISSION_BENCHMARK)),
        "submitter": extra.get(mllog.SUBMISSION_ORG),
        "division": extra.get(mllog.SUBMISSION_DIVISION),
        "platform": extra.get(mllog.SUBMISSION_PLATFORM),
    }
    if path is not None and len(path.parents) >= 3 and path.parents[2].name == "results":
        info["system_folder"] = path.parents[1].name  # results/<system>/<benchmark>/result_N.txt
    run.extra[mllog.MLPERF] = info | entry
    if run.batch_size is None:
        run.batch_size = run.header.batch_size
    if system is not None:
        if run.header.gpus is None:
            run.header.gpus = system["accelerators"]
        itype = _cloud_instance_type(system["system_name"])
        if itype is not None and run.header.instance_type is None:
            run.header.instance_type = itype
    if result.status is None and run.status == "complete":
        run.status = "partial"
        run.add_problem(
            "ends-early", "the log ends before run_stop: the run did not finish, it has no time to train"
        )


def _system_file(run: RunTimings, path: Path | None) -> dict[str, Any] | None:
    """``<submitter>/systems/<system>.json`` for a log at ``<submitter>/results/<system>/<benchmark>/``."""
    if path is None or len(path.parents) < 4 or path.parents[2].name != "results":
        return None
    described = path.parents[3] / "systems" / f"{path.parents[1].name}.json"
    if not described.is_file():
        return None
    where = f"systems/{described.name}"
    try:
        desc = json.loads(described.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        run.add_problem("mlperf-system", f"{where} beside the results cannot be read: {exc}"[:300])
        return None
    if not isinstance(desc, dict):
        run.add_problem("mlperf-system", f"{where} beside the results is not a JSON object")
        return None
    return system_facts(desc, where)


def _cloud_instance_type(system_name: str | None) -> str | None:
    """The SageMaker type an MLPerf system name spells exactly (``p5.48xlarge``, ``2xp5.48xlarge``: N
    nodes of it), else None: a system such as Oracle's ``BM.GPU.H100.8`` is not one, and is not guessed."""
    if not system_name:
        return None
    name = re.sub(r"^\d+x", "", system_name.strip())
    name = name if name.startswith("ml.") else "ml." + name
    return name if name in instances.CATALOGUE and not instances.CATALOGUE[name].is_local else None
