"""Names of the hyperparameters the training container reads (SageMaker passes them all as strings).

One source of truth for the spec's job expansion (writer), the state machine (passes them through)
and the container entry point (reader). Names with dashes follow the seed scripts.
"""

import math

WORKLOAD = "workload"  # mnist-cnn | resnet50-cifar10
EPOCHS = "epochs"
BATCH_SIZE = "batch-size"  # one batch size (per-cell jobs)
BATCH_SIZES = "batch-sizes"  # comma-separated, packed (per-instance) jobs scan them in turn
RUN_NAMES = "run-names"  # comma-separated, aligned with batch-sizes; one log per run name
NUM_GPUS = "num-gpus"  # "0" = all visible
MODE = "mode"  # full | early-stop
SYNTHETIC = "synthetic"  # "true" -> random tensors of the dataset's shape
SYNTHETIC_SAMPLES = "synthetic-samples"  # synthetic epoch size (all batch sizes see the same epoch)
LEARNING_RATE = "learning-rate"
EARLY_STOP_PRECISION = "early-stop-precision"  # relative 95 % CI half-width, default "0.02"
EARLY_STOP_MAX_STEPS = "early-stop-max-steps"
EARLY_STOP_MAX_SECONDS = "early-stop-max-seconds"
EARLY_STOP_MAX_EPOCHS = "early-stop-max-epochs"  # epochs watched at most, default "2"
EARLY_STOP_MIN_SECONDS = "early-stop-min-seconds"  # seconds watched before the precision is trusted, "10"
MAX_STEPS_PER_EPOCH = "max-steps-per-epoch"  # tests and quick local runs: cap an epoch's steps
MAX_EVAL_BATCHES = "max-eval-batches"  # tests and quick local runs: cap a validation pass's batches
EARLY_STOP_MIN_STEPS = "early-stop-min-steps"  # steady steps before the precision is trusted, default "10"
VALIDATION_BATCHES = "validation-batches"  # early-stop: batches timed (first = warm-up), default "6"
DOWNLOAD = "download"  # "true": download when the train channel is missing (default: only in /opt/ml)
TARGET_ACCURACY = (
    "target-accuracy"  # full mode: stop after the first evaluation reaching it (the spec's target)
)
BATCH_SIZE_SEARCH = "batch-size-search"  # packed: stop at OOM or when 2 doublings gain < this share
DTYPE = "dtype"  # float32 | float16 | bfloat16: the numeric precision a built-in trains in (autocast)
COMPILE = "compile"  # true: the built-in's model is wrapped in torch.compile
NUM_WORKERS = "num_workers"  # a built-in's data through a DataLoader with this many worker processes
SEED = "seed"  # random seed of the model initialisation and of synthetic data, default "0"
AXES = "trainsweep-axes"  # JSON list, aligned with the run names: each cell's {axis: value} (spec's axes)
LOG_BUCKET = "trainsweep-log-bucket"  # where the container uploads its logs
LOG_PREFIX = "trainsweep-log-prefix"  # sweeps/<id>/logs/ (from trainsweep.layout.logs_prefix)
LOG_UPLOAD_SECONDS = "trainsweep-log-upload-seconds"  # period of the in-run upload, default "30"

# Everything under these names is a trainsweep setting, not a model hyperparameter.
RESERVED_PREFIX = "trainsweep-"

