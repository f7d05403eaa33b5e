"""The sweep spec: model, validation, grid expansion, job names and worst-case cost.

A spec (YAML or JSON) says what to train and over which grid (instance type × batch size ×
repetition). :func:`load_spec` validates it against the shipped JSON Schema and the pydantic model and
reports every problem as a (field path, message) pair; :func:`plan_sweep` expands it into the jobs the
state machine's Map runs, names them, and prices the worst case (every job runs to its
``max_runtime_seconds``), refusing a sweep whose worst case exceeds ``budget_usd``.

This module is pure: no AWS call, no clock unless none is passed in.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable, Hashable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from trainsweep import axes as axis
from trainsweep import hyperparameters as hp
from trainsweep import image, instances, layout, sourcedir, workloads
from trainsweep.boundedread import TooLargeError, read_bounded
from trainsweep.errors import BudgetExceededError, SpecError
from trainsweep.jobs import PlannedJob
from trainsweep.jobs import schema_version as jobs_schema_version
from trainsweep.tracking import Tracking, job_fields
from trainsweep.training import command as cmdline
from trainsweep.training import contract
from trainsweep.training.metric_lines import MAX_DEFINITIONS as METRIC_DEFINITIONS_MAX
from trainsweep.training.metric_lines import NAME_MAX as METRIC_NAME_MAX
from trainsweep.training.metric_lines import NAME_PATTERN as METRIC_NAME_PATTERN
from trainsweep.training.metric_lines import REGEX_MAX as METRIC_REGEX_MAX
from trainsweep.training.metric_lines import (
    TargetRule,
    default_direction,
    is_accuracy,
    regex_problem,
    same_metric,
)

SPEC_SCHEMA_VERSION = 1
SCHEMA_FILE = "sweep-spec.schema.json"
SCHEMA_ID = "https://trainsweep.dev/schemas/sweep-spec.schema.json"

# SageMaker limits this module enforces up front, so a bad spec fails at plan time, not mid-sweep.
SAGEMAKER_NAME_MAX = 63
SAGEMAKER_MAX_RUNTIME_S = 28 * 24 * 3600
WARM_POOL_MAX_KEEP_ALIVE_S = 3600  # SageMaker's limit on ResourceConfig.KeepAlivePeriodInSeconds
ALLOW_RETIRED = "allow_retired"  # validation context key: see load_spec
SAGEMAKER_HYPERPARAMETER_VALUE_MAX = 2500
SAGEMAKER_HYPERPARAMETERS_MAX = 100

MODELS: dict[str, str] = workloads.WORKLOADS
LOCAL_TYPES = (instances.LOCAL_CPU, instances.LOCAL_GPU)

# Hyperparameters the planner writes itself; a spec may not set them by hand.
MANAGED_HYPERPARAMETERS = frozenset(
    {
        hp.WORKLOAD,
        hp.EPOCHS,
        hp.BATCH_SIZE,
        hp.BATCH_SIZES,
        hp.RUN_NAMES,
        hp.MODE,
        hp.SYNTHETIC,
        hp.TARGET_ACCURACY,
    }
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SWEEP_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$")
_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_DATA_URI = r"^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?|file://.+)$"
_NAME_MAX = 40  # sweep name part of a sweep id; leaves room for the timestamp and the job tail
_SWEEP_ID_MAX = 80
_ATTEMPT = re.compile(r"^[a-z0-9]{1,8}$")

HyperparameterValue = str | int | float | bool

_AXIS_NAMES: ContextVar[tuple[str, ...]] = ContextVar("axis_names", default=())
"""The axis names of the spec being validated: a command's placeholders may use them."""


def _wants_download(workload: Workload) -> bool:
    name: str | None = getattr(hp, "DOWNLOAD", None)
    if not name:
        return False
    return _format_value(workload.hyperparameters.get(name, "false")).lower() == "true"


