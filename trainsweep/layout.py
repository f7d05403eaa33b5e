"""The S3 key layout and file names: the single source of truth for every path.

Every part (container, Lambdas, CLI, local mode) builds and reads keys through this module.
A *results root* is ``sweeps/<sweep-id>/results/`` in S3 and the ``--out`` folder of
``trainsweep import`` on disk; everything below it has the same relative layout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote_plus

SWEEPS_PREFIX = "sweeps/"
IMPORTS_PREFIX = "imports/"
DATA_PREFIX = "data/"
PRICES_KEY = "prices/prices.json"
"""The stack's price cache (a ``trainsweep.prices`` catalogue): PlanSweep keeps the AWS Pricing API's
answers there, ``trainsweep prices refresh --stack`` uploads the user's; not a trigger prefix."""
LOGS_DIR = "logs"
RESULTS_DIR = "results"

# Prefixes that trigger processing (S3 ObjectCreated -> ParseLog). Outputs never go below them.
TRIGGER_SUFFIX_LOG = ".log"

# Object tag of raw-log uploads (``PutObject(Tagging=RAW_LOG_TAGGING)``): the bucket's optional raw-log
# expiry matches it, because S3 lifecycle filters cannot say ``sweeps/*/logs/``.
RAW_LOG_TAG_KEY = "trainsweep-kind"
RAW_LOG_TAG_VALUE = "raw-log"
RAW_LOG_TAGGING = f"{RAW_LOG_TAG_KEY}={RAW_LOG_TAG_VALUE}"
RAW_LOG_CHECKSUM = "SHA256"
"""``PutObject(ChecksumAlgorithm=...)`` of the container's log uploads: S3 keeps the whole log's SHA-256,
which ParseRun's resumed parse takes as the run's ``sha256`` (:mod:`trainsweep.aws.growing`)."""

# Relative names below a results root.
EXECUTION_TIMES_DIR = "execution-times"
RUNS_DIR = "runs"
PLOTS_DIR = "plots"
SWEEP_CSV = "sweep.csv"
SWEEP_JSON = "sweep.json"
SWEEP_PARQUET = "sweep.parquet"
RUNS_PARQUET = "runs.parquet"
REPORT_HTML = "report.html"
QUALITY_JSON = "quality.json"
SPEC_JSON = "spec.json"
JOBS_JSON = "jobs.json"

# `result-<VMTYPE>-<BS>-e<N>` as the seed scripts named logs (VMTYPE is family-GPUs, e.g. p3-1),
# also the older EC2 form `result-<GPUS>-<BS>-e<N>` (VMTYPE then comes from the folder name).
# The VMTYPE may carry an ``-ec2`` suffix (a run on plain EC2): ``result-p2-1-ec2-2048-e0.txt``.
SEED_LOG_NAME = re.compile(
    r"^result-(?:(?P<vmtype>[A-Za-z0-9.]+(?:-[A-Za-z0-9.]+)?(?:-ec2)?)-)?(?P<bs>\d+)-e(?P<run>\d+)"
    r"(?:\.(?:txt|out|log))?$"
)
# The seeds' SageMaker job names: ``<model>-<family>-gpu<N>-b<BS>-e<N>`` (``resnet50-p3-gpu4-b512-e0``).
SEED_JOB_NAME = re.compile(r"^[A-Za-z0-9]+-(?P<vmtype>[a-z0-9]+-gpu\d+)-b(?P<bs>\d+)-e(?P<run>\d+)$")
# trainsweep job names end with `-<VMTYPE>-<BS>-e<N>` (or `-<VMTYPE>-packed-e<N>` for packed jobs).
JOB_NAME_TAIL = re.compile(r"-(?P<vmtype>[a-z0-9]+-[a-z0-9]+)-(?P<bs>\d+|packed)-e(?P<run>\d+)$")


@dataclass(frozen=True)
class CellName:
    """What a log's name says about its run: VMTYPE, batch size and repetition index."""

    vmtype: str | None
    batch_size: int | None
    run: int | None


def parse_seed_log_name(name: str) -> CellName | None:
    """Read VMTYPE/BS/N from a ``result-VMTYPE-BS-eN.txt`` file name (basename only)."""
    m = SEED_LOG_NAME.match(name)
    if not m:
        return None
    return CellName(m.group("vmtype"), int(m.group("bs")), int(m.group("run")))


