"""Names of the hyperparameters the training container reads (SageMaker passes them all as strings).

One source of truth for the spec's job expansion (writer), the state machine (passes them through)
and the container entry point (reader). Names with dashes follow the seed scripts.
"""

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
MAX_STEPS_PER_EPOCH = "max-steps-per-epoch"  # tests and quick local runs: cap an epoch's steps
MAX_EVAL_BATCHES = "max-eval-batches"  # tests and quick local runs: cap a validation pass's batches
EARLY_STOP_MIN_STEPS = "early-stop-min-steps"  # steady steps before the precision is trusted, default "10"
VALIDATION_BATCHES = "validation-batches"  # early-stop: batches timed (first = warm-up), default "6"
DOWNLOAD = "download"  # "true": download when the train channel is missing (default: only in /opt/ml)
SEED = "seed"  # random seed of the model initialisation and of synthetic data, default "0"
LOG_BUCKET = "trainsweep-log-bucket"  # where the container uploads its logs
LOG_PREFIX = "trainsweep-log-prefix"  # sweeps/<id>/logs/ (from trainsweep.layout.logs_prefix)
LOG_UPLOAD_SECONDS = "trainsweep-log-upload-seconds"  # period of the in-run upload, default "30"

# Everything under these names is a trainsweep setting, not a model hyperparameter.
RESERVED_PREFIX = "trainsweep-"