class _FieldError(ValueError):
    """A cross-field problem that belongs to one named field."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field_path = field_path
        self.message = message


def _no_duplicates(values: list[Any], what: str) -> None:
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is listed twice")
        seen.add(v)


# What the container accepts for the hyperparameters it knows (trainsweep/training/config.py), so a
# typo fails at plan time instead of in every job. Names missing from hyperparameters.py are skipped.
def _value_problem(key: str, value: HyperparameterValue) -> str | None:
    """What is wrong with a value the container would refuse (the container's own rule), or None."""
    try:
        hp.parse_value(key, _format_value(value))
    except ValueError as exc:
        return str(exc)
    return None


def _format_value(value: HyperparameterValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_SCRIPT_ARG = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_IMAGE_URI = r"^[a-z0-9][a-z0-9.-]*(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9_.-]+|@sha256:[a-f0-9]{64})?$"

# trainsweep's knobs a spec may set in ``workload.hyperparameters`` for a script too: they configure the
# instrumentation, so a script job carries them under ``trainsweep-<name>`` and never sees them.
SCRIPT_KNOBS = (
    hp.EARLY_STOP_PRECISION,
    hp.EARLY_STOP_MAX_STEPS,
    hp.EARLY_STOP_MAX_SECONDS,
    hp.EARLY_STOP_MAX_EPOCHS,
    hp.EARLY_STOP_MIN_STEPS,
    hp.EARLY_STOP_MIN_SECONDS,
    hp.VALIDATION_BATCHES,
    hp.MAX_STEPS_PER_EPOCH,
    hp.MAX_EVAL_BATCHES,
    hp.NUM_GPUS,
)


class MetricDefinition(BaseModel):
    """SageMaker's ``MetricDefinition``: the first group of ``regex``, in a line of the script's output,
    is the value of metric ``name``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1,
        max_length=METRIC_NAME_MAX,
        pattern=METRIC_NAME_PATTERN,
        description="The metric's name (an accuracy name such as val_acc is the run's eval_accuracy).",
    )
    regex: str = Field(
        min_length=1,
        max_length=METRIC_REGEX_MAX,
        description="A Python regular expression searched in each output line; its first group is the value.",
    )

    @field_validator("regex")
    @classmethod
    def _usable(cls, value: str) -> str:
        problem = regex_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class Workload(BaseModel):
    """What each job trains: a built-in ``model``, the user's own script (``entry_point``), or an image."""

    model_config = ConfigDict(extra="forbid")

    model: Literal[workloads.NAMES] | None = Field(  # type: ignore[valid-type]
        None, description="A built-in workload (examples and tests); or give entry_point or image_uri."
    )
    dataset: str | None = Field(
        None,
        description="Built-ins only: dataset of the model (mnist for mnist-cnn, cifar10 for "
        "resnet50-cifar10); defaults to the model's own.",
    )
    command: str | None = Field(
        None,
        min_length=1,
        description="The command line you train with, run from the source dir (SageMaker SDK v3's "
        "SourceCode.command), with placeholders {batch_size}, {epochs}, {steps}, {instance_count}, "
        "{gpus}, {batch_size_per_device}, {node_rank}, {master_addr}, {master_port} and "
        "{<hyperparameter>}; e.g. 'python train.py --batch_size={batch_size}'. Split into "
        "words like a shell, never run by one; {{ and }} are literal braces.",
    )
    entry_point: str | None = Field(
        None,
        min_length=1,
        description="Your training script (SageMaker script mode), relative to source_dir; without "
        "source_dir, a path relative to the spec file and its folder is the source dir.",
    )
    source_dir: str | None = Field(
        None,
        min_length=1,
        description="Folder packed and shipped with the script (relative to the spec file), or the "
        "s3:// URI of a sourcedir.tar.gz; default: the entry point's folder, or with command the spec "
        "file's folder.",
    )
    requirements: str | None = Field(
        None,
        min_length=1,
        description="pip requirements file relative to source_dir, installed in the job before the "
        "script starts; default: requirements.txt when present.",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="Extra .gitignore-style patterns left out of the packed source dir.",
    )
    batch_size_arg: str = Field(
        contract.DEFAULT_BATCH_SIZE_ARG,
        pattern=_SCRIPT_ARG.pattern,
        description="Argument name the script reads the (global) batch size from: --<name> N.",
    )
    epochs_arg: str | None = Field(
        contract.DEFAULT_EPOCHS_ARG,
        pattern=_SCRIPT_ARG.pattern,
        description="Argument name the script reads the number of epochs from: --<name> E; null for a "
        "script that takes none.",
    )
    steps_arg: str | None = Field(
        contract.DEFAULT_STEPS_ARG,
        pattern=_SCRIPT_ARG.pattern,
        description="With steps: argument name the script reads the number of steps from: --<name> N; "
        "null for a script that takes none.",
    )
    argument_style: Literal[contract.ARGUMENT_STYLES] = Field(  # type: ignore[valid-type]
        "space",
        description="How the entry point gets its options: space (--name value, SageMaker's) or "
        "equals (--name=value).",
    )
    flags: list[Annotated[str, Field(pattern=_SCRIPT_ARG.pattern)]] = Field(
        default_factory=list,
        json_schema_extra={"uniqueItems": True},
        description="Options the entry point takes without a value (argparse store_true): passed as a "
        "bare --name; a hyperparameter of that name set to false leaves it out.",
    )
    arguments: list[str] = Field(
        default_factory=list,
        description="Positional arguments of the entry point, before its options (placeholders as in "
        "command).",
    )
    image_uri: str | None = Field(
        None,
        pattern=_IMAGE_URI,
        description="Your own training image (SageMaker's training contract); default: trainsweep's image.",
    )
    log_format: str | None = Field(
        None,
        min_length=1,
        description="A regular expression with a named group step_s (a step time in seconds) or "
        "timestamp (a step's end time), optionally epoch and step, for logs no known dialect reads.",
    )
    epochs: int = Field(5, ge=1, le=10_000, description="Epochs per run.")
    steps: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="Your own code only: a step-based run (iterations, no epochs): training steps per run, "
        "instead of epochs (give one of the two).",
    )
    tokens_per_sample: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="Tokens one sample carries (a language model's sequence length): the report then gives "
        "tokens/s, tokens per dollar and cost per million tokens. A run's log, or a seq_len axis, wins.",
    )
    hyperparameters: dict[str, HyperparameterValue] = Field(
        default_factory=dict,
        description="Hyperparameters: an entry point gets them as --name value arguments, a command "
        "as its {name} placeholders (both also as SM_HP_<NAME>); a built-in reads trainsweep's own "
        "(learning-rate, max-steps-per-epoch, early-stop-precision...).",
    )
    synthetic: bool = Field(
        False,
        description="Built-ins only: train on random tensors of the dataset's shape (pure throughput).",
    )
    metric_definitions: list[MetricDefinition] = Field(
        default_factory=list,
        max_length=METRIC_DEFINITIONS_MAX,
        description="Metrics read from your script's output (SageMaker's MetricDefinitions): each line "
        "a regex finds gives the metric its first group's value, for the quality guard, target and report.",
    )

    @property
    def kind(self) -> str:
        """``builtin``, ``script`` (entry_point or command, maybe in an own image) or ``image``."""
        if self.model is not None:
            return "builtin"
        return "script" if self.runs_code else "image"

    @property
    def runs_code(self) -> bool:
        """Whether trainsweep's launcher runs the user's code (entry_point or command)."""
        return self.entry_point is not None or self.command is not None

    @property
    def command_words(self) -> list[str]:
        """``command`` split into words (empty without a command)."""
        return [] if self.command is None else cmdline.split(self.command)

    @property
    def label(self) -> str:
        """What runs, for tables and job records: the model, the script's name or the image."""
        if self.model is not None:
            return self.model
        if self.entry_point is not None:
            return Path(self.entry_point).name
        if self.command is not None:
            target = cmdline.named_target(self.command_words)
            return Path(target.name).name if target else self.command_words[0]
        return str(self.image_uri).rsplit("/", 1)[-1]

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        given = [n for n in ("model", "entry_point", "command", "image_uri") if getattr(self, n) is not None]
        if not given:
            raise _FieldError(
                "model",
                "say what to train: command (your command line), entry_point (your script), image_uri "
                "(your image) or model",
            )
        self._check_steps()
        if self.model is not None:
            self._check_builtin()
        else:
            self._check_own_code()
        _check_metric_definitions(self)
        for key, value in self.hyperparameters.items():
            if not key or len(key) > 256:
                raise _FieldError(f"hyperparameters.{key}", "a hyperparameter name has 1 to 256 characters")
            if self.model is None and key not in SCRIPT_KNOBS:
                continue  # the script's own: passed through untouched
            problem = _value_problem(key, value)
            if problem:
                raise _FieldError(f"hyperparameters.{key}", problem)
        return self

    def _check_builtin(self) -> None:
        for other in ("entry_point", "command", "image_uri", "source_dir", "requirements", "log_format"):
            if getattr(self, other) is not None:
                raise _FieldError(other, f"a built-in model runs trainsweep's own code: remove {other}")
        assert self.model is not None
        expected = MODELS[self.model]
        if self.dataset is None:
            self.dataset = expected
        elif self.dataset != expected:
            raise _FieldError(
                "dataset", f"{self.dataset!r} does not fit model {self.model!r} (use {expected!r})"
            )
        for key in self.hyperparameters:
            if key in MANAGED_HYPERPARAMETERS or key.startswith(hp.RESERVED_PREFIX):
                raise _FieldError(
                    f"hyperparameters.{key}",
                    "set by trainsweep from the spec's own fields; remove it (reserved: "
                    f"{', '.join(sorted(MANAGED_HYPERPARAMETERS))} and {hp.RESERVED_PREFIX}*)",
                )

    def _check_own_code(self) -> None:
        if self.dataset is not None:
            raise _FieldError("dataset", "only a built-in model has a dataset: give yours as the spec's data")
        if self.synthetic:
            raise _FieldError("synthetic", "only a built-in model has synthetic data: remove synthetic")
        if not self.runs_code:
            for other in ("source_dir", "requirements"):
                if getattr(self, other) is not None:
                    raise _FieldError(other, "only meaningful with command or entry_point (your code)")
        if self.entry_point is not None and (
            self.entry_point.startswith("/") and self.source_dir is not None
        ):
            raise _FieldError("entry_point", "with source_dir, entry_point is a path inside it")
        if self.command is not None:
            self._check_command()
        else:
            self._check_script_args()
        for key in self.hyperparameters:
            if contract.is_reserved(key):
                raise _FieldError(
                    f"hyperparameters.{key}",
                    f"names starting with {contract.PLATFORM_PREFIX!r} or {contract.TRAINSWEEP_PREFIX!r} "
                    "configure SageMaker and trainsweep; rename it",
                )
        if self.log_format is not None:
            problem = _log_format_problem(self.log_format)
            if problem:
                raise _FieldError("log_format", problem)

    def _check_steps(self) -> None:
        if self.steps is None:
            return
        # compared with the default, not with the fields given: a planned spec (spec.json) holds them all
        if self.epochs != Workload.model_fields["epochs"].default:
            raise _FieldError("steps", "a run is either step-based (steps) or epoch-based (epochs): give one")
        if not self.runs_code:
            raise _FieldError(
                "steps", "steps is for your own code (command or entry_point); a built-in trains in epochs"
            )

    def placeholder_names(self) -> list[str]:
        """The placeholders a command (or an entry point's arguments) may use."""
        return [*cmdline.PLACEHOLDERS, *self.hyperparameters, *_AXIS_NAMES.get()]

    def _check_placeholders(self, field_name: str, words: list[str]) -> list[str]:
        try:
            used = cmdline.check(words, self.placeholder_names())
        except cmdline.CommandError as e:
            raise _FieldError(field_name, str(e)) from None
        if cmdline.STEPS in used and self.steps is None:
            raise _FieldError(field_name, "uses {steps}: set workload.steps (a step-based run)")
        if cmdline.EPOCHS in used and self.steps is not None:
            raise _FieldError(field_name, "uses {epochs}, but the run is step-based (workload.steps)")
        return used

    def _check_command(self) -> None:
        assert self.command is not None
        if self.entry_point is not None:
            raise _FieldError("command", "give either command or entry_point (its shorthand), not both")
        script_only = ("batch_size_arg", "epochs_arg", "steps_arg", "argument_style", "flags", "arguments")
        for name in script_only:
            if getattr(self, name) != Workload.model_fields[name].get_default(call_default_factory=True):
                raise _FieldError(name, "an entry point's setting: with command, write the arguments in it")
        for key in self.hyperparameters:
            if key in cmdline.PLACEHOLDERS:
                raise _FieldError(
                    f"hyperparameters.{key}", f"{{{key}}} is set by the sweep; rename this hyperparameter"
                )
        try:
            words = cmdline.split(self.command)
        except cmdline.CommandError as e:
            raise _FieldError("command", str(e)) from None
        self._check_placeholders("command", words)
        if cmdline.program_has_placeholder(words):
            raise _FieldError("command", f"the program {words[0]!r} cannot be a placeholder")
        if cmdline.named_target(words) is None:
            raise _FieldError(
                "command",
                "names no Python script to time: trainsweep times the first word ending in .py (python "
                "train.py, torchrun ... train.py) or the module after -m (python -m pkg.train)",
            )

    def _check_script_args(self) -> None:
        length_arg = self.steps_arg if self.steps else self.epochs_arg
        if self.batch_size_arg == length_arg:
            field_name = "steps_arg" if self.steps else "epochs_arg"
            raise _FieldError(field_name, f"the batch size and the {field_name[:-4]} need two argument names")
        sweep_set = {self.batch_size_arg, length_arg}
        for key, value in self.hyperparameters.items():
            if key in sweep_set:
                raise _FieldError(
                    f"hyperparameters.{key}",
                    "set by the sweep (batch_sizes, workload.epochs or steps); remove it here",
                )
            if key in self.flags and not isinstance(value, bool):
                raise _FieldError(
                    f"hyperparameters.{key}", f"a flag is true (--{key}) or false (left out), not {value!r}"
                )
        _no_duplicates_field("flags", self.flags)
        for name in self.flags:
            if name in sweep_set:
                raise _FieldError("flags", f"{name!r} is set by the sweep with a value; it cannot be a flag")
        if self.arguments:
            self._check_placeholders("arguments", list(self.arguments))


def _no_duplicates_field(field_name: str, values: list[Any]) -> None:
    try:
        _no_duplicates(values, "name")
    except ValueError as e:
        raise _FieldError(field_name, str(e)) from None


def _check_metric_definitions(w: Workload) -> None:
    """Metric definitions read a script's output through trainsweep's launcher: not a built-in's, not an
    own image's; one definition per name."""
    if not w.metric_definitions:
        return
    if w.model is not None:
        raise _FieldError(
            "metric_definitions", "a built-in model reports its own eval_accuracy: remove metric_definitions"
        )
    if w.entry_point is None and getattr(w, "command", None) is None:
        raise _FieldError(
            "metric_definitions",
            "read from the output of your script as trainsweep launches it: give entry_point (or command)",
        )
    seen: set[str] = set()
    for i, d in enumerate(w.metric_definitions):
        if d.name in seen:
            raise _FieldError(f"metric_definitions.{i}.name", f"{d.name!r} is defined twice")
        seen.add(d.name)


def _target_problem(target: Target, w: Workload) -> str | None:
    """Why the run cannot measure ``target``'s metric, or None."""
    names = [d.name for d in w.metric_definitions]
    if any(same_metric(target.metric, n) for n in names):
        return None
    if target.metric in TARGET_METRICS and not names:
        return None  # the built-in's evaluation, or the script's trainsweep.instrument.metric("accuracy")
    known = ", ".join(sorted({*names, *TARGET_METRICS}))
    return (
        f"{target.metric!r} is not measured: use one of {known}, or define it in workload.metric_definitions"
    )


def _log_format_problem(text: str) -> str | None:
    """What is wrong with a ``log_format`` (the parser's own check), or None."""
    from trainsweep.logs.pattern import compile_log_format

    try:
        compile_log_format(text)
    except ValueError as exc:
        return str(exc)
    return None


DEFAULT_QUALITY_MARGIN = 0.02
DEFAULT_CONFIRM_TOP_K = 3
PHASES = ("scan", "confirm")
TARGET_METRICS = ("eval_accuracy",)
"""The metric a target names without ``workload.metric_definitions`` (the built-ins' and the API's)."""