def parse_job_name(job_name: str) -> CellName | None:
    """Read VMTYPE/BS/N from a trainsweep job name (BS is None for packed jobs) or a seed's SageMaker job
    name (``resnet50-p3-gpu4-b512-e0``: VMTYPE ``p3-gpu4``)."""
    seed = SEED_JOB_NAME.match(job_name)
    if seed:
        return CellName(seed.group("vmtype"), int(seed.group("bs")), int(seed.group("run")))
    m = JOB_NAME_TAIL.search(job_name)
    if not m:
        return None
    bs = m.group("bs")
    return CellName(m.group("vmtype"), None if bs == "packed" else int(bs), int(m.group("run")))


# ---- sweep keys ---------------------------------------------------------------------------------


def sweep_prefix(sweep_id: str) -> str:
    return f"{SWEEPS_PREFIX}{sweep_id}/"


def spec_key(sweep_id: str) -> str:
    return f"{sweep_prefix(sweep_id)}{SPEC_JSON}"


def jobs_key(sweep_id: str) -> str:
    """The planned job list (job name -> cell), written by PlanSweep, read by ParseLog/Aggregate."""
    return f"{sweep_prefix(sweep_id)}{JOBS_JSON}"


def logs_prefix(sweep_id: str) -> str:
    return f"{sweep_prefix(sweep_id)}{LOGS_DIR}/"


def log_key(sweep_id: str, job_name: str) -> str:
    return f"{logs_prefix(sweep_id)}{job_name}{TRIGGER_SUFFIX_LOG}"


MAP_DIR = "map"


def map_prefix(sweep_id: str, execution: str) -> str:
    """One execution's fan-out files: the job lists its Distributed Maps read (``jobs-<n>.json``) and
    the results they write (``results/``). Not a trigger prefix; only the state machine and
    AggregateSweep read it."""
    return f"{sweep_prefix(sweep_id)}{MAP_DIR}/{execution}/"


def map_jobs_key(sweep_id: str, execution: str, group: int) -> str:
    """The JSON array of one instance-type group's jobs (the items of its Distributed Map)."""
    return f"{map_prefix(sweep_id, execution)}jobs-{group}.json"


def map_results_prefix(sweep_id: str, execution: str) -> str:
    """The Distributed Maps' ``ResultWriter`` prefix (each map run writes ``<run id>/manifest.json``)."""
    return f"{map_prefix(sweep_id, execution)}results/"


def results_prefix(sweep_id: str) -> str:
    return f"{sweep_prefix(sweep_id)}{RESULTS_DIR}/"


PARSE_STATE_DIR = "parse-state"
PARSE_STATE_SUFFIX = ".state"


def parse_state_key(sweep_id: str, run_name: str) -> str:
    """``sweeps/<id>/parse-state/<run>.state``: ParseRun's parse of the last version of a run's growing
    log that it read (:mod:`trainsweep.logs.resume`), which the next version resumes from. Written and
    read by ParseRun only; not a trigger prefix, not a result (downloads leave it out)."""
    return f"{sweep_prefix(sweep_id)}{PARSE_STATE_DIR}/{run_name}{PARSE_STATE_SUFFIX}"


def is_parse_state_key(sweep_id: str, key: str) -> bool:
    return key.startswith(f"{sweep_prefix(sweep_id)}{PARSE_STATE_DIR}/")


CHECKPOINTS_DIR = "checkpoints"
OUTPUT_DIR = "output"


def checkpoint_prefix(sweep_id: str, job_name: str) -> str:
    """Managed-spot checkpoints; not a trigger prefix."""
    return f"{sweep_prefix(sweep_id)}{CHECKPOINTS_DIR}/{job_name}/"


def output_prefix(sweep_id: str) -> str:
    """SageMaker's ``OutputDataConfig.S3OutputPath`` for a sweep's jobs (each job's ``model.tar.gz`` and
    ``output.tar.gz``); not a trigger prefix."""
    return f"{sweep_prefix(sweep_id)}{OUTPUT_DIR}/"


