"""A built-in job's settings, read from its hyperparameters (the files and environment of a job:
:mod:`trainsweep.sagemaker_contract`). This module imports no torch: the supervisor validates the job
before any worker starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

from trainsweep import hyperparameters as hp
from trainsweep import workloads
from trainsweep.errors import TrainsweepError
from trainsweep.predict import StopRule
from trainsweep.sagemaker_contract import JOB_NAME_ENV, Paths

DEFAULT_RUN_NAME = "trainsweep-run"
TRAIN_CHANNEL = "train"
WORKLOADS = workloads.NAMES
MODES = ("full", "early-stop")
DEFAULT_LOG_UPLOAD_S = 30.0


class JobConfigError(TrainsweepError):
    """The job's hyperparameters or inputs are not usable; the message says which and what to do."""


@dataclass(frozen=True)
class Cell:
    """One batch size of a job and the run name its log is delivered under."""

    run_name: str
    batch_size: int
    axes: tuple[tuple[str, Any], ...] = ()
    """The cell's setting of the spec's axes, ``(name, value)`` pairs (empty without axes)."""

    @property
    def setting(self) -> dict[str, Any]:
        return dict(self.axes)


@dataclass(frozen=True)
class JobConfig:
    """Everything the worker needs, validated."""

    workload: str
    epochs: int
    cells: tuple[Cell, ...]
    mode: str = "full"
    synthetic: bool = False
    synthetic_samples: int | None = None
    num_gpus: int = 0
    learning_rate: float | None = None
    max_steps_per_epoch: int | None = None
    max_eval_batches: int | None = None
    rule: StopRule = field(default_factory=StopRule)
    log_bucket: str | None = None
    log_prefix: str = ""
    log_upload_s: float = DEFAULT_LOG_UPLOAD_S
    download: bool = False
    packed: bool = False
    seed: int = 0
    target_accuracy: float | None = None
    """Full mode: stop after the first evaluation at or above it (MLPerf's time-to-train)."""
    search_min_gain: float | None = None
    """Packed: a batch-size search (``batch_sizes: auto``): the cells double; stop at the first out of
    memory, or when two doublings in a row gain less than this share of throughput."""
    dtype: str = "float32"
    """The precision the cells train in unless their setting says otherwise."""
    compile: bool = False
    """Whether the cells' model runs through ``torch.compile`` unless their setting says otherwise."""
    num_workers: int | None = None
    """Loader worker processes of the cells' data unless their setting says otherwise (None: the data
    stays in device memory; :mod:`trainsweep.training.loader`)."""
    raw: dict[str, str] = field(default_factory=dict)

    def num_workers_of(self, cell: Cell) -> int | None:
        """``cell``'s loader worker processes: its setting's ``num_workers``, else the job's."""
        value = cell.setting.get(hp.NUM_WORKERS, self.num_workers)
        return None if value is None else int(value)

    def dtype_of(self, cell: Cell) -> str:
        """The precision ``cell`` trains in: its setting's ``dtype``, else the job's."""
        return str(cell.setting.get(hp.DTYPE, self.dtype))

    def compile_of(self, cell: Cell) -> bool:
        """Whether ``cell``'s model is compiled: its setting's ``compile``, else the job's."""
        value = cell.setting.get(hp.COMPILE, self.compile)
        return value if isinstance(value, bool) else bool(hp.parse_value(hp.COMPILE, str(value)))

    def to_json(self) -> str:
        d = {
            "workload": self.workload,
            "epochs": self.epochs,
            "cells": [[c.run_name, c.batch_size, c.setting] for c in self.cells],
            "mode": self.mode,
            "synthetic": self.synthetic,
            "synthetic_samples": self.synthetic_samples,
            "num_gpus": self.num_gpus,
            "learning_rate": self.learning_rate,
            "max_steps_per_epoch": self.max_steps_per_epoch,
            "max_eval_batches": self.max_eval_batches,
            "rule": self.rule.__dict__,
            "log_bucket": self.log_bucket,
            "log_prefix": self.log_prefix,
            "log_upload_s": self.log_upload_s,
            "download": self.download,
            "packed": self.packed,
            "seed": self.seed,
            "target_accuracy": self.target_accuracy,
            "search_min_gain": self.search_min_gain,
            "dtype": self.dtype,
            "compile": self.compile,
            "num_workers": self.num_workers,
            "raw": self.raw,
        }
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> JobConfig:
        d = json.loads(text)
        return cls(
            workload=d["workload"],
            epochs=d["epochs"],
            cells=tuple(Cell(c[0], c[1], tuple((c[2] if len(c) > 2 else {}).items())) for c in d["cells"]),
            mode=d["mode"],
            synthetic=d["synthetic"],
            synthetic_samples=d.get("synthetic_samples"),
            num_gpus=d["num_gpus"],
            learning_rate=d["learning_rate"],
            max_steps_per_epoch=d["max_steps_per_epoch"],
            max_eval_batches=d["max_eval_batches"],
            rule=StopRule(**d["rule"]),
            log_bucket=d["log_bucket"],
            log_prefix=d["log_prefix"],
            log_upload_s=d["log_upload_s"],
            download=d["download"],
            packed=d["packed"],
            seed=d["seed"],
            target_accuracy=d.get("target_accuracy"),
            search_min_gain=d.get("search_min_gain"),
            dtype=d.get("dtype", "float32"),
            compile=d.get("compile", False),
            num_workers=d.get("num_workers"),
            raw=d["raw"],
        )