class Target(BaseModel):
    """The quality a training run must reach: its first evaluation at or above ``value`` (maximize), or at
    or below it (minimize: a loss), ends it (SageMaker tuning's objective: a metric and Maximize/Minimize)."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(
        "eval_accuracy",
        pattern=METRIC_NAME_PATTERN,
        max_length=METRIC_NAME_MAX,
        description="The evaluation metric: eval_accuracy, or a name of workload.metric_definitions.",
    )
    value: float = Field(allow_inf_nan=False, description="The value to reach, e.g. 0.97 (or a loss: 1.2).")
    direction: Literal["maximize", "minimize"] | None = Field(
        None,
        description="maximize: reach value from below; minimize: go below it (a loss). Default: "
        "minimize for a name with loss, error or perplexity in it, else maximize.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Target:
        if self.direction is None:
            self.direction = default_direction(self.metric)  # type: ignore[assignment]
        if is_accuracy(self.metric) and self.direction == "maximize" and not 0 < self.value <= 1:
            raise _FieldError("value", f"an accuracy target is in (0, 1], got {self.value:g}")
        return self

    def rule(self) -> TargetRule:
        return TargetRule(self.metric, self.value, str(self.direction))


class GridCell(BaseModel):
    """One (instance type, batch size) cell of the grid."""

    model_config = ConfigDict(extra="forbid")

    instance_type: str = Field(min_length=1)
    batch_size: int = Field(ge=1, le=1_000_000)


AUTO = "auto"
DEFAULT_AUTO_MIN, DEFAULT_AUTO_MAX, DEFAULT_MIN_GAIN = 8, 8192, 0.03


class BatchSizeSearch(BaseModel):
    """``batch_sizes: auto``: double from ``min`` until out of memory, ``max``, or a throughput plateau."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(DEFAULT_AUTO_MIN, ge=1, le=1_000_000, description="First batch size tried.")
    max: int = Field(DEFAULT_AUTO_MAX, ge=1, le=1_000_000, description="Largest batch size tried.")
    min_gain: float = Field(
        DEFAULT_MIN_GAIN,
        ge=0,
        lt=1,
        description="Stop when two doublings in a row each gain less than this share of throughput.",
    )

    def sizes(self) -> list[int]:
        """min, 2 min, 4 min, ... up to max: the batch sizes the search may try, in order."""
        out, bs = [], self.min
        while bs <= self.max:
            out.append(bs)
            bs *= 2
        return out


_AUTO_SCHEMA = {
    "anyOf": [
        {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 1_000_000}, "minItems": 1,
         "uniqueItems": True},
        {"const": AUTO},
        {
            "type": "object",
            "properties": {AUTO: BatchSizeSearch.model_json_schema()},
            "required": [AUTO],
            "additionalProperties": False,
        },
    ],
    "description": "Global batch sizes to try, or auto (optionally {auto: {min, max, min_gain}}): "
    "double from min until out of memory, max, or a throughput plateau.",
}  # fmt: skip


# ---- what each CreateTrainingJob request carries for an enterprise account: network and storage ----

_AWS_ID = r"^[-0-9a-zA-Z]+$"  # SageMaker's pattern for subnet and security group ids
DEFAULT_VOLUME_GB = 50


class VpcSettings(BaseModel):
    """``VpcConfig`` of every job: the subnets and security groups its instances run in."""

    model_config = ConfigDict(extra="forbid")

    subnets: list[Annotated[str, Field(max_length=32, pattern=_AWS_ID)]] = Field(
        min_length=1, max_length=16, description="Subnet ids (subnet-...), in the stack's region."
    )
    security_group_ids: list[Annotated[str, Field(max_length=32, pattern=_AWS_ID)]] = Field(
        min_length=1, max_length=5, description="Security group ids (sg-...) of those subnets' VPC."
    )


class TrainingJobSettings(BaseModel):
    """Settings passed through to every job's ``CreateTrainingJob`` request."""

    model_config = ConfigDict(extra="forbid")

    volume_size_gb: int = Field(
        DEFAULT_VOLUME_GB,
        ge=1,
        le=16384,
        description="ResourceConfig.VolumeSizeInGB: the storage each instance gets (File mode copies the "
        "whole data channel onto it).",
    )
    input_mode: Literal["File", "FastFile", "Pipe"] = Field(
        "File",
        description="TrainingInputMode of the data channel: File copies it before training, FastFile "
        "streams it from S3 behind a file system, Pipe streams it through a FIFO (your own code only).",
    )
    network_isolation: bool = Field(
        False,
        description="EnableNetworkIsolation: the container gets no network access (no log uploads: the "
        "log comes from CloudWatch).",
    )
    inter_container_encryption: bool = Field(
        False, description="EnableInterContainerTrafficEncryption between the instances of a job."
    )
    vpc: VpcSettings | None = Field(None, description="VpcConfig: run the jobs in your VPC.")

    def vpc_config(self) -> dict[str, list[str]] | None:
        """``VpcConfig`` as SageMaker takes it, or None."""
        if self.vpc is None:
            return None
        return {"Subnets": list(self.vpc.subnets), "SecurityGroupIds": list(self.vpc.security_group_ids)}


