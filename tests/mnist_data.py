"""A small MNIST-shaped data set on disk, for the tests that train the built-in MNIST CNN on real files."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_mnist(path: Path, train: int, test: int) -> Path:
    """Random images and labels in ``mnist.npz``'s layout (the built-in workload's ``data`` channel)."""
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.integers(0, 255, (train, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, train),
        x_test=rng.integers(0, 255, (test, 28, 28), dtype=np.uint8),
        y_test=rng.integers(0, 10, test),
    )
    return path
