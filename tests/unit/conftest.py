"""Factories for small synthetic logs (the real logs stay in ../shared; these are made here; the cloud-ML
log factory, ``cloudml_log``, is shared with tests/processes and lives in tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from trainsweep.logs import mllog

# A deployed trainsweep stack as the CLI reads it (its bucket and state machine outputs), for moto's
# CloudFormation: the cloud commands' tests create it.
CLOUD_STACK = {
    "Resources": {
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "results-bucket"}},
        "Machine": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "StateMachineName": "sweep",
                "DefinitionString": json.dumps(
                    {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
                ),
                "RoleArn": "arn:aws:iam::123456789012:role/sfn",
            },
        },
    },
    "Outputs": {
        "BucketName": {"Value": {"Ref": "Bucket"}},
        "StateMachineArn": {"Value": {"Ref": "Machine"}},
    },
}


def _mllog_lines(
    *,
    epochs: int = 2,
    steps: int = 3,
    ranks: int = 1,
    epoch_base: int = 1,
    batch_size: int = 64,
    samples: int = 192,
    failure: dict | None = None,
    prediction: dict | None = None,
    legacy: bool = True,
) -> bytes:
    """A log as the trainsweep container writes it: MLLOG events next to the seeds' human-readable lines."""
    out: list[str] = []
    t = 1_700_000_000_000.0

    def ev(key: str, value: object = None, **meta: object) -> None:
        nonlocal t
        t += 10
        out.append(mllog.format_line(key, value, metadata=dict(meta), time_ms=t))

    ev(mllog.INIT_START, rank=0)
    ev(mllog.GLOBAL_BATCH_SIZE, batch_size, rank=0)
    ev(mllog.TRAIN_SAMPLES, samples, rank=0)
    ev(mllog.EPOCH_COUNT, epochs, rank=0)
    ev(mllog.INSTANCE_TYPE, "ml.g4dn.xlarge", rank=0)
    ev(mllog.GPUS, 1, rank=0)
    ev(mllog.WORLD_SIZE, ranks, rank=0)
    ev(mllog.INIT_TIME, 1.5, rank=0)
    ev(mllog.INIT_STOP, rank=0)
    ev(mllog.RUN_START, rank=0)
    for e in range(epoch_base, epoch_base + epochs):
        for r in range(ranks):
            ev(mllog.EPOCH_START, rank=r, epoch_num=e)
        for s in range(1, steps + 1):
            for r in range(ranks):
                ev(
                    mllog.STEP,
                    {"step": s, "step_s": 0.5 + r, "data_wait_s": 0.1, "compute_s": 0.4 + r},
                    rank=r,
                    epoch_num=e,
                )
                if legacy and r == 0:
                    out.append(f"{s} step training time: {0.5 + r}s")
        for r in range(ranks):
            ev(mllog.VALIDATION_TIME, 0.25, rank=r, epoch_num=e)
            ev(mllog.EVAL_ACCURACY, 0.5 + e / 100, rank=r, epoch_num=e)
            ev(mllog.EPOCH_TIME, 2.0, rank=r, epoch_num=e)
            ev(mllog.EPOCH_STOP, rank=r, epoch_num=e)
        if legacy:
            out.append("Epoch time: 2.0s")
    if prediction is not None:
        ev(mllog.PREDICTION, prediction, rank=0)
    if failure is not None:
        ev(mllog.FAILURE, failure, rank=0)
    else:
        ev(mllog.FIT_TIME, 4.5, rank=0)
        ev(mllog.RUN_STOP, rank=0, status="success")
    return ("\n".join(out) + "\n").encode()


@pytest.fixture
def mllog_log() -> Callable[..., bytes]:
    """``mllog_log(epochs=2, steps=3, ranks=1, ...)`` -> bytes of a trainsweep container log."""
    return _mllog_lines