def read_hyperparameters(paths: Paths) -> dict[str, str]:
    """The hyperparameters file as a dict of strings; raises :class:`JobConfigError` if unusable."""
    try:
        text = paths.hyperparameters.read_text()
    except FileNotFoundError:
        raise JobConfigError(f"hyperparameters file not found: {paths.hyperparameters}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise JobConfigError(f"hyperparameters file is not JSON ({e}): {paths.hyperparameters}") from None
    if not isinstance(data, dict):
        raise JobConfigError("hyperparameters file must hold a JSON object of name -> string")
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}


def run_names_hint(raw: dict[str, str]) -> list[str]:
    """Run names to deliver logs under, even when the rest of the configuration is invalid."""
    given = raw.get(hp.RUN_NAMES) or raw.get(hp.RESERVED_PREFIX + hp.RUN_NAMES) or ""  # built-in or script
    names = [n.strip() for n in given.split(",") if n.strip()]
    return names or [os.environ.get(JOB_NAME_ENV) or DEFAULT_RUN_NAME]


def _value(raw: dict[str, str], name: str, default: Any) -> Any:
    """``raw[name]`` read by the shared rule of :func:`hp.parse_value`, or ``default`` when unset."""
    value = raw.get(name)
    if value is None or value == "":
        return default
    try:
        return hp.parse_value(name, str(value))
    except ValueError as exc:
        raise JobConfigError(f"hyperparameter {name!r} {exc}") from None


def _int(raw: dict[str, str], name: str, default: int | None = None) -> int:
    if default is None and raw.get(name) in (None, ""):
        minimum = hp.WHOLE_NUMBER_MINIMUM[name]
        raise JobConfigError(f"missing hyperparameter {name!r}: set it to a whole number >= {minimum}")
    return _value(raw, name, default)


@overload
def _float(raw: dict[str, str], name: str, default: float) -> float: ...
@overload
def _float(raw: dict[str, str], name: str, default: None) -> float | None: ...
def _float(raw: dict[str, str], name: str, default: float | None) -> float | None:
    return _value(raw, name, default)


def _search_gain(raw: dict[str, str]) -> float | None:
    text = (raw.get(hp.BATCH_SIZE_SEARCH) or "").strip().strip('"')
    if not text:
        return None
    try:
        gain = float(text)
    except ValueError:
        raise JobConfigError(
            f"hyperparameter {hp.BATCH_SIZE_SEARCH!r} must be a number, got {text!r}"
        ) from None
    if not 0 <= gain < 1:
        raise JobConfigError(f"hyperparameter {hp.BATCH_SIZE_SEARCH!r} is a share in [0, 1), got {text!r}")
    return gain