class SweepSpec(BaseModel):
    """A sweep: one workload over instance types × batch sizes × repetitions."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        title="trainsweep sweep spec",
        json_schema_extra={"$id": SCHEMA_ID},
    )

    schema_ref: str | None = Field(
        None, alias="$schema", description="Optional JSON Schema reference for editors; ignored."
    )
    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=_NAME.pattern,
        description="Sweep name: letters, digits, '-', '_', '.'; the sweep id is <name>-<UTC time>.",
    )
    workload: Workload
    axes: dict[str, list[HyperparameterValue]] | None = Field(
        None,
        description="Script settings swept like the batch size: a hyperparameter (or a {placeholder} of "
        "workload.command) -> the values to try, e.g. {dtype: [float32, bfloat16], compile: [false, true]}; "
        "the grid is their product with instance_types x batch_sizes x node counts.",
    )
    instance_types: list[Annotated[str, Field(json_schema_extra={"enum": sorted(instances.CATALOGUE)})]] = (
        Field(
            min_length=1,
            json_schema_extra={"uniqueItems": True},
            description="SageMaker training instance types (ml.*), or local / local_gpu for local mode.",
        )
    )
    batch_sizes: Annotated[list[Annotated[int, Field(ge=1, le=1_000_000)]], WithJsonSchema(_AUTO_SCHEMA)] = (
        Field(min_length=1, description="Global batch sizes to try, or auto.")
    )
    repetitions: int = Field(1, ge=1, le=100, description="Runs per (instance type, batch size) cell.")
    instance_count: int = Field(1, ge=1, le=100, description="Instances per job (distributed training).")
    instance_counts: list[Annotated[int, Field(ge=1, le=100)]] | None = Field(
        None,
        min_length=1,
        json_schema_extra={"uniqueItems": True},
        description="Node count as an axis: jobs of each of these instance counts (instead of "
        "instance_count); "
        "the report shows the scaling efficiency of each count against one node.",
    )
    mode: Literal["full", "early-stop"] = Field(
        "full", description="full: train every epoch; early-stop: stop once the step time is known."
    )
    packing: Literal["per-cell", "per-instance"] = Field(
        "per-cell",
        description="per-cell: one job per cell; per-instance: one job per instance type and repetition "
        "that scans all batch sizes in turn.",
    )
    max_runtime_seconds: int = Field(
        3600,
        ge=60,
        le=SAGEMAKER_MAX_RUNTIME_S,
        description="StoppingCondition of every job (a packed job runs all its batch sizes within it).",
    )
    max_concurrency: int = Field(4, ge=1, le=1000, description="Jobs running at the same time.")
    budget_usd: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,  # Infinity would accept any cost; leave budget_usd out for no limit
        description="Refuse the sweep when its worst-case cost exceeds this (USD).",
    )
    prices: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=dict,
        description="USD per instance-hour of instance types in the sweep's region, instead of the "
        "Pricing API's or the shipped catalogue's (e.g. a type the catalogue does not price, or your "
        "negotiated rate); keys must be among instance_types.",
    )
    spot: bool = Field(False, description="Managed spot training (checkpointed; may wait for capacity).")
    max_wait_seconds: int | None = Field(
        None,
        ge=60,
        le=2 * SAGEMAKER_MAX_RUNTIME_S,
        description="Spot only: runtime plus time waiting for capacity; default twice max_runtime_seconds.",
    )
    data: str | None = Field(
        None,
        pattern=_DATA_URI,
        description="Data for the 'train' channel: s3://bucket/prefix, or file:///path in local mode.",
    )
    region: str | None = Field(
        None, pattern=_REGION.pattern, description="AWS region to run in (default: the CLI's region)."
    )
    warm_pool_seconds: int = Field(
        0,
        ge=0,
        le=WARM_POOL_MAX_KEEP_ALIVE_S,
        description="SageMaker managed warm pool: keep each job's instances this many seconds after it "
        "ends (ResourceConfig.KeepAlivePeriodInSeconds), so that the next job of the same instance type "
        "starts warm; the kept time is billed and the account needs a warm-pool quota. 0: off.",
    )

    training_job: TrainingJobSettings = Field(
        default_factory=lambda: TrainingJobSettings.model_validate({}),
        description="Network and storage of every job's CreateTrainingJob request (VPC, network "
        "isolation, traffic encryption, volume size, input mode).",
    )
    tracking: Tracking | None = Field(
        None, description="MLflow: where the sweep's runs land ({mlflow: URI or ARN, experiment})."
    )

    @model_validator(mode="wrap")
    @classmethod
    def _axis_placeholders(cls, data: Any, handler: Callable[[Any], SweepSpec]) -> SweepSpec:
        """Validate with the spec's axis names known to ``workload.command``'s placeholder check."""
        names = data.get("axes") if isinstance(data, Mapping) else None
        token = _AXIS_NAMES.set(tuple(names) if isinstance(names, Mapping) else ())
        try:
            return handler(data)
        finally:
            _AXIS_NAMES.reset(token)

    @model_validator(mode="after")
    def _pipe_needs_own_code(self) -> SweepSpec:
        if self.training_job.input_mode == "Pipe" and self.workload.model is not None:
            raise _FieldError(
                "training_job.input_mode",
                "the built-in workloads read files: Pipe needs your own script or image (File or FastFile)",
            )
        return self

    @model_validator(mode="after")
    def _warm_pool_consistent(self) -> SweepSpec:
        if self.warm_pool_seconds and self.spot:
            raise _FieldError(
                "warm_pool_seconds", "SageMaker warm pools cannot be used with spot: set spot to false"
            )
        return self

    # ---- quality: the evaluation metric, a target to reach, scan/confirm phases (issue 14, item 3) ----
    quality_margin: float = Field(
        DEFAULT_QUALITY_MARGIN,
        ge=0,
        le=1,
        description="Full mode: a configuration whose final eval_accuracy is more than this below the "
        "best one's is flagged and not recommended (absolute: 0.02 = 2 points).",
    )
    target: Target | None = Field(
        None,
        description="Rank by time and cost to reach this evaluation metric (MLPerf's time-to-train); "
        "a configuration that never reaches it is not recommended.",
    )
    phases: list[Literal["scan", "confirm"]] | None = Field(
        None,
        description="[scan, confirm]: an early-stop packed scan of every configuration, then full runs "
        "of the confirm_top_k best to the target; the recommendation comes from the confirmed runs.",
    )
    confirm_top_k: int = Field(
        DEFAULT_CONFIRM_TOP_K, ge=1, le=100, description="Configurations the confirm phase trains."
    )
    batch_size_search: BatchSizeSearch | None = Field(
        None,
        description="Set from batch_sizes: auto (batch_sizes then lists the sizes it may try); the "
        "packed job stops at the first out of memory or throughput plateau.",
    )
    cells: list[GridCell] | None = Field(
        None,
        min_length=1,
        description="Run only these (instance type, batch size) cells of the grid (the confirm phase "
        "sets it to the scan's best).",
    )

    @model_validator(mode="before")
    @classmethod
    def _auto_batch_sizes(cls, data: Any) -> Any:
        """``batch_sizes: auto`` (or ``{auto: {min, max, min_gain}}``) becomes the doubling sequence to try
        plus ``batch_size_search``; a packed early-stop job unless the spec says otherwise (then refused)."""
        if not isinstance(data, Mapping):
            return data
        given = data.get("batch_sizes")
        if given != AUTO and not (isinstance(given, Mapping) and set(given) == {AUTO}):
            return data
        search = BatchSizeSearch.model_validate({} if given == AUTO else (given[AUTO] or {}))
        if search.min > search.max:
            raise _FieldError("batch_sizes.auto", f"min {search.min} is larger than max {search.max}")
        out = dict(data)
        out["batch_sizes"] = search.sizes()
        out["batch_size_search"] = search.model_dump()
        out.setdefault("mode", "early-stop")
        out.setdefault("packing", "per-instance")
        return out

    @field_validator("instance_types")
    @classmethod
    def _known_instance_types(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in instances.CATALOGUE:
                raise ValueError(
                    f"unknown instance type {name!r} (known: {', '.join(sorted(instances.CATALOGUE))})"
                )
        _no_duplicates(value, "instance type")
        return value

    @field_validator("batch_sizes")
    @classmethod
    def _unique_batch_sizes(cls, value: list[int]) -> list[int]:
        _no_duplicates(value, "batch size")
        return value

    @property
    def node_counts(self) -> list[int]:
        """The instance counts jobs run with: ``instance_counts``, else ``[instance_count]``."""
        return list(self.instance_counts) if self.instance_counts is not None else [self.instance_count]

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> SweepSpec:
        local = [t for t in self.instance_types if t in LOCAL_TYPES]
        self._check_hosts(local)
        self._check_prices()
        self._check_image(local, retired_ok=bool((info.context or {}).get(ALLOW_RETIRED)))
        self._check_data(local)
        self._check_quality()
        self._check_search()
        _check_axes(self)
        self._check_spot_wait()
        return self

    def _check_hosts(self, local: list[str]) -> None:
        """Local types alone, one of instance_count / instance_counts, and what local mode can host."""
        if local and len(local) != len(self.instance_types):
            raise _FieldError(
                "instance_types",
                "local types (local, local_gpu) run only in local mode: do not mix them with ml.*",
            )
        count_field = "instance_counts" if self.instance_counts is not None else "instance_count"
        if self.instance_counts is not None and self.instance_count != 1:
            raise _FieldError(
                "instance_counts", "give either instance_count or instance_counts (the node-count axis)"
            )
        if local and max(self.node_counts) > instances.MAX_LOCAL_HOSTS:
            raise _FieldError(
                count_field,
                f"local mode runs at most {instances.MAX_LOCAL_HOSTS} hosts per job "
                "(processes on this machine)",
            )
        if instances.LOCAL_GPU in local and self.node_counts != [1]:
            raise _FieldError(
                count_field,
                "local_gpu runs one host per job (several would share this machine's GPUs): "
                f"use 'local' for a multi-host job, or set {count_field} to 1",
            )
        if local and self.spot:
            raise _FieldError("spot", "managed spot training does not exist in local mode: set spot to false")

    def _check_prices(self) -> None:
        """The spec's own prices name its cloud instance types."""
        for name in self.prices:
            if name not in self.instance_types:
                raise _FieldError(
                    f"prices.{name}",
                    f"{name} is not one of the sweep's instance_types ({', '.join(self.instance_types)})",
                )
            if name in LOCAL_TYPES:
                raise _FieldError(
                    f"prices.{name}", "local mode costs nothing: leave local types out of prices"
                )

    def _check_image(self, local: list[str], *, retired_ok: bool) -> None:
        """What the stack's image or the user's image can run: GPUs it supports (``retired_ok``: simulate
        replays old logs of retired types), no image in local mode, no packing or early stop without
        trainsweep's launcher."""
        kind = self.workload.kind
        if self.workload.image_uri is None and not retired_ok:  # the stack's image must use their GPUs
            for name in self.instance_types:
                reason = image.unusable_reason(name)
                if reason:
                    raise _FieldError("instance_types", reason)
        if local and self.workload.image_uri is not None:
            raise _FieldError(
                "workload.image_uri",
                "local mode runs training code as processes on this machine (no Docker engine): "
                "run an image in the cloud, or give its script as workload.entry_point",
            )
        if kind == "image" and self.packing == "per-instance":
            raise _FieldError(
                "packing",
                "an image without trainsweep's launcher trains one batch size per job: use per-cell, or "
                "give workload.entry_point so trainsweep scans the batch sizes",
            )
        if kind == "image" and self.mode == "early-stop":
            raise _FieldError(
                "mode",
                "early stop needs trainsweep's instrumentation inside the job: use mode full with an "
                "image, or give workload.entry_point",
            )

    def _check_data(self, local: list[str]) -> None:
        """A local built-in has data to read; a file:// URI only in local mode."""
        kind = self.workload.kind
        if (
            local
            and kind == "builtin"
            and not self.workload.synthetic
            and not self.data
            and not _wants_download(self.workload)
        ):
            raise _FieldError(
                "data",
                "a local job needs data: set data: file:///path/to/data, workload.synthetic: true, or "
                f"workload.hyperparameters.{getattr(hp, 'DOWNLOAD', 'download')}: true (downloads it)",
            )
        if self.data and self.data.startswith("file://") and not local:
            raise _FieldError("data", "a file:// URI is only readable in local mode; upload it and use s3://")

    def _check_spot_wait(self) -> None:
        """SageMaker's rule for max_wait_seconds."""
        if self.max_wait_seconds is None:
            return
        if not self.spot:
            raise _FieldError("max_wait_seconds", "only meaningful with spot: true")
        if self.max_wait_seconds < self.max_runtime_seconds:
            raise _FieldError(
                "max_wait_seconds",
                f"must be at least max_runtime_seconds ({self.max_runtime_seconds}) (SageMaker rule)",
            )

    def _check_search(self) -> None:
        search = self.batch_size_search
        if search is None:
            return
        if self.batch_sizes != search.sizes():
            raise _FieldError(
                "batch_sizes",
                "with batch_size_search, batch_sizes is its doubling sequence: write batch_sizes: auto",
            )
        if self.workload.kind not in ("builtin", "script"):
            raise _FieldError(
                "batch_sizes",
                "batch_sizes: auto runs with the built-in workloads (model) and scripts (entry_point)",
            )
        if self.packing != "per-instance" or self.mode != "early-stop":
            raise _FieldError(
                "batch_sizes",
                "batch_sizes: auto searches in one packed early-stop job per instance type: use packing: "
                "per-instance and mode: early-stop (the defaults with auto)",
            )
        if self.cells is not None:
            raise _FieldError("cells", "batch_sizes: auto chooses the batch sizes: remove cells")

    def _check_quality(self) -> None:
        if self.phases is not None:
            if self.phases != list(PHASES):
                raise _FieldError("phases", f"the only sequence is {list(PHASES)} (or leave phases out)")
            if self.target is None:
                raise _FieldError(
                    "target", "phases: [scan, confirm] trains the confirmed runs to a target: set target"
                )
            if self.cells is not None:
                raise _FieldError("cells", "the confirm phase chooses its cells: remove cells, or phases")
            if self.workload.kind == "image":
                raise _FieldError(
                    "phases",
                    "the scan phase packs and early-stops, which needs trainsweep's launcher: give "
                    "workload.entry_point, or leave phases out",
                )
        if self.target is not None and (problem := _target_problem(self.target, self.workload)):
            raise _FieldError("target.metric", problem)
        if self.phases is None and self.target is not None and self.mode == "early-stop":
            raise _FieldError(
                "target",
                "an early-stopped run never reaches a target: use mode full, or phases: [scan, confirm]",
            )
        if self.cells is not None:
            grid = {(t, b) for t in self.instance_types for b in self.batch_sizes}
            seen: set[tuple[str, int]] = set()
            for i, c in enumerate(self.cells):
                key = (c.instance_type, c.batch_size)
                if key not in grid:
                    raise _FieldError(
                        f"cells.{i}",
                        f"{c.instance_type} x {c.batch_size} is not in instance_types x batch_sizes",
                    )
                if key in seen:
                    raise _FieldError(f"cells.{i}", f"{c.instance_type} x {c.batch_size} is listed twice")
                seen.add(key)

    def in_grid(self, instance_type: str, batch_size: int) -> bool:
        """Whether the sweep runs this cell (every cell of the grid unless ``cells`` narrows it)."""
        if self.cells is None:
            return True
        return any(c.instance_type == instance_type and c.batch_size == batch_size for c in self.cells)

    @property
    def settings(self) -> list[axis.Setting]:
        """Every combination of the axes' values (``[{}]`` without axes)."""
        return axis.settings(self.axes)

    @property
    def is_local(self) -> bool:
        return all(t in LOCAL_TYPES for t in self.instance_types)

    @property
    def spot_max_wait_seconds(self) -> int | None:
        if not self.spot:
            return None
        return self.max_wait_seconds or min(2 * self.max_runtime_seconds, 2 * SAGEMAKER_MAX_RUNTIME_S)

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain JSON types, defaults filled in (what ``sweeps/<id>/spec.json`` holds)."""
        doc = self.model_dump(mode="json", exclude={"schema_ref"})
        if not doc["prices"]:  # a spec without price overrides keeps the spec.json it always had
            del doc["prices"]
        if self.training_job == TrainingJobSettings.model_validate({}):  # likewise without training_job
            del doc["training_job"]
        if doc["axes"] is None:  # and without axes
            del doc["axes"]
        if doc["tracking"] is None:  # and without tracking
            del doc["tracking"]
        if doc["workload"]["tokens_per_sample"] is None:  # and without a sample's tokens
            del doc["workload"]["tokens_per_sample"]
        return doc


# ---- axes ----------------------------------------------------------------------------------------

# Names a sweep.csv row, a cell record or the spec already use: an axis of that name would be ambiguous.
_TRAINSWEEP_NAMES = frozenset(
    {"batch_size", "instance_type", "instance_count", "repetition", "run_name", "job_name", "runs", "gpus"}
    | {"status", "reason", "notes", "platform", "vmtype", "axes", "setting"}
)


def _axis_name_problem(spec: SweepSpec, name: str) -> str | None:
    """Why ``name`` cannot be an axis of ``spec`` (None: it can)."""
    w = spec.workload
    if not axis.NAME.match(name):
        return "an axis name starts with a letter, then letters, digits, '_' or '-' (at most 64)"
    taken = {*MANAGED_HYPERPARAMETERS, *cmdline.PLACEHOLDERS, *SCRIPT_KNOBS, *_TRAINSWEEP_NAMES}
    taken |= set(SweepSpec.model_fields) | {w.batch_size_arg, w.epochs_arg or "", w.steps_arg or ""}
    if name in taken or contract.is_reserved(name) or name.startswith(hp.RESERVED_PREFIX):
        return "is one of trainsweep's own settings (or the batch size, epochs or steps): rename the axis"
    if name in w.hyperparameters:
        return f"is also set in workload.hyperparameters ({w.hyperparameters[name]!r}): give it in one place"
    if w.model is not None and name not in hp.BUILTIN_READS:
        return f"the built-in workload {w.model} does not read it; it sweeps {', '.join(_builtin_axes())}"
    if w.command is not None and name not in cmdline.placeholders(w.command_words):
        return f"workload.command has no {{{name}}}: the script would never get this axis's values"
    return None


def _builtin_axes() -> list[str]:
    """The names a built-in workload reads that a spec may sweep."""
    own = {hp.LOG_BUCKET, hp.LOG_PREFIX, hp.LOG_UPLOAD_SECONDS, hp.AXES}
    return sorted(hp.BUILTIN_READS - MANAGED_HYPERPARAMETERS - own)


_BFLOAT16_CAPABILITY = (8, 0)  # NVIDIA GPUs compute in bfloat16 from Ampere (compute capability 8.0) on


def _check_bfloat16(spec: SweepSpec) -> None:
    """A built-in asked to train in bfloat16 on a GPU without it (T4, V100): refused from the catalogue."""
    w = spec.workload
    if w.model is None:
        return  # a script's own dtype setting means what the script makes of it
    wanted = [w.hyperparameters.get(hp.DTYPE), *((spec.axes or {}).get(hp.DTYPE) or [])]
    if "bfloat16" not in wanted:
        return
    older = [
        f"{name} ({t.compute_capability[0]}.{t.compute_capability[1]})"
        for name in spec.instance_types
        if (t := instances.CATALOGUE.get(name)) is not None
        and t.gpus
        and t.compute_capability is not None
        and t.compute_capability < _BFLOAT16_CAPABILITY
    ]
    if older:
        where = "axes.dtype" if "bfloat16" in wanted[1:] else f"workload.hyperparameters.{hp.DTYPE}"
        raise _FieldError(
            where,
            f"bfloat16 needs a GPU of compute capability 8.0 or later; {', '.join(older)} would train in "
            "another precision: drop bfloat16 or these instance types",
        )


def _check_synthetic_workers(spec: SweepSpec) -> None:
    """Loader workers for a built-in on synthetic data: refused here, in the words the job would use."""
    w = spec.workload
    if w.model is None or not w.synthetic:
        return
    for where, given in (
        (f"workload.hyperparameters.{hp.NUM_WORKERS}", hp.NUM_WORKERS in w.hyperparameters),
        (f"axes.{hp.NUM_WORKERS}", hp.NUM_WORKERS in (spec.axes or {})),
    ):
        if given:
            raise _FieldError(
                where,
                hp.synthetic_workers_refused(
                    "set workload.synthetic: false and give the sweep data, or remove it"
                ),
            )


def _check_axes(spec: SweepSpec) -> None:
    """The axes: names free to sweep, lists of one type that names can carry, a grid of bounded size."""
    _check_bfloat16(spec)
    _check_synthetic_workers(spec)
    if spec.axes is None:
        return
    if not spec.axes:
        raise _FieldError("axes", "give at least one axis, or leave axes out")
    for name, values in spec.axes.items():
        problem = _axis_name_problem(spec, name)
        if problem:
            raise _FieldError(f"axes.{name}", problem)
        problem = axis.values_problem(values)
        if problem:
            raise _FieldError(f"axes.{name}", problem)
        if spec.workload.model is not None or name in SCRIPT_KNOBS:
            for v in values:
                if problem := _value_problem(name, v):
                    raise _FieldError(f"axes.{name}", problem)
    cells = len(spec.instance_types) * len(spec.node_counts) * len(spec.batch_sizes)
    total = cells * axis.cell_count(spec.axes)
    if total > axis.MAX_CELLS:
        raise _FieldError(
            "axes",
            f"the grid has {total:,} cells ({cells} instance types x node counts x batch sizes, times "
            f"{axis.cell_count(spec.axes):,} settings): at most {axis.MAX_CELLS:,}; sweep fewer values",
        )
    if spec.batch_size_search is not None:
        raise _FieldError("axes", "batch_sizes: auto searches one setting per job: list the batch sizes")
    if spec.phases is not None:
        raise _FieldError(
            "axes", "phases: [scan, confirm] confirms (instance type, batch size) cells: drop one of the two"
        )


# ---- JSON Schema ----------------------------------------------------------------------------------


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a sweep spec, generated from :class:`SweepSpec` (``trainsweep schema``)."""
    schema = SweepSpec.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    """:func:`json_schema` as the exact text of the shipped file."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


@cache
def shipped_schema() -> dict[str, Any]:
    """The schema file shipped in ``trainsweep/data`` (editors and the state machine use this one)."""
    text = resources.files("trainsweep").joinpath("data", SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _schema_errors(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(shipped_schema())
    errors = []
    for err in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        path = _format_path(err.absolute_path)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            for key in extra:
                errors.append((_join(path, key), "unknown field (check the spelling; see trainsweep schema)"))
            continue
        if err.validator == "required":
            missing = err.message.split("'")[1] if err.message.count("'") >= 2 else err.message
            errors.append((_join(path, missing), "required field is missing"))
            continue
        if err.validator in ("anyOf", "oneOf") and err.context:
            # The branch the value was meant for (its type matched) names the field inside it:
            # batch_sizes[1] for a bad list entry, target.value for a bad target.
            depth = len(err.absolute_path)
            specific = [
                e for e in err.context if e.validator not in ("type", "const") or len(e.absolute_path) > depth
            ]
            if specific:
                errors.append(
                    (
                        _format_path(specific[0].absolute_path) or path or "(spec)",
                        _schema_message(specific[0]),
                    )
                )
                continue
        errors.append((path or "(spec)", _schema_message(err)))
    # One message per field: an empty name breaks both minLength and pattern, say it once.
    first: dict[str, str] = {}
    for path, message in errors:
        first.setdefault(path, message)
    return list(first.items())


_PATTERN_HINTS = {
    _NAME.pattern: "is not a valid name: letters, digits, '-', '_' and '.', starting with a letter or digit",
    _REGION.pattern: "is not an AWS region name (like us-east-1)",
    _DATA_URI: "is not a data URI: use s3://bucket/prefix (or file:///path in local mode)",
}


def _schema_message(err: Any) -> str:
    if err.validator == "enum":
        allowed = [str(v) for v in err.validator_value]
        if len(allowed) <= 8:
            return f"{err.instance!r} is not one of: {', '.join(allowed)}"
        close = difflib.get_close_matches(str(err.instance), allowed, n=3)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else " (see `trainsweep schema`)"
        return f"{err.instance!r} is not a known value{hint}"
    if err.validator == "pattern" and err.validator_value in _PATTERN_HINTS:
        return f"{err.instance!r} {_PATTERN_HINTS[err.validator_value]}"
    if err.validator == "uniqueItems":
        return "lists the same value twice"
    if err.validator in ("anyOf", "oneOf") and err.context:
        # A nullable field: report the non-null branch's complaint, not "not valid under any schema".
        specific = [e for e in err.context if e.validator != "type"]
        if specific:
            return _schema_message(specific[0])
        kinds = [e.validator_value for e in err.context if e.validator == "type"]
        return f"{err.instance!r} is not of type {' or '.join(map(str, kinds))}"
    message: str = err.message
    return message


def _format_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out = f"{out}[{p}]" if isinstance(p, int) else _join(out, str(p))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---- loading --------------------------------------------------------------------------------------


# Bounds checked before a spec is validated (a spec is a few dozen lines): a small file, shallow, few
# values even with YAML aliases expanded. Beyond them a spec is refused with a clear error instead of
# growing memory without limit (a YAML alias bomb) or overflowing Python's stack (deep nesting).
SPEC_MAX_BYTES = 1024 * 1024
SPEC_READ_TIMEOUT_S = 10.0  # a FIFO or pipe that sends nothing for this long is refused
SPEC_MAX_DEPTH = 32
SPEC_MAX_VALUES = 100_000  # mappings, lists and scalars, counting every alias as the value it repeats
SPEC_MAX_ALIASES = 100


class _SpecTooLargeError(Exception):
    """A bound above is exceeded (turned into a SpecError naming the bound)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that rejects a key given twice (YAML would silently keep the last one) and refuses
    more than :data:`SPEC_MAX_ALIASES` aliases (``*name``)."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > SPEC_MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise _SpecTooLargeError(
                    f"line {mark.line + 1}, column {mark.column + 1}: more than {SPEC_MAX_ALIASES} "
                    "YAML aliases (*name); write the values out"
                )
        return super().compose_node(parent, index)


