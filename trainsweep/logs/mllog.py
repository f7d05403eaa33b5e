"""The ``:::MLLOG`` line format: one token and one set of key names shared by writer and parser.

A line is ``:::MLLOG {json}`` with the fields of the ``mlperf-logging`` package: ``namespace``,
``time_ms``, ``event_type`` (``POINT_IN_TIME``, ``INTERVAL_START``, ``INTERVAL_END``), ``key``,
``value`` and ``metadata`` (``file``, ``lineno``, plus ``epoch_num``, ``step_num``, ``rank`` ...).
Keys the MLPerf vocabulary has are used as they are; trainsweep's own keys start with ``trainsweep.``.
The training container writes these next to the seeds' human-readable lines.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

TOKEN = ":::MLLOG"

POINT = "POINT_IN_TIME"
START = "INTERVAL_START"
END = "INTERVAL_END"

# mlperf-logging constants (same spelling as mlperf_logging.mllog.constants)
INIT_START = "init_start"
INIT_STOP = "init_stop"
RUN_START = "run_start"
RUN_STOP = "run_stop"
EPOCH_START = "epoch_start"
EPOCH_STOP = "epoch_stop"
BLOCK_START = "block_start"
BLOCK_STOP = "block_stop"
EVAL_START = "eval_start"
EVAL_STOP = "eval_stop"
EVAL_ACCURACY = "eval_accuracy"
GLOBAL_BATCH_SIZE = "global_batch_size"
TRAIN_SAMPLES = "train_samples"
EVAL_SAMPLES = "eval_samples"
EPOCH_COUNT = "epoch_count"
SUBMISSION_PLATFORM = "submission_platform"
SUBMISSION_BENCHMARK = "submission_benchmark"
SUBMISSION_ORG = "submission_org"
SUBMISSION_DIVISION = "submission_division"
SEED = "seed"

# The instrumented keys of the seed McGill tooling (MLPerf reference implementations instrumented per
# step): value {"duration": nanoseconds}; per step, loading the batch into memory, the computation, the
# whole step (its end).
LOAD_BATCH_MEM = "load_batch_mem"
ALL_COMPUTE = "all_compute"
STEP_END = "step_end"

# trainsweep's own keys
NS = "trainsweep."
STEP = NS + "step"
"""value: {"step": n, "step_s": s, "data_wait_s": s, "compute_s": s}; metadata: epoch_num, rank."""
WORKLOAD = NS + "workload"
INSTANCE_TYPE = NS + "instance_type"
GPUS = NS + "gpus"
WORLD_SIZE = NS + "world_size"
COMMAND_LINE = NS + "command_line"
INIT_TIME = NS + "init_s"
FIT_TIME = NS + "fit_s"
TOTAL_TIME = NS + "total_s"
MODEL_SAVE_TIME = NS + "model_save_s"
EPOCH_TIME = NS + "epoch_s"
VALIDATION_TIME = NS + "validation_s"
PREDICTION = NS + "prediction"
"""value: the early-stop prediction dict written by trainsweep.predict."""
TRAIN_STEPS = NS + "train_steps"
"""A step-based run's training steps (``workload.steps``): its one epoch is that stretch of steps."""
STEP_MARKER = NS + "step_marker"
"""How an instrumented script's steps were marked: ``optimizer`` (each ``optimizer.step()``), ``backward``
(each backward pass: no optimizer was built), ``explicit`` (the script or a framework callback)."""
BATCHES_PER_STEP = NS + "batches_per_step"
"""value: the batches one step of an instrumented script trains, over its first steps: its training loader's
batches per step, or without a loader its backward passes per step (above 1: gradient accumulation)."""
CPU_WAIT = NS + "cpu_wait"
"""value: {"run_s", "wait_s", "wait_share"}: rank 0's training process, on a CPU and waiting for one, from
the run's start to its end (:mod:`trainsweep.training.cpu_wait`); a high share: contended CPUs."""
GPU_MEMORY = NS + "gpu_memory"
PLATFORM = NS + "platform"
"""Where the run ran (``sagemaker``, ``ec2``, ``local``) when its name or folder says (``extra`` key)."""
"""value: {"peak_allocated_bytes", "peak_reserved_bytes", "total_bytes"} of rank 0's GPU over the whole run
(PyTorch's caching allocator; reserved is what the process held). Kept in ``run.extra`` under this key."""
MLPERF = NS + "mlperf"
"""``run.extra`` key of an MLPerf result log read as MLPerf defines a run
(:class:`trainsweep.logs.mlperf_result.MlperfRun`): benchmark, submitter, status, time to train, blocks,
evaluations, system."""
TARGET_REACHED = NS + "target_reached"
"""value: {"metric": "eval_accuracy", "target": x, "value": y, "epoch": k}: the run ended at its first
evaluation reaching the target (MLPerf's time-to-train), not after every announced epoch (``extra`` key)."""
ACCURACY_NAMES = frozenset(
    {"accuracy", "acc", "eval_accuracy", "eval_acc", "val_accuracy", "val_acc", "validation_accuracy"}
)
"""Metric names that are a run's evaluation accuracy: written and read as :data:`EVAL_ACCURACY`."""
METRIC_PREFIX = NS + "metric."
"""``trainsweep.metric.<name>``: a metric of an epoch (``epoch_num``) other than its accuracy, from the
script (``trainsweep.instrument.metric``) or from its output (``workload.metric_definitions``)."""
METRIC_SERIES = NS + "metric_series"
"""``run.extra`` key: ``{name: {epoch: value}}`` of the run's ``trainsweep.metric.<name>`` events (rank 0;
the last value of an epoch)."""
METRIC_UNMATCHED = NS + "metric_unmatched"
"""value: ``[{"metric": name, "regex": regex}, ...]``: metric definitions no line of the output matched."""
FLOPS = NS + "flops"
"""value: {"per_step", "per_sample", "precision", "device", "accelerators", "conv_share"}: the FLOPs of one
training step of the run, counted once (:mod:`trainsweep.instrument.flops`), or {"error": why}."""
TOKENS_PER_SAMPLE = NS + "tokens_per_sample"
"""value: the tokens one sample carries (a language model's sequence length), when the script says."""
MAX_SEQUENCE_LENGTH = "max_sequence_length"
"""The MLPerf key of a language-model benchmark's sequence length (its tokens per sample)."""
FAILURE = NS + "failure"
"""value: {"reason": str, "kind": "error" | "oom" | "timeout" | "stopped"}."""

