"""Script mode: what a user's training script sees (its arguments and the ``SM_*`` environment, with the
job's files and names from :mod:`trainsweep.sagemaker_contract`), and what trainsweep's launcher and
instrumentation hand each other.

A script written for SageMaker's PyTorch estimator reads its hyperparameters as ``--name value`` arguments
(sorted by name, as sagemaker-training-toolkit's ``to_cmd_args``) and its paths and hosts from ``SM_*``
variables. :func:`user_args` and :func:`sm_env` build exactly those, from the job's hyperparameters minus
the names reserved for the platform (``sagemaker_*``) and for trainsweep (``trainsweep-*``).

Between the container's supervisor and the instrumented user process, one JSON file travels
(:class:`InstrumentConfig`, path in ``TRAINSWEEP_INSTRUMENT``); the process answers with the cell status
file (:func:`cell_status_path`), the same one the built-in worker writes. This module imports no torch.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainsweep import sagemaker_contract as sm

# ---- hyperparameters of script mode (SageMaker SDK names first) -----------------------------------------

PROGRAM = "sagemaker_program"  # the entry point, relative to the source dir
SUBMIT_DIRECTORY = "sagemaker_submit_directory"  # s3://.../sourcedir.tar.gz (or a local path in tests)
PLATFORM_PREFIX = "sagemaker_"
TRAINSWEEP_PREFIX = "trainsweep-"

# trainsweep's own settings of a script job (never passed to the script)
RUN_NAMES = "trainsweep-run-names"  # comma-separated, one per batch size
BATCH_SIZES = "trainsweep-batch-sizes"  # comma-separated global batch sizes (one for a per-cell job)
EPOCHS = "trainsweep-epochs"
MODE = "trainsweep-mode"  # full | early-stop
BATCH_SIZE_ARG = "trainsweep-batch-size-arg"  # the script's argument name for the batch size
EPOCHS_ARG = "trainsweep-epochs-arg"  # the script's argument name for the epochs
REQUIREMENTS = "trainsweep-requirements"  # requirements file relative to the source dir ("" = none)
TARGET = "trainsweep-target"  # full mode: JSON {metric, value, direction}; the cell ends when it is reached
COMMAND = "trainsweep-command"  # workload.command: the command line template (JSON list of words)
STEPS = "trainsweep-steps"  # workload.steps: a step-based run (no epochs), its number of optimizer steps
METRIC_DEFINITIONS = "trainsweep-metric-definitions"  # JSON list of {name, regex} read from the output
STEPS_ARG = "trainsweep-steps-arg"  # the script's argument name for the steps ("" = none)
ARGUMENT_STYLE = "trainsweep-argument-style"  # space (--name value) | equals (--name=value)
FLAGS = "trainsweep-flags"  # JSON list: hyperparameters passed as bare --name (store_true), omitted if false
ARGUMENTS = "trainsweep-arguments"  # JSON list: positional arguments, before the options

DEFAULT_BATCH_SIZE_ARG = "batch-size"
DEFAULT_EPOCHS_ARG = "epochs"
DEFAULT_STEPS_ARG = "steps"
ARGUMENT_STYLES = ("space", "equals")

# ---- environment --------------------------------------------------------------------------------------

INSTRUMENT_ENV = "TRAINSWEEP_INSTRUMENT"
"""Path of the :class:`InstrumentConfig` JSON of the current cell; unset outside a trainsweep job."""
INSTALL_REQUIREMENTS_ENV = "TRAINSWEEP_INSTALL_REQUIREMENTS"
"""``0``: do not pip-install the script's requirements (local mode runs in the user's environment)."""
COMMAND_SCRIPT_ENV = "TRAINSWEEP_COMMAND_SCRIPT"
"""A command job: the absolute path of the script the command names (the process that is timed)."""
COMMAND_MODULE_ENV = "TRAINSWEEP_COMMAND_MODULE"
"""A command job: the module the command names (``python -m pkg.train``), when it names no script."""

INFEASIBLE = "infeasible"
"""A cell's status (and FAILURE kind) for a batch size the script cannot use: its training set holds
fewer samples than one batch. Beyond the edge of the batch sizes it can run, as out of memory is."""

# Exit codes shared by the built-in worker and the instrumented user process.
EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_OOM, EXIT_STOPPED = 0, 1, 2, 3, 143
DDP_AGREE_EVERY = 10
"""Under DDP, ranks agree on an early stop every this many steps (one all_reduce, not one per step)."""


def is_oom(e: BaseException) -> bool:
    """True for an out-of-memory error of the device or the host (torch's, Python's, or by its text)."""
    torch = sys.modules.get("torch")  # only a process that trains has torch loaded; never import it here
    if isinstance(e, MemoryError) or (torch is not None and isinstance(e, torch.OutOfMemoryError)):
        return True
    text = str(e).lower()
    return "out of memory" in text or "can't allocate memory" in text or "cannot allocate memory" in text


def oom_reason(batch_size: int | None, e: BaseException) -> str:
    """The cell's reason for an out-of-memory error: the batch size and the error's first line."""
    first = str(e).splitlines()[0][:300] if str(e).strip() else type(e).__name__
    return f"out of memory at batch size {batch_size}: {first}"


def is_reserved(name: str) -> bool:
    """True for hyperparameters that configure SageMaker or trainsweep, not the user's script."""
    return name.startswith(PLATFORM_PREFIX) or name.startswith(TRAINSWEEP_PREFIX)


