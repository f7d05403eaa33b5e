"""A built-in's data through DataLoader workers: the same batches, in the same order, as the device-resident
batches (up to the random flips), and the epoch's partial batch on the model's device."""

from __future__ import annotations

import pytest
import torch

from trainsweep.training.data import DATASETS, Batches
from trainsweep.training.loader import LoaderBatches, through_workers

CIFAR = DATASETS["resnet50-cifar10"]


def _batches(train: bool) -> Batches:
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 255, (70, 3, 32, 32), generator=g, dtype=torch.uint8)
    y = torch.arange(70)
    return Batches(x, y, batch_size=16, info=CIFAR, train=train, seed=3)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_yields_the_device_resident_batches(workers: int) -> None:
    plain, loaded = _batches(False), LoaderBatches(_batches(False), workers=workers, seed=3)
    pairs = list(zip(plain, loaded, strict=True))
    assert len(pairs) == len(plain) == 5
    for (x0, y0), (x1, y1) in pairs:
        assert torch.equal(y0, y1) and torch.allclose(x0, x1, atol=1e-5)


def test_training_epochs_keep_the_shuffled_order_and_flip_some_samples() -> None:
    plain, loaded = _batches(True), LoaderBatches(_batches(True), workers=0, seed=3)
    for _ in range(2):  # the order changes each epoch, alike in both
        assert [y.tolist() for _, y in plain] == [y.tolist() for _, y in loaded]
    unflipped = LoaderBatches(_batches(False), workers=0, seed=3)
    x_eval = torch.cat([x for x, _ in unflipped])
    x_train, y_train = (torch.cat(t) for t in zip(*loaded, strict=True))
    same = [torch.allclose(x_train[i], x_eval[int(y)], atol=1e-5) for i, y in enumerate(y_train)]
    assert 0 < sum(same) < len(same)


def test_the_partial_batch_and_no_workers_at_all() -> None:
    loaded = LoaderBatches(_batches(False), workers=0, seed=3)
    x, y = loaded.partial_batch()
    assert x.shape == (6, 3, 32, 32) and x.dtype == torch.float32 and y.tolist() == list(range(6))
    train, evaluation = _batches(True), _batches(False)
    assert through_workers(train, evaluation, None, 0) == (train, evaluation)