BUILTIN_READS = frozenset(
    {
        WORKLOAD,
        EPOCHS,
        BATCH_SIZE,
        BATCH_SIZES,
        RUN_NAMES,
        NUM_GPUS,
        MODE,
        SYNTHETIC,
        SYNTHETIC_SAMPLES,
        LEARNING_RATE,
        EARLY_STOP_PRECISION,
        EARLY_STOP_MAX_STEPS,
        EARLY_STOP_MAX_SECONDS,
        EARLY_STOP_MAX_EPOCHS,
        EARLY_STOP_MIN_SECONDS,
        MAX_STEPS_PER_EPOCH,
        MAX_EVAL_BATCHES,
        EARLY_STOP_MIN_STEPS,
        VALIDATION_BATCHES,
        DOWNLOAD,
        TARGET_ACCURACY,
        BATCH_SIZE_SEARCH,
        SEED,
        DTYPE,
        COMPILE,
        NUM_WORKERS,
        AXES,
        LOG_BUCKET,
        LOG_PREFIX,
        LOG_UPLOAD_SECONDS,
    }
)
"""Every name the built-in workloads' container reads; it ignores any other (the seeds' ``file-output``)."""

# What each value must be. The container reads values with :func:`parse_value`; the spec checks the same
# rules at plan time, so a bad value fails before any instance starts. Names not listed pass through.
WHOLE_NUMBER_MINIMUM: dict[str, int] = {
    EPOCHS: 1,
    BATCH_SIZE: 1,
    NUM_GPUS: 0,
    SYNTHETIC_SAMPLES: 0,
    MAX_STEPS_PER_EPOCH: 0,
    MAX_EVAL_BATCHES: 0,
    EARLY_STOP_MAX_STEPS: 3,
    EARLY_STOP_MIN_STEPS: 2,
    EARLY_STOP_MIN_SECONDS: 0,
    VALIDATION_BATCHES: 2,
    SEED: 0,
    NUM_WORKERS: 0,
}
POSITIVE_NUMBERS = frozenset(
    {LEARNING_RATE, EARLY_STOP_MAX_SECONDS, EARLY_STOP_MAX_EPOCHS, LOG_UPLOAD_SECONDS, TARGET_ACCURACY}
)
FRACTIONS = frozenset({EARLY_STOP_PRECISION})  # 0 < x < 1
SWITCHES = frozenset({SYNTHETIC, DOWNLOAD, COMPILE})  # true/false (also 1/0, yes/no)
DTYPES = ("float32", "float16", "bfloat16")
CHOICES: dict[str, tuple[str, ...]] = {DTYPE: DTYPES}
"""Names whose value is one of a few words."""
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def parse_value(name: str, text: str) -> int | float | bool | str:
    """The value of hyperparameter ``name`` as the container reads it (SageMaker may quote it).

    Raises:
        ValueError: with what the value must be, e.g. ``must be a whole number >= 3, got 'x'``.
    """
    v = text.strip().strip('"').strip()
    if name in WHOLE_NUMBER_MINIMUM:
        minimum = WHOLE_NUMBER_MINIMUM[name]
        if not (v.isascii() and v.isdigit()):
            raise ValueError(f"must be a whole number >= {minimum}, got {text!r}")
        if int(v) < minimum:
            raise ValueError(f"must be >= {minimum}, got {int(v)}")
        return int(v)
    if name in POSITIVE_NUMBERS or name in FRACTIONS:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"must be a number, got {text!r}") from None
        if not (x > 0 and math.isfinite(x)):
            raise ValueError(f"must be a positive number, got {text!r}")
        if name in FRACTIONS and x >= 1:
            raise ValueError(f"is a fraction between 0 and 1 (0.02 = 2 %), got {text!r}")
        return x
    if name in SWITCHES:
        if v.lower() in _TRUE:
            return True
        if v.lower() in _FALSE:
            return False
        raise ValueError(f"must be true or false, got {text!r}")
    if name in CHOICES:
        if v not in CHOICES[name]:
            raise ValueError(f"must be one of {', '.join(CHOICES[name])}, got {text!r}")
        return v
    return text


def synthetic_workers_refused(fix: str) -> str:
    """Why loader workers are refused for synthetic data (by ``plan`` and by the job), then ``fix``."""
    return (
        f"{NUM_WORKERS!r} feeds real data through loader worker processes; synthetic batches are made on "
        f"the device: {fix}"
    )