def decode_value(text: str) -> Any:
    """A hyperparameter value as the toolkit reads it: JSON when it parses (the SDK encodes so), else text."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def user_hyperparameters(raw: dict[str, str]) -> dict[str, Any]:
    """The script's hyperparameters: every name that is not reserved, values decoded."""
    return {k: decode_value(v) for k, v in raw.items() if not is_reserved(k)}


def _arg_value(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return "" if value is None else str(value)


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def user_args(
    hps: dict[str, Any],
    *,
    style: str = "space",
    flags: tuple[str, ...] | list[str] = (),
    arguments: tuple[str, ...] | list[str] = (),
) -> list[str]:
    """The script's arguments: ``arguments`` (positional) first, then an option per hyperparameter,
    sorted by name.

    ``space`` style: ``--name value`` (``-n value`` for one-letter names), as the toolkit does;
    ``equals`` style: ``--name=value`` for every name. A name in ``flags`` is a bare ``--name`` when its
    value is true (or when it has no value), and left out when false.
    """
    if style not in ARGUMENT_STYLES:
        raise ValueError(f"unknown argument style {style!r}: use {' or '.join(ARGUMENT_STYLES)}")
    out: list[str] = list(arguments)
    for name in sorted({*hps, *flags}):
        if name in flags:
            if name not in hps or _is_true(hps[name]):
                out.append(f"--{name}" if style == "equals" or len(name) > 1 else f"-{name}")
            continue
        if style == "equals":
            out.append(f"--{name}={_arg_value(hps[name])}")
        else:
            out += [f"--{name}" if len(name) > 1 else f"-{name}", _arg_value(hps[name])]
    return out


def _env_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class ScriptSite:
    """Where one instance of a script job runs: the facts ``SM_*`` variables carry."""

    base: Path  # the /opt/ml folder
    entry_point: str
    module_dir: str  # the sourcedir URI the code came from
    hosts: list[str]
    current_host: str
    num_gpus: int
    num_cpus: int
    channels: list[str]
    instance_type: str | None = None
    network_interface: str = "eth0"


def job_gpus_said() -> int | None:
    """The job's GPUs as SageMaker (and local mode, :func:`sm_env`) say: ``SM_NUM_GPUS``; None when unset.

    Raises:
        ValueError: it is set but not a whole number.
    """
    text = os.environ.get(sm.NUM_GPUS_ENV, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{sm.NUM_GPUS_ENV} must be a whole number, got {text!r}") from None


def sm_env(site: ScriptSite, hps: dict[str, Any], args: list[str] | None = None) -> dict[str, str]:
    """The ``SM_*`` environment of a script (sagemaker-training-toolkit's names and encodings);
    ``SM_USER_ARGS`` is ``args`` when given, else :func:`user_args` of ``hps``."""
    base, paths = site.base, sm.Paths(site.base)
    env = {
        "SM_MODEL_DIR": str(paths.model),
        "SM_INPUT_DIR": str(base / "input"),
        "SM_INPUT_CONFIG_DIR": str(paths.input_config),
        "SM_OUTPUT_DIR": str(paths.output),
        "SM_OUTPUT_DATA_DIR": str(paths.output_data),
        "SM_OUTPUT_INTERMEDIATE_DIR": str(paths.output / "intermediate"),
        "SM_CHANNELS": _env_value(sorted(site.channels)),
        sm.HOSTS_ENV: _env_value(site.hosts),
        sm.CURRENT_HOST_ENV: site.current_host,
        sm.NUM_GPUS_ENV: str(site.num_gpus),
        "SM_NUM_CPUS": str(site.num_cpus),
        "SM_HPS": _env_value(hps),
        "SM_USER_ARGS": _env_value(user_args(hps) if args is None else args),
        "SM_USER_ENTRY_POINT": site.entry_point,
        "SM_MODULE_NAME": Path(site.entry_point).stem,
        "SM_MODULE_DIR": site.module_dir,
        "SM_FRAMEWORK_MODULE": "",
        "SM_LOG_LEVEL": "20",
        "SM_NETWORK_INTERFACE_NAME": site.network_interface,
        sm.CURRENT_INSTANCE_TYPE_ENV: site.instance_type or "",
    }
    for name in site.channels:
        env[f"SM_CHANNEL_{name.upper()}"] = str(paths.channel(name))
    for name, value in hps.items():
        env[f"SM_HP_{name.upper()}"] = _env_value(value)
    env["SM_TRAINING_ENV"] = _env_value(
        {
            "channel_input_dirs": {n: str(paths.channel(n)) for n in site.channels},
            "current_host": site.current_host,
            "hosts": site.hosts,
            "hyperparameters": hps,
            "model_dir": env["SM_MODEL_DIR"],
            "module_dir": site.module_dir,
            "module_name": env["SM_MODULE_NAME"],
            "num_cpus": site.num_cpus,
            "num_gpus": site.num_gpus,
            "output_data_dir": env["SM_OUTPUT_DATA_DIR"],
            "user_entry_point": site.entry_point,
        }
    )
    return env


# ---- supervisor <-> instrumented process ---------------------------------------------------------------


@dataclass(frozen=True)
class InstrumentConfig:
    """What the instrumentation of one cell needs; written by the supervisor, read in the user's process.

    ``rule`` is :class:`trainsweep.predict.StopRule`'s fields. Caps (``max_steps_per_epoch``,
    ``max_eval_batches``) end a loader's pass early: for tests and quick runs, as for the built-ins.
    """

    run_name: str
    batch_size: int  # global batch size the sweep asked for
    epochs: int
    log_file: str
    status_file: str
    prediction_file: str
    mode: str = "full"
    workload: str = "script"
    rule: dict[str, Any] = field(default_factory=dict)
    max_steps_per_epoch: int | None = None
    max_eval_batches: int | None = None
    instance_type: str | None = None
    batch_size_arg: str = DEFAULT_BATCH_SIZE_ARG  # the script's argument, for messages
    steps: int | None = None  # a step-based run: this many training steps and no epochs (workload.steps)
    first_step_timeout_s: float | None = None  # None: the instrumentation's default bound (loops.py)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> InstrumentConfig:
        return cls(**json.loads(text))

    @classmethod
    def from_env(cls) -> InstrumentConfig | None:
        """The current cell's config, or None outside a trainsweep job (no ``TRAINSWEEP_INSTRUMENT``)."""
        path = os.environ.get(INSTRUMENT_ENV)
        if not path:
            return None
        return cls.from_json(Path(path).read_text())


def cell_status_path(output_dir: Path, run_name: str) -> Path:
    """``<base>/output/data/cells/<run>.json``: the outcome of one cell, written by its rank 0.

    Keys: ``run_name``, ``batch_size``, ``status`` (ok | oom | infeasible | error | stopped), ``reason``
    (None when ok), ``prediction`` (early stop's dict or None); the instrumented process adds ``steps``
    (training steps seen), ``loader_batch_size`` (the training loader's batch size, None if unseen),
    ``flags`` (a list of warnings, e.g. the script ignored the batch size), ``step_marker`` (what ended
    the steps: optimizer | backward | explicit) and ``train_samples`` (the training loader's samples over
    all ranks, None without one: the batch-size search passes no larger batch).
    """
    return output_dir / "data" / "cells" / f"{run_name}.json"


def cell_output_path(output_dir: Path, run_name: str) -> Path:
    """``<base>/output/data/cells/<run>.output.txt``: everything the cell's processes wrote to stdout and
    stderr, kept by the supervisor (SageMaker uploads it with the job's output data)."""
    return output_dir / "data" / "cells" / f"{run_name}.output.txt"
