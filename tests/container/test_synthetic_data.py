"""Synthetic data is a task a model can learn: the evaluation draw has the training draw's classes."""

from __future__ import annotations

import pytest
import torch

from trainsweep.training.data import DATASETS, SyntheticBatches


def _draws(batch_size: int) -> tuple[SyntheticBatches, SyntheticBatches]:
    info = DATASETS["mnist-cnn"]
    kw = dict(batch_size=batch_size, device=torch.device("cpu"), seed=0, train_samples=1920)
    return SyntheticBatches(info, train=True, **kw), SyntheticBatches(info, train=False, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch_size", [32, 128])
def test_the_training_draws_class_means_classify_the_evaluation_draw(batch_size):
    """Batch size 128 draws more training samples (4 batches) than the evaluation has (320): the two draws
    differ, and with random labels the evaluation could only be guessed (accuracy about 0.1)."""
    train, evaluation = _draws(batch_size)
    x, y = train.x.flatten(1), train.y
    means = torch.stack([x[y == c].mean(0) for c in range(10)])
    correct = total = 0
    for xb, yb in evaluation:
        guess = torch.cdist(xb.flatten(1), means).argmin(1)
        correct += int((guess == yb).sum())
        total += len(yb)
    assert total == 320
    assert correct / total > 0.9


def test_the_evaluation_draw_is_other_samples_than_the_training_draw():
    train, evaluation = _draws(32)
    assert not torch.equal(train.x[: len(evaluation.x)], evaluation.x)