def _construct_mapping(
    loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):  # `? [a, b]`: a list or a mapping as a key
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a name, got a {type(key).__name__}", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _DuplicateKeyError(ValueError):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for JSON specs: a key given twice is an error, as in YAML."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(f"key {key!r} is given twice")
        out[key] = value
    return out


def _check_bounds(data: Any) -> None:
    """Raise :class:`_SpecTooLargeError` when ``data`` nests deeper than :data:`SPEC_MAX_DEPTH` or holds
    more than :data:`SPEC_MAX_VALUES` values once aliases are expanded, or refers to itself.

    Shared values (YAML aliases) are counted once per use without being expanded: memory and time stay
    proportional to the distinct values.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id -> (values, depth) of a container already measured
    open_ids: set[int] = set()

    def measure(value: Any, depth: int) -> tuple[int, int]:
        if not isinstance(value, (dict, list)):
            return 1, 0
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in open_ids:
            raise _SpecTooLargeError("a value contains itself (a recursive YAML alias)")
        if depth > SPEC_MAX_DEPTH:
            raise _SpecTooLargeError(f"nested deeper than {SPEC_MAX_DEPTH} levels")
        open_ids.add(key)
        children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        count, deepest = 1, 0
        for child in children:
            n, d = measure(child, depth + 1)
            count += n
            deepest = max(deepest, d + 1)
            if count > SPEC_MAX_VALUES:
                raise _SpecTooLargeError(
                    f"more than {SPEC_MAX_VALUES:,} values (YAML aliases counted as the values they repeat)"
                )
        open_ids.discard(key)
        sizes[key] = (count, deepest)
        return count, deepest

    measure(data, 0)


def _too_large(where: str, problem: str) -> SpecError:
    return SpecError(f"{where} is too large for a sweep spec: {problem}", [("(file)", problem)])


def _read(source: str | Path) -> tuple[Any, str]:
    """Read a spec file or spec text; returns (data, where) for messages."""
    text: str
    where: str
    if isinstance(source, Path) or ("\n" not in source and not source.lstrip().startswith("{")):
        path = Path(source)
        where = str(path)
        try:
            if path.is_file() and path.stat().st_size > SPEC_MAX_BYTES:
                raise _too_large(where, f"{path.stat().st_size:,} bytes (at most {SPEC_MAX_BYTES:,})")
            text = read_bounded(path, SPEC_MAX_BYTES, timeout_s=SPEC_READ_TIMEOUT_S).decode("utf-8")
        except TooLargeError:
            raise _too_large(where, f"more than {SPEC_MAX_BYTES:,} bytes") from None
        except FileNotFoundError:
            raise SpecError(f"spec file not found: {path}", [("(file)", f"{path} does not exist")]) from None
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError(f"cannot read spec file {path}: {e}", [("(file)", str(e))]) from None
    else:
        text, where = source, "spec text"
    if len(text.encode("utf-8", "surrogatepass")) > SPEC_MAX_BYTES:
        raise _too_large(where, f"more than {SPEC_MAX_BYTES:,} bytes")
    try:
        if where.endswith(".json"):
            return json.loads(text, object_pairs_hook=_unique_pairs), where
        return yaml.load(text, Loader=_UniqueKeyLoader), where  # a SafeLoader subclass
    except _SpecTooLargeError as e:
        raise _too_large(where, str(e)) from None
    except RecursionError:
        raise _too_large(where, f"nested deeper than {SPEC_MAX_DEPTH} levels") from None
    except _DuplicateKeyError as e:
        raise SpecError(f"{where} is not a valid spec: {e}", [("(file)", str(e))]) from None
    except json.JSONDecodeError as e:
        raise SpecError(
            f"{where} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
            [("(file)", f"line {e.lineno}, column {e.colno}: {e.msg}")],
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{where} is not valid YAML: {at}{problem}", [("(file)", f"{at}{problem}")]) from None


def load_spec(
    source: SweepSpec | Mapping[str, Any] | str | Path, *, allow_retired: bool = False
) -> SweepSpec:
    """Read and validate a sweep spec.

    Args:
        source: a :class:`SweepSpec`, a mapping (e.g. a state machine's input), a path to a YAML or
            JSON file, or YAML/JSON text (a string with a newline or starting with ``{``).
        allow_retired: accept instance types no job can use any more (GPUs the image has no kernels
            for, such as ml.p2's K80): ``trainsweep simulate`` replays old logs of them; plan and run
            refuse them.

    Returns:
        The validated spec, defaults filled in.

    Raises:
        SpecError: the spec is unreadable or invalid; ``errors`` lists (field path, message) pairs.
    """
    if isinstance(source, SweepSpec):
        return source
    if isinstance(source, Mapping):
        data: Any = dict(source)
        where = "spec"
    else:
        data, where = _read(source)
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise SpecError(
            f"{where}: a sweep spec is a mapping of fields, got {kind}", [("(spec)", f"got {kind}")]
        )
    try:
        _check_bounds(data)
    except _SpecTooLargeError as e:
        raise _too_large(where, str(e)) from None
    errors = _schema_errors(data)
    if not errors:
        try:
            return SweepSpec.model_validate(data, context={ALLOW_RETIRED: allow_retired})
        except ValidationError as e:
            errors = _pydantic_errors(e)
    raise SpecError(_message(where, errors), errors)


def _pydantic_errors(exc: ValidationError) -> list[tuple[str, str]]:
    errors = []
    for err in exc.errors():
        path = _format_path(err["loc"])
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _FieldError):
            errors.append((_join(path, ctx_error.field_path), ctx_error.message))
            continue
        message = err["msg"].removeprefix("Value error, ")
        errors.append((path or "(spec)", message))
    return errors


def _message(where: str, errors: list[tuple[str, str]]) -> str:
    lines = [f"invalid sweep spec ({where}):"] + [f"  {p}: {m}" for p, m in errors]
    return "\n".join(lines)


# ---- planning -------------------------------------------------------------------------------------

PriceFn = Callable[[str, str], float | None]


def _default_price(instance_type: str, region: str) -> float | None:
    from trainsweep.cost.prices import hourly_usd

    return hourly_usd(instance_type, region)


def sanitise(text: str) -> str:
    """Lower-case ``[a-z0-9-]`` form of a name: other characters become '-', runs collapse."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def make_sweep_id(name: str, now: datetime) -> str:
    """``<name>-<UTC yyyymmdd-HHMMSS>``, sanitised (the name part cut to 40 characters)."""
    stamp = now.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    base = sanitise(name)[:_NAME_MAX].strip("-") or "sweep"
    return f"{base}-{stamp}"


def job_tail(vmtype: str, batch_size: int | None, repetition: int, setting: str = "") -> str:
    """The name ending :func:`trainsweep.layout.parse_job_name` reads: ``-<VMTYPE>-<BS|packed>-e<N>``,
    after the cell's setting token (:func:`trainsweep.axes.tokens`) when the sweep has axes."""
    head = f"-{setting}" if setting else ""
    return f"{head}-{vmtype}-{'packed' if batch_size is None else batch_size}-e{repetition}"


def name_prefix(sweep_id: str, tail_length: int) -> str:
    """The sweep part of a job name: the sweep id, or its start plus a hash of all of it when too long.

    The hash keeps names unique across sweeps whose ids differ only in the part cut off.
    """
    if len(sweep_id) + tail_length <= SAGEMAKER_NAME_MAX:
        return sweep_id
    digest = hashlib.sha256(sweep_id.encode()).hexdigest()[:8]
    room = SAGEMAKER_NAME_MAX - tail_length - len(digest) - 1
    head = sweep_id[:room].rstrip("-")
    return f"{head}-{digest}" if head else digest


def job_name(sweep_id: str, vmtype: str, batch_size: int | None, repetition: int, setting: str = "") -> str:
    """A SageMaker-valid, sweep-unique job (or run) name: ``<sweep>[-<setting>]-<VMTYPE>-<BS|packed>-eN``."""
    tail = job_tail(vmtype, batch_size, repetition, setting)
    return name_prefix(sweep_id, len(tail)) + tail


def format_duration(seconds: float) -> str:
    """``3h 05m`` / ``12m 30s`` / ``45s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


@dataclass
class SweepPlan:
    """A spec expanded into jobs, with its worst-case cost and duration."""

    sweep_id: str
    spec: SweepSpec
    region: str
    bucket: str | None
    created_at: str
    jobs: list[PlannedJob]
    hourly_usd: dict[str, float | None]
    worst_case_cost_usd: float | None  # None when a cloud type has no known price in the region
    worst_case_seconds: int
    unpriced_instance_types: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What the spec asks that will not happen (e.g. a hyperparameter the built-in workload ignores)."""

    @property
    def job_count(self) -> int:
        return len(self.jobs)

    @property
    def run_count(self) -> int:
        return sum(len(j.run_names) for j in self.jobs)

    def summary_line(self) -> str:
        """One line for people: worst-case cost and time (the examples' comment line is this)."""
        cost = "unknown" if self.worst_case_cost_usd is None else f"{self.worst_case_cost_usd:.2f} USD"
        each = format_duration(self.spec.max_runtime_seconds)
        where = "local mode" if self.spec.is_local else f"in {self.region}"
        prices = "" if self.spec.is_local else ", on-demand prices"
        return (
            f"Worst-case cost: {cost} {where} ({self.job_count} jobs, up to {each} each{prices}); "
            f"worst-case time: {format_duration(self.worst_case_seconds)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything about the plan, JSON-able (``trainsweep plan --json`` prints this)."""
        return {
            "schema_version": jobs_schema_version(self.jobs),
            "sweep_id": self.sweep_id,
            "region": self.region,
            "bucket": self.bucket,
            "created_at": self.created_at,
            "spec": self.spec.to_dict(),
            "job_count": self.job_count,
            "run_count": self.run_count,
            "max_concurrency": self.spec.max_concurrency,
            "hourly_usd": dict(self.hourly_usd),
            "worst_case_cost_usd": self.worst_case_cost_usd,
            "worst_case_seconds": self.worst_case_seconds,
            "budget_usd": self.spec.budget_usd,
            "unpriced_instance_types": list(self.unpriced_instance_types),
            "warnings": list(self.warnings),
            "jobs": [j.to_json() for j in self.jobs],
        }

    def to_state_input(self) -> dict[str, Any]:
        """What :func:`trainsweep.aws.workflow.state_input` turns into the state machine's input after
        PlanSweep: the jobs (:class:`PlannedJob`) and the concurrency."""
        return {
            "sweep_id": self.sweep_id,
            "region": self.region,
            "bucket": self.bucket,
            "max_concurrency": self.spec.max_concurrency,
            "worst_case_cost_usd": self.worst_case_cost_usd,
            "worst_case_seconds": self.worst_case_seconds,
            "jobs": list(self.jobs),
        }

    def jobs_json(self) -> bytes:
        """The bytes of ``layout.jobs_key(sweep_id)``: the planned jobs.

        Deterministic for a sweep id (no planning time in it), so a retried PlanSweep rewrites the
        same bytes.
        """
        doc = self.to_dict()
        del doc["created_at"]
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    def job_for_run(self, run_name: str) -> PlannedJob | None:
        """The job that writes the log of ``run_name`` (None if the plan has no such run)."""
        return next((j for j in self.jobs if run_name in j.run_names), None)


def check_sweep_id(sweep_id: str) -> None:
    """Raise :class:`SpecError` unless ``sweep_id`` is one trainsweep makes (it names S3 prefixes and
    folders: no ``/``, no ``..``)."""
    if len(sweep_id) > _SWEEP_ID_MAX or not _SWEEP_ID.match(sweep_id):
        raise SpecError(
            f"invalid sweep id {sweep_id!r}: use 1 to {_SWEEP_ID_MAX} letters, digits and inner '-'",
            [("sweep_id", "letters, digits and inner '-' only")],
        )


def _early_stop_max_seconds(spec: SweepSpec, batch_sizes: list[int]) -> str:
    # SageMaker does not tell a job its MaxRuntime: give each batch size's watch at most half of its
    # share, so a noisy step time that never reaches the precision still ends in a prediction.
    return str(max(30, spec.max_runtime_seconds // (2 * len(batch_sizes))))


def source_location(workload: Workload) -> tuple[str, str]:
    """(source dir as the job gets it, entry point inside it) of a script workload.

    Without ``source_dir`` the entry point's folder is the source dir. A local folder stays as written
    here (``trainsweep run`` packs and uploads it, and puts the ``s3://`` URI in its place).
    """
    assert workload.entry_point is not None
    return sourcedir.split_entry(workload.entry_point, workload.source_dir)


def _entry_point_settings(w: Workload, batch_sizes: list[int]) -> dict[str, str]:
    """How an entry point (or an image's script) gets its arguments, and the sweep's values among them."""
    out: dict[str, str] = {}
    if w.steps is not None and w.steps_arg is not None:
        out[w.steps_arg] = str(w.steps)
    elif w.steps is None and w.epochs_arg is not None:
        out[w.epochs_arg] = str(w.epochs)
    if len(batch_sizes) == 1:
        out[w.batch_size_arg] = str(batch_sizes[0])
    if w.entry_point is not None:
        source, entry = source_location(w)
        out[contract.PROGRAM] = entry
        out[contract.SUBMIT_DIRECTORY] = source
    out[contract.BATCH_SIZE_ARG] = w.batch_size_arg
    out[contract.EPOCHS_ARG] = w.epochs_arg or ""
    if w.steps is not None:
        out[contract.STEPS_ARG] = w.steps_arg or ""
    if w.argument_style != "space":
        out[contract.ARGUMENT_STYLE] = w.argument_style
    if w.flags:
        out[contract.FLAGS] = json.dumps(w.flags)
    if w.arguments:
        out[contract.ARGUMENTS] = json.dumps(w.arguments)
    return out


def _command_settings(w: Workload) -> dict[str, str]:
    """A command job's template (its words, split here once) and source dir (default: the spec's folder)."""
    return {
        contract.COMMAND: json.dumps(w.command_words),
        contract.SUBMIT_DIRECTORY: w.source_dir or ".",
    }


def _script_hyperparameters(
    spec: SweepSpec, sweep_id: str, bucket: str | None, batch_sizes: list[int], run_names: list[str]
) -> dict[str, str]:
    """A script job's hyperparameters: the script's own (with its batch size and epochs) + trainsweep's."""
    w = spec.workload
    out: dict[str, str] = {}
    for key, value in w.hyperparameters.items():
        name = contract.TRAINSWEEP_PREFIX + key if key in SCRIPT_KNOBS else key
        out[name] = _format_value(value)
    out.update(_command_settings(w) if w.command is not None else _entry_point_settings(w, batch_sizes))
    if w.runs_code and w.requirements is not None:
        out[contract.REQUIREMENTS] = w.requirements
    out[contract.RUN_NAMES] = ",".join(run_names)
    out[contract.BATCH_SIZES] = ",".join(map(str, batch_sizes))
    out[contract.EPOCHS] = str(w.epochs)
    if w.steps is not None:
        out[contract.STEPS] = str(w.steps)
    out[contract.MODE] = spec.mode
    if spec.batch_size_search is not None:
        gain = spec.batch_size_search.min_gain
        out[contract.TRAINSWEEP_PREFIX + hp.BATCH_SIZE_SEARCH] = _format_value(gain)
    knob = contract.TRAINSWEEP_PREFIX + hp.EARLY_STOP_MAX_SECONDS
    if spec.mode == "early-stop" and knob not in out:
        out[knob] = _early_stop_max_seconds(spec, batch_sizes)
    if bucket:
        out[hp.LOG_BUCKET] = bucket
        out[hp.LOG_PREFIX] = layout.logs_prefix(sweep_id)
    out.update(_metric_hyperparameters(spec))
    return out


def _metric_hyperparameters(spec: SweepSpec) -> dict[str, str]:
    """A script job's metric definitions and, in full mode, the target its cells end at."""
    defs = spec.workload.metric_definitions
    if not defs:
        return {}
    out = {contract.METRIC_DEFINITIONS: json.dumps([d.model_dump() for d in defs], separators=(",", ":"))}
    if spec.target is not None and spec.mode == "full":
        out[contract.TARGET] = spec.target.rule().to_json()
    return out


def _hyperparameters(
    spec: SweepSpec, sweep_id: str, bucket: str | None, batch_sizes: list[int], run_names: list[str]
) -> dict[str, str]:
    if spec.workload.model is None:
        return _script_hyperparameters(spec, sweep_id, bucket, batch_sizes, run_names)
    out = {k: _format_value(v) for k, v in spec.workload.hyperparameters.items()}
    out[hp.WORKLOAD] = spec.workload.model
    out[hp.EPOCHS] = str(spec.workload.epochs)
    out[hp.MODE] = spec.mode
    out[hp.SYNTHETIC] = _format_value(spec.workload.synthetic)
    if len(batch_sizes) == 1 and spec.packing == "per-cell":
        out[hp.BATCH_SIZE] = str(batch_sizes[0])
    else:
        out[hp.BATCH_SIZES] = ",".join(map(str, batch_sizes))
    out[hp.RUN_NAMES] = ",".join(run_names)
    if spec.batch_size_search is not None:
        out[hp.BATCH_SIZE_SEARCH] = _format_value(spec.batch_size_search.min_gain)
    if spec.target is not None and spec.mode == "full":
        out[hp.TARGET_ACCURACY] = _format_value(spec.target.value)
    if spec.mode == "early-stop" and hp.EARLY_STOP_MAX_SECONDS not in out:
        out[hp.EARLY_STOP_MAX_SECONDS] = _early_stop_max_seconds(spec, batch_sizes)
    if bucket:
        out[hp.LOG_BUCKET] = bucket
        out[hp.LOG_PREFIX] = layout.logs_prefix(sweep_id)
    return out


def _expand(
    spec: SweepSpec, sweep_id: str, region: str, bucket: str | None, attempt: str | None = None
) -> list[PlannedJob]:
    # A resumed sweep's jobs need new SageMaker names (names are unique per account and region for
    # good), while its runs keep theirs: logs and results land under the same keys.
    job_prefix = f"{sweep_id}-{attempt}" if attempt else sweep_id
    jobs = []
    for instance_type, count in ((t, n) for t in spec.instance_types for n in spec.node_counts):
        short = instances.vmtype_with_nodes(instance_type, count)
        for rep in range(spec.repetitions):
            sizes = [bs for bs in spec.batch_sizes if spec.in_grid(instance_type, bs)]
            if not sizes:
                continue
            for name_bs, name_setting, cells in _job_groups(spec, sizes):
                name = job_name(job_prefix, short, name_bs, rep, name_setting)
                runs = [job_name(sweep_id, short, bs, rep, token) for bs, _, token in cells]
                batch_sizes = [bs for bs, _, _ in cells]
                settings = [setting for _, setting, _ in cells]
                jobs.append(
                    PlannedJob(
                        sweep_id=sweep_id,
                        job_name=name,
                        run_names=tuple(runs),
                        instance_type=instance_type,
                        instance_count=count,
                        vmtype=short,
                        batch_sizes=tuple(batch_sizes),
                        repetition=rep,
                        hyperparameters=_hyperparameters(spec, sweep_id, bucket, batch_sizes, runs)
                        | _axis_hyperparameters(settings),
                        max_runtime_seconds=spec.max_runtime_seconds,
                        spot=spec.spot,
                        max_wait_seconds=spec.spot_max_wait_seconds,
                        keep_alive_seconds=spec.warm_pool_seconds,
                        checkpoint_s3_uri=(
                            f"s3://{bucket}/{layout.checkpoint_prefix(sweep_id, name)}"
                            if spec.spot and bucket
                            else None
                        ),
                        data_s3_uri=spec.data,
                        image_uri=spec.workload.image_uri,
                        log_format=spec.workload.log_format,
                        output_s3_uri=f"s3://{bucket}/{layout.output_prefix(sweep_id)}" if bucket else None,
                        region=region,
                        **_job_settings(spec.training_job),
                        axes=tuple(settings) if spec.axes else (),
                        **job_fields(spec.tracking, spec.name, name),
                    )
                )
    return jobs


_Cell = tuple[int, axis.Setting, str]
"""A cell of a job: its batch size, its setting of the axes and the setting's name token."""


def _job_groups(spec: SweepSpec, sizes: list[int]) -> list[tuple[int | None, str, list[_Cell]]]:
    """The jobs of one instance type, node count and repetition: (the batch size the job's name carries,
    None for a packed job; the setting token it carries; its cells). A packed job scans every setting's
    batch sizes, setting after setting."""
    all_settings = spec.settings
    cells = [
        (bs, setting, token)
        for setting, token in zip(all_settings, axis.tokens(all_settings), strict=True)
        for bs in sizes
    ]
    if spec.packing == "per-cell":
        return [(bs, token, [(bs, setting, token)]) for bs, setting, token in cells]
    return [(None, "", cells)]


def _axis_hyperparameters(settings: list[axis.Setting]) -> dict[str, str]:
    """The job's axes: each cell's setting (``trainsweep-axes``, aligned with the run names) and, for a job
    of one cell, its values as the plain hyperparameters the script (or an image) reads."""
    if not any(settings):
        return {}
    out = {hp.AXES: json.dumps(settings, separators=(",", ":"))}
    if len(settings) == 1:
        out.update({name: axis.text(value) for name, value in settings[0].items()})
    return out


def _job_settings(settings: TrainingJobSettings) -> dict[str, Any]:
    """The job record's part of ``training_job`` (the training task reads each at ``$.job.<key>``);
    ``vpc_config`` only when set (the state machine picks its training task by the key's presence)."""
    out: dict[str, Any] = {
        "volume_size_gb": settings.volume_size_gb,
        "input_mode": settings.input_mode,
        "network_isolation": settings.network_isolation,
        "inter_container_encryption": settings.inter_container_encryption,
    }
    vpc = settings.vpc_config()
    return out if vpc is None else {**out, "vpc_config": vpc}


def _processes_per_host(instance_type: str) -> int | None:
    """Training processes a host of this type runs (one per GPU, one on a CPU); None when unknown."""
    if instance_type == instances.LOCAL_CPU:
        return 1
    try:
        return max(instances.lookup(instance_type).gpus, 1)
    except KeyError:
        return None  # local_gpu (this machine's GPUs) or a type the catalogue lacks: checked in the job


def _check_per_device(spec: SweepSpec) -> None:
    """A command's ``{batch_size_per_device}`` needs every batch size to split over each job's processes."""
    w = spec.workload
    words = [*w.command_words, *w.arguments] if w.command else list(w.arguments)
    if cmdline.BATCH_SIZE_PER_DEVICE not in cmdline.placeholders(words) or spec.batch_size_search:
        return
    errors = []
    for t in spec.instance_types:
        per_host = _processes_per_host(t)
        if per_host is None:
            continue
        for nodes in spec.node_counts:
            n = nodes * per_host
            bad = [b for b in spec.batch_sizes if b % n]
            if bad:
                errors.append(
                    (
                        "batch_sizes",
                        f"{', '.join(map(str, bad))} do not split over the {n} processes of {t} x{nodes} "
                        f"({{batch_size_per_device}}): use multiples of {n}",
                    )
                )
    if errors:
        raise SpecError(_message("plan", errors), errors)


def _check_jobs(jobs: list[PlannedJob]) -> None:
    """Guard the contracts downstream relies on; a failure here is a planner bug or an extreme spec."""
    names: set[str] = set()
    errors: list[tuple[str, str]] = []
    for job in jobs:
        for n in [job.job_name, *job.run_names]:
            if not _SAGEMAKER_NAME.match(n):
                errors.append(("name", f"generated name {n!r} is not a valid SageMaker name"))
        for n in dict.fromkeys([job.job_name, *job.run_names]):
            if n in names:
                errors.append(("name", f"generated job name {n!r} is not unique"))
            names.add(n)
        params = job.hyperparameters
        if len(params) > SAGEMAKER_HYPERPARAMETERS_MAX:
            errors.append(
                ("workload.hyperparameters", f"SageMaker accepts at most {SAGEMAKER_HYPERPARAMETERS_MAX}")
            )
        for k, v in params.items():
            if len(v) > SAGEMAKER_HYPERPARAMETER_VALUE_MAX:
                where = (
                    "batch_sizes"
                    if k in (hp.BATCH_SIZES, hp.RUN_NAMES)
                    else "axes"
                    if k == hp.AXES
                    else f"workload.hyperparameters.{k}"
                )
                errors.append(
                    (
                        where,
                        f"{k!r} has {len(v)} characters (SageMaker: {SAGEMAKER_HYPERPARAMETER_VALUE_MAX})",
                    )
                )
    if errors:
        errors = list(dict.fromkeys(errors))
        raise SpecError(_message("plan", errors), errors)


def _command_warnings(w: Workload) -> list[str]:
    """What a command leaves out: the sweep's batch size, or hyperparameters it has no placeholder for."""
    used = cmdline.placeholders(w.command_words)
    out = []
    if cmdline.BATCH_SIZE not in used and cmdline.BATCH_SIZE_PER_DEVICE not in used:
        out.append(
            "workload.command: has no {batch_size}: the script never gets the sweep's batch size "
            "(every cell trains the batch size the script chooses)"
        )
    out += [
        f"workload.hyperparameters.{key}: the command has no {{{key}}}; the script gets it only as "
        f"SM_HP_{key.upper()}"
        for key in w.hyperparameters
        if key not in used and key not in SCRIPT_KNOBS
    ]
    return out


def _efa_warnings(spec: SweepSpec) -> list[str]:
    """A warning per EFA instance type whose multi-node jobs run on the stack's image (NCCL over TCP)."""
    nodes = max(spec.node_counts)
    own = spec.workload.image_uri is not None
    return [
        f"{t} x{nodes}: {instances.EFA_NOTE}"
        for t in spec.instance_types
        if instances.efa_without_plugin(t, nodes, own)
    ]


def _ignored_hyperparameters(w: Workload) -> list[str]:
    """A warning per hyperparameter a built-in workload does not read (a script's own are its business)."""
    if w.command is not None:
        return _command_warnings(w)
    if w.model is None:
        return []
    return [
        f"workload.hyperparameters.{key}: the built-in workload {w.model} does not read it (it reads "
        f"{', '.join(sorted(hp.BUILTIN_READS - MANAGED_HYPERPARAMETERS - {hp.LOG_BUCKET, hp.LOG_PREFIX}))}); "
        "the jobs get it and ignore it"
        for key in w.hyperparameters
        if key not in hp.BUILTIN_READS
    ]


def plan_sweep(
    spec: SweepSpec | Mapping[str, Any] | str | Path,
    *,
    sweep_id: str | None = None,
    region: str | None = None,
    bucket: str | None = None,
    now: datetime | None = None,
    price: PriceFn | None = None,
    enforce_budget: bool = True,
    attempt: str | None = None,
    require_uploaded_source: bool = False,
    cloud: bool = False,
) -> SweepPlan:
    """Expand a spec into jobs and price its worst case.

    Args:
        spec: a spec or anything :func:`load_spec` reads.
        sweep_id: use this id (e.g. a resumed sweep); default ``<name>-<UTC yyyymmdd-HHMMSS>``.
        region: the region the jobs run in; default the spec's ``region``, else ``us-east-1``.
            A spec region that contradicts it is an error.
        bucket: the results bucket; sets the log/output/checkpoint URIs (None: URIs left None).
        now: the clock for the sweep id (default: the current UTC time).
        price: ``(instance_type, region) -> USD per hour or None``; default
            :func:`trainsweep.cost.prices.hourly_usd`. The spec's ``prices`` win over it.
        enforce_budget: raise when the worst case exceeds ``budget_usd`` (the CLI's plan view shows
            an over-budget plan before refusing it).
        attempt: a short token (``[a-z0-9]{1,8}``) for a resumed sweep: its job names get it, so
            SageMaker accepts them again; run names (logs, results) stay those of the sweep.
        require_uploaded_source: a script's ``source_dir`` must be an ``s3://`` archive (PlanSweep: the
            jobs cannot read the planner's disk).
        cloud: the sweep runs in AWS (``trainsweep run`` without ``--local``, PlanSweep outside local
            mode): ``local``/``local_gpu`` are refused, which SageMaker would reject job after job.

    Raises:
        SpecError: invalid spec or sweep id, or a budget that cannot be checked (unknown price).
        BudgetExceededError: the worst-case cost exceeds ``budget_usd``.
    """
    spec = load_spec(spec)
    region = _plan_region(spec, region)
    now = now or datetime.now(UTC)
    if sweep_id is None:
        sweep_id = make_sweep_id(spec.name, now)
    check_sweep_id(sweep_id)
    if attempt is not None and not _ATTEMPT.match(attempt):
        raise SpecError(
            f"invalid attempt {attempt!r}: 1 to 8 lower-case letters and digits", [("attempt", "")]
        )
    created = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _check_one_sweep(spec, cloud=cloud, require_uploaded_source=require_uploaded_source)
    _check_per_device(spec)
    jobs = _expand(spec, sweep_id, region, bucket, attempt)
    _check_jobs(jobs)
    prices = hourly_prices(spec, region, price or _default_price)
    unpriced = [t for t, p in prices.items() if p is None]
    cost: float | None = None
    if not unpriced:
        cost = round(sum(j.worst_case_usd(prices[j.instance_type]) or 0.0 for j in jobs), 2)
    per_job_s = spec.spot_max_wait_seconds or spec.max_runtime_seconds
    worst_s = math.ceil(len(jobs) / spec.max_concurrency) * per_job_s

    plan = SweepPlan(
        sweep_id=sweep_id,
        spec=spec,
        region=region,
        bucket=bucket,
        created_at=created,
        jobs=jobs,
        hourly_usd=prices,
        worst_case_cost_usd=cost,
        worst_case_seconds=worst_s,
        unpriced_instance_types=unpriced,
        warnings=_ignored_hyperparameters(spec.workload) + _efa_warnings(spec),
    )
    if enforce_budget:
        check_budget(plan)
    return plan


def _plan_region(spec: SweepSpec, region: str | None) -> str:
    """The region the sweep runs in: ``region``, else the spec's, else us-east-1; a spec that names
    another region than ``region`` is an error."""
    if region and spec.region and region != spec.region:
        raise SpecError(
            f"invalid sweep spec: region {spec.region!r} is not the region the sweep runs in ({region!r})",
            [("region", f"spec says {spec.region!r}, the sweep runs in {region!r}")],
        )
    return region or spec.region or "us-east-1"


def _check_one_sweep(spec: SweepSpec, *, cloud: bool, require_uploaded_source: bool) -> None:
    """Refuse what one sweep cannot run: two phases, local types in AWS, a source folder on the
    planner's disk where the jobs need an uploaded one."""
    if spec.phases:
        raise SpecError(
            "invalid sweep spec: phases: [scan, confirm] runs as two sweeps, which `trainsweep run SPEC` "
            "starts one after the other (trainsweep.phases gives each phase's spec); a single sweep "
            "cannot run both",
            [("phases", "start a two-phase sweep with `trainsweep run`")],
        )
    if cloud and spec.is_local:
        raise SpecError(
            f"invalid sweep spec:\n  instance_types: {', '.join(spec.instance_types)} run only in local mode "
            "(`trainsweep run SPEC --local`); to run in AWS, list SageMaker types such as ml.g4dn.xlarge",
            [("instance_types", "local and local_gpu run only in local mode (trainsweep run --local)")],
        )
    w = spec.workload
    if require_uploaded_source and w.runs_code and not sourcedir.is_remote(w.source_dir):
        where = w.source_dir or ("the spec file's folder" if w.command else "the entry point's folder")
        raise SpecError(
            f"invalid sweep spec: workload.source_dir ({where}) is a folder on your disk, which training "
            "jobs cannot read: start the sweep with `trainsweep run SPEC` (it packs and uploads the "
            "folder), or upload a sourcedir.tar.gz and give its s3:// URI as source_dir",
            [("workload.source_dir", "must be an s3:// URI when the state machine is started directly")],
        )


def hourly_prices(spec: SweepSpec, region: str, price: PriceFn = _default_price) -> dict[str, float | None]:
    """USD per hour of each of the spec's instance types: nothing for local types, the spec's ``prices``,
    else ``price`` (the catalogue's, by default); None where nothing prices it."""
    return {
        t: 0.0 if t in LOCAL_TYPES else spec.prices.get(t) or price(t, region) for t in spec.instance_types
    }


def check_budget(plan: SweepPlan) -> None:
    """Raise when the plan's worst case exceeds the spec's ``budget_usd`` (or cannot be priced)."""
    budget = plan.spec.budget_usd
    if budget is None:
        return
    if plan.worst_case_cost_usd is None:
        unpriced = plan.unpriced_instance_types
        example = ", ".join(f"{t}: <USD per hour>" for t in unpriced)
        raise SpecError(
            f"cannot check budget_usd: no price known for {', '.join(unpriced)} in {plan.region}; "
            "give the on-demand price in the spec "
            f"as `prices: {{{example}}}` (USD per instance-hour, from "
            "https://aws.amazon.com/sagemaker/pricing/), or remove budget_usd",
            [
                (
                    "budget_usd",
                    f"no price known for {', '.join(unpriced)} in {plan.region}: give them in the spec as "
                    f"`prices: {{{example}}}` (USD per instance-hour), or remove budget_usd",
                )
            ],
        )
    if plan.worst_case_cost_usd > budget:
        raise BudgetExceededError(
            f"worst-case cost {plan.worst_case_cost_usd:.2f} USD exceeds budget_usd {budget:.2f} USD "
            f"({plan.job_count} jobs × up to {plan.spec.max_runtime_seconds} s each); lower "
            "max_runtime_seconds, repetitions or the grid, or raise budget_usd"
        )