def _bool(raw: dict[str, str], name: str, default: bool) -> bool:
    return _value(raw, name, default)


def cell_settings(raw: dict[str, str], cells: int, key: str = hp.AXES) -> list[dict[str, Any]]:
    """Each cell's setting of the spec's axes from the job's ``trainsweep-axes`` (aligned with its run
    names); empty settings when the job has none.

    Raises:
        JobConfigError: not a JSON list of one object per cell.
    """
    text = (raw.get(key) or "").strip()
    if not text:
        return [{} for _ in range(cells)]
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobConfigError(f"hyperparameter {key!r} is not JSON ({exc})") from None
    if (
        not isinstance(settings, list)
        or len(settings) != cells
        or not all(isinstance(s, dict) for s in settings)
    ):
        raise JobConfigError(
            f"hyperparameter {key!r} must list one object per run name ({cells}), got {text[:200]!r}"
        )
    return settings


STOP_RULE_HYPERPARAMETERS = {
    hp.EARLY_STOP_PRECISION: "precision",
    hp.EARLY_STOP_MAX_STEPS: "max_steps",
    hp.EARLY_STOP_MAX_SECONDS: "max_seconds",
    hp.EARLY_STOP_MAX_EPOCHS: "max_epochs",
    hp.EARLY_STOP_MIN_SECONDS: "min_seconds",
    hp.EARLY_STOP_MIN_STEPS: "min_steady_steps",
    hp.VALIDATION_BATCHES: "validation_batches",
}
"""Hyperparameter -> :class:`StopRule` field (a script job carries them as ``trainsweep-<name>``)."""


def stop_rule(value: Callable[[str], Any]) -> StopRule:
    """The early-stop rule from ``value(hyperparameter name)`` (None: the rule's default)."""
    given = {field_: value(name) for name, field_ in STOP_RULE_HYPERPARAMETERS.items()}
    return StopRule(**{k: v for k, v in given.items() if v is not None})


def _check_settings(raw: dict[str, str], settings: list[dict[str, Any]], synthetic: bool) -> None:
    """The cells' settings of the axes a built-in reads, by the rules of the job's own hyperparameters."""
    workers = _value(raw, hp.NUM_WORKERS, None)  # the value's own error first
    for setting in settings:
        if synthetic and (hp.NUM_WORKERS in setting or workers is not None):
            raise JobConfigError(
                hp.synthetic_workers_refused(f"set {hp.SYNTHETIC}=false and give the job data")
            )
        for name in (hp.DTYPE, hp.COMPILE, hp.NUM_WORKERS):
            if name in setting:
                _value({name: str(setting[name]).lower()}, name, None)  # the same rule as the job's own