def is_model_key(sweep_id: str, key: str) -> bool:
    """Whether a key under the sweep holds what its jobs trained (models, job outputs, checkpoints):
    large, and downloaded only when asked."""
    return key.startswith((output_prefix(sweep_id), f"{sweep_prefix(sweep_id)}{CHECKPOINTS_DIR}/"))


JOB_OUTPUT_DIR = "job-output"
"""Local mode only, in a downloaded sweep's folder: ``job-output/<job name>/<host>.txt`` is everything a
job's processes wrote to stdout and stderr (its CloudWatch stream in the cloud), and
``job-output/<job name>/cells/<run>.output.txt`` each cell's own output. Not an S3 key of the sweep."""


def job_output_dir(job_name: str) -> str:
    """``job-output/<job name>``, relative to a local sweep's folder."""
    return f"{JOB_OUTPUT_DIR}/{job_name}"


CODE_DIR = "code"


def code_prefix(sweep_id: str) -> str:
    """Where ``trainsweep run`` uploads a script's packed source dir; read by the training jobs; not a
    trigger prefix."""
    return f"{sweep_prefix(sweep_id)}{CODE_DIR}/"


def code_key(sweep_id: str, digest: str) -> str:
    """``sweeps/<id>/code/sourcedir-<digest>.tar.gz``: content-hashed, so a re-upload of the same tree
    rewrites the same key with the same bytes."""
    return f"{code_prefix(sweep_id)}sourcedir-{digest}.tar.gz"


def data_prefix(sweep_id: str) -> str:
    """Where local mode uploads a ``file://`` data channel: ``data/<sweep-id>/``; not a trigger prefix and
    outside ``sweeps/<id>/``, so downloading the results does not copy the data back."""
    return f"{DATA_PREFIX}{sweep_id}/"


def import_results_sweep_id(import_name: str) -> str:
    """Logs uploaded under ``imports/<name>/`` are analysed as the sweep ``import-<name>``."""
    return f"import-{import_name}"


# ---- paths relative to a results root ------------------------------------------------------------


def execution_times_path(
    vmtype: str, batch_size: int | str, run: int, ext: str, setting: Sequence[tuple[str, str]] = ()
) -> str:
    """``execution-times/<VMTYPE>/<BS>/e<N>.<ext>`` (ext: json, summary, png).

    A run of a sweep with axes has its setting's seed tree: ``execution-times/<axis>=<value>/.../<VMTYPE>/
    <BS>/e<N>.<ext>``, one folder level per axis (``dtype=bfloat16/compile=true/``), so that runs of two
    settings never share a file and each setting's folder is the seed layout."""
    tree = "".join(f"{name}={value}/" for name, value in setting)
    return f"{EXECUTION_TIMES_DIR}/{tree}{vmtype}/{batch_size}/e{run}.{ext}"


def run_record_path(run_name: str) -> str:
    return f"{RUNS_DIR}/{run_name}.json"


def plot_path(name: str) -> str:
    return f"{PLOTS_DIR}/{name}.png"


def results_key(sweep_id: str, relative_path: str) -> str:
    return f"{results_prefix(sweep_id)}{relative_path}"


# ---- classifying incoming keys -------------------------------------------------------------------


@dataclass(frozen=True)
class LogLocation:
    """Where a raw log sits: which sweep it belongs to and the run's name."""

    sweep_id: str
    run_name: str
    is_import: bool


def classify_log_key(key: str) -> LogLocation | None:
    """Map a (possibly URL-encoded) S3 key of a raw log to its sweep and run; None if not a log key.

    ``sweeps/<id>/logs/<job>.log`` -> (id, job); ``imports/<name>/.../<file>`` -> (import-<name>, file stem).
    """
    key = unquote_plus(key)
    parts = key.split("/")
    if key.startswith(SWEEPS_PREFIX) and len(parts) == 4 and parts[2] == LOGS_DIR and parts[3]:
        name = parts[3]
        stem = name[: -len(TRIGGER_SUFFIX_LOG)] if name.endswith(TRIGGER_SUFFIX_LOG) else name
        return LogLocation(parts[1], stem, False)
    if key.startswith(IMPORTS_PREFIX) and len(parts) >= 3 and parts[1] and parts[-1]:
        stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1] else parts[-1]
        return LogLocation(import_results_sweep_id(parts[1]), stem, True)
    return None
