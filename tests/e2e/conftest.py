"""What the local-mode end-to-end tests share: a small MNIST-shaped data set on disk
(``tests/mnist_data.py``), and a quick spec."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.mnist_data import write_mnist as write_mnist  # the e2e tests import it from here


def write_spec(tmp_path: Path, data: Path, **extra: Any) -> Path:
    """``spec.json``: the built-in MNIST CNN on ``data``, 3 steps of 1 epoch at batch sizes 16 and 128 in
    local mode; ``extra`` replaces any top-level field."""
    spec = {
        "name": "e2e",
        "workload": {
            "model": "mnist-cnn",
            "epochs": 1,
            "synthetic": False,
            "hyperparameters": {"max-steps-per-epoch": 3, "max-eval-batches": 1},
        },
        "instance_types": ["local"],
        "batch_sizes": [16, 128],
        "repetitions": 1,
        "max_runtime_seconds": 300,
        "max_concurrency": 2,
        "data": data.resolve().as_uri(),
        **extra,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def sigint_as_a_terminal_gives_it() -> None:
    """``preexec_fn`` of a CLI process a test interrupts: SIGINT at its default, as a shell starts a
    command, whatever this test process inherited (a library run in-process earlier may leave SIGINT
    ignored, and an ignored SIGINT stays ignored across exec: the CLI would never see the Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