def parse_config(raw: dict[str, str], paths: Paths) -> JobConfig:
    """Validate the hyperparameters into a :class:`JobConfig`; raises :class:`JobConfigError`."""
    workload, mode = _workload_and_mode(raw)
    epochs = _int(raw, hp.EPOCHS)
    names, sizes, packed = _runs(raw)
    synthetic = _bool(raw, hp.SYNTHETIC, False)
    synthetic_samples = _int(raw, hp.SYNTHETIC_SAMPLES, 0) or None
    if synthetic_samples and not synthetic:
        raise JobConfigError(
            f"{hp.SYNTHETIC_SAMPLES!r} sizes the synthetic dataset: set {hp.SYNTHETIC}=true too"
        )
    rule = stop_rule(lambda name: _value(raw, name, None))
    download = _download(raw, paths, synthetic)
    settings = cell_settings(raw, len(names))
    _check_settings(raw, settings, synthetic)
    return JobConfig(
        workload=workload,
        epochs=epochs,
        cells=tuple(Cell(n, b, tuple(s.items())) for n, b, s in zip(names, sizes, settings, strict=True)),
        mode=mode,
        synthetic=synthetic,
        synthetic_samples=synthetic_samples,
        num_gpus=_int(raw, hp.NUM_GPUS, 0),
        learning_rate=_float(raw, hp.LEARNING_RATE, None),
        max_steps_per_epoch=_int(raw, hp.MAX_STEPS_PER_EPOCH, 0) or None,
        max_eval_batches=_int(raw, hp.MAX_EVAL_BATCHES, 0) or None,
        rule=rule,
        log_bucket=(raw.get(hp.LOG_BUCKET) or "").strip() or None,
        log_prefix=(raw.get(hp.LOG_PREFIX) or "").strip(),
        log_upload_s=_float(raw, hp.LOG_UPLOAD_SECONDS, DEFAULT_LOG_UPLOAD_S),
        download=download,
        packed=packed,
        seed=_int(raw, hp.SEED, 0),
        target_accuracy=_float(raw, hp.TARGET_ACCURACY, None),
        search_min_gain=_search_gain(raw),
        dtype=_value(raw, hp.DTYPE, "float32"),
        compile=_bool(raw, hp.COMPILE, False),
        num_workers=_value(raw, hp.NUM_WORKERS, None),
        raw=dict(raw),
    )


def _workload_and_mode(raw: dict[str, str]) -> tuple[str, str]:
    """The built-in workload the job trains and its mode (full or early-stop)."""
    workload = str(raw.get(hp.WORKLOAD, "")).strip().strip('"')
    if not workload:
        raise JobConfigError(f"missing hyperparameter {hp.WORKLOAD!r}: one of {', '.join(WORKLOADS)}")
    if workload not in WORKLOADS:
        raise JobConfigError(f"unknown workload {workload!r}: this container runs {', '.join(WORKLOADS)}")
    mode = str(raw.get(hp.MODE, "full")).strip().strip('"') or "full"
    if mode not in MODES:
        raise JobConfigError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    return workload, mode


def _runs(raw: dict[str, str]) -> tuple[list[str], list[int], bool]:
    """(run names, their batch sizes, whether the job is packed: several batch sizes in one job)."""
    names = [n.strip() for n in raw.get(hp.RUN_NAMES, "").split(",") if n.strip()]
    packed = bool(raw.get(hp.BATCH_SIZES, "").strip())
    if packed:
        try:
            sizes = [int(s) for s in raw[hp.BATCH_SIZES].split(",") if s.strip()]
        except ValueError:
            raise JobConfigError(
                f"hyperparameter {hp.BATCH_SIZES!r} must be comma-separated whole numbers, "
                f"got {raw[hp.BATCH_SIZES]!r}"
            ) from None
        if any(s < 1 for s in sizes):
            raise JobConfigError(f"batch sizes must be >= 1, got {raw[hp.BATCH_SIZES]!r}")
        if len(names) != len(sizes):
            raise JobConfigError(
                f"{hp.RUN_NAMES!r} must name one run per batch size: {len(sizes)} batch sizes, "
                f"{len(names)} run names"
            )
    else:
        sizes = [_int(raw, hp.BATCH_SIZE)]
        names = names[:1] or run_names_hint(raw)
    if len(set(names)) != len(names):
        raise JobConfigError(f"run names must be unique, got {names}")
    return names, sizes, packed


def _download(raw: dict[str, str], paths: Paths, synthetic: bool) -> bool:
    """Whether the job downloads its dataset: only without a train channel and with real data (by
    default where the paths are SageMaker's own); neither a channel nor a download is an error."""
    if synthetic or paths.channel(TRAIN_CHANNEL).is_dir():
        return False
    download = _bool(raw, hp.DOWNLOAD, paths.is_default_base)
    if not download:
        raise JobConfigError(
            f"no data: channel {TRAIN_CHANNEL!r} is missing ({paths.channel(TRAIN_CHANNEL)}); "
            f"give the job a 'train' channel, set {hp.SYNTHETIC}=true for random data, "
            f"or {hp.DOWNLOAD}=true to download the dataset"
        )
    return download