REQUIRED_EVENTS = (INIT_START, INIT_STOP, RUN_START, EPOCH_START, STEP, RUN_STOP)
"""The events every run that trainsweep's timeline writer (:mod:`trainsweep.training.timeline`) saw to its
end holds, in the order they come; a full run also closes its epochs (:data:`EPOCH_STOP`), a run early
stop ended holds its :data:`PREDICTION` instead. :func:`trainsweep.logs.checks.missing_events` checks a
log against them."""


def required_events(*, early_stopped: bool) -> tuple[str, ...]:
    """The keys of :data:`REQUIRED_EVENTS` plus what the run's mode adds (see there)."""
    return REQUIRED_EVENTS + ((PREDICTION,) if early_stopped else (EPOCH_STOP,))


def format_line(
    key: str,
    value: Any = None,
    *,
    event_type: str = POINT,
    metadata: dict[str, Any] | None = None,
    time_ms: float | None = None,
) -> str:
    """One ``:::MLLOG`` line (no trailing newline)."""
    rec = {
        "namespace": "",
        "time_ms": int(time.time() * 1000) if time_ms is None else int(time_ms),
        "event_type": event_type,
        "key": key,
        "value": value,
        "metadata": metadata or {},
    }
    return f"{TOKEN} {json.dumps(rec, separators=(', ', ': '), allow_nan=False)}"


def format_step_line(epoch: int, n: int, step_s: float, wait_s: float, compute_s: float, rank: int) -> str:
    """A training step's ``:::MLLOG`` line: :func:`format_line`'s bytes for :data:`STEP`, built without the
    JSON encoder when the times are finite floats (a per-step cost a fast loop feels)."""
    # one test for the three (a sum of finite floats is finite unless it overflows: the encoder's path)
    if type(step_s) is type(wait_s) is type(compute_s) is float and math.isfinite(
        step_s + wait_s + compute_s
    ):
        return (
            f'{TOKEN} {{"namespace": "", "time_ms": {int(time.time() * 1000)}, "event_type": "{POINT}", '
            f'"key": "{STEP}", "value": {{"step": {int(n)}, "step_s": {step_s!r}, "data_wait_s": {wait_s!r}, '
            f'"compute_s": {compute_s!r}}}, "metadata": {{"rank": {int(rank)}, "epoch_num": {int(epoch)}}}}}'
        )
    value = {"step": n, "step_s": step_s, "data_wait_s": wait_s, "compute_s": compute_s}
    return format_line(STEP, value, metadata={"rank": rank, "epoch_num": epoch})  # the encoder says why not


def parse_payload(text: str) -> dict[str, Any]:
    """Decode what follows the token; raises ValueError on malformed JSON or a missing key."""
    rec = json.loads(text)
    if not isinstance(rec, dict) or "key" not in rec:
        raise ValueError("MLLOG record without a key")
    return rec
