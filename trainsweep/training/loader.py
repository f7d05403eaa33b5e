"""A built-in workload's data through a PyTorch ``DataLoader`` with ``num_workers`` worker processes.

Without ``num_workers`` a built-in holds its dataset in device memory and batches it by index: the loader
costs next to nothing. With it (a hyperparameter, or an axis: ``axes: {num_workers: [0, 2, 4]}``) the
samples stay in host memory as bytes and each is converted, normalised and (CIFAR) flipped on the CPU, one
sample at a time, in ``num_workers`` worker processes (0: in the training process), then the batch is
copied to the device: the input pipeline of a typical training script, whose data wait the step timing
measures and the data-stall what-if predicts. The batches are the same ones, in the same order (the
random flips are drawn per sample instead of per batch).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset

from trainsweep.training.data import Batches


class _Samples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """One sample at a time, prepared as :meth:`Batches._prepare` prepares a batch."""

    def __init__(self, batches: Batches, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y
        self.mean, self.std = batches.mean.cpu().view(-1, 1, 1), batches.std.cpu().view(-1, 1, 1)
        self.normalise = batches.normalise
        self.flip = batches.train and batches.info.flip

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        sample = self.x[i].float()
        if self.normalise:
            sample = (sample / 255.0 - self.mean) / self.std
        if self.flip and bool(torch.rand(()) < 0.5):
            sample = sample.flip(2)
        return sample, self.y[i]


class _EpochBatches:
    """The index lists of the coming epoch (a batch sampler the loader asks anew each epoch)."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class LoaderBatches(Batches):
    """:class:`Batches` whose epochs come through a ``DataLoader`` with ``workers`` worker processes."""

    def __init__(self, batches: Batches, *, workers: int, seed: int) -> None:
        self.__dict__.update(batches.__dict__)
        self.device = batches.x.device
        self.x, self.y = batches.x.cpu(), batches.y.cpu()
        self.mean, self.std = self.mean.cpu(), self.std.cpu()
        self.workers = workers
        self.sampler = _EpochBatches()
        self.loader = DataLoader(
            _Samples(self, self.x, self.y),
            batch_sampler=self.sampler,
            num_workers=workers,
            pin_memory=self.device.type == "cuda",
            persistent_workers=workers > 0,
            generator=torch.Generator().manual_seed(seed),
        )

    def _to_device(self, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return xb.to(self.device, non_blocking=True), yb.to(self.device, non_blocking=True)

    def partial_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        got = super().partial_batch()
        return None if got is None else self._to_device(*got)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n_all = len(self.x)
        perm = torch.randperm(n_all, generator=self.generator) if self.train else torch.arange(n_all)
        idx = perm[self.rank :: self.world_size][: self.samples].tolist()
        self.sampler.batches = [
            idx[i * self.batch_size : (i + 1) * self.batch_size] for i in range(len(self))
        ]
        for xb, yb in self.loader:
            yield self._to_device(xb, yb)


def through_workers(
    train: Batches, evaluation: Batches, workers: int | None, seed: int
) -> tuple[Batches, Batches]:
    """The training and evaluation batches through ``workers`` loader processes (None: as they are)."""
    if workers is None:
        return train, evaluation
    return LoaderBatches(train, workers=workers, seed=seed), LoaderBatches(
        evaluation, workers=workers, seed=seed
    )
