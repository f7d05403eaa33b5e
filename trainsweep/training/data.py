"""The workloads' datasets: from the ``train`` channel, a standard download (cloud only), or synthetic.

Channel formats (simple, no torchvision): MNIST as Keras' ``mnist.npz`` (``x_train``, ``y_train``,
``x_test``, ``y_test``); CIFAR-10 as the python pickles (``data_batch_1..5``, ``test_batch``, in the
channel or its ``cifar-10-batches-py/`` folder) or a ``cifar10.npz`` with the same keys as MNIST's.
Datasets this small are held in device memory and batched by index, so the loader adds little.
"""

from __future__ import annotations

import math
import pickle
import tarfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainsweep.training.config import JobConfigError


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    shape: tuple[int, int, int]  # C, H, W
    classes: int
    train_samples: int
    eval_samples: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    url: str
    flip: bool  # random horizontal flips (CIFAR augmentation)


DATASETS = {
    "mnist-cnn": DatasetInfo(
        "mnist", (1, 28, 28), 10, 60000, 10000, (0.1307,), (0.3081,),
        "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz", False,
    ),
    "resnet50-cifar10": DatasetInfo(
        "cifar10", (3, 32, 32), 10, 50000, 10000, (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616),
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", True,
    ),
}  # fmt: skip


@dataclass
class Arrays:
    x_train: np.ndarray  # uint8, N x C x H x W
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _nchw(x: np.ndarray, info: DatasetInfo) -> np.ndarray:
    c, h, w = info.shape
    if x.ndim == 3:
        x = x[:, None, :, :]
    elif x.ndim == 2:
        x = x.reshape(-1, c, h, w)
    elif x.ndim == 4 and x.shape[-1] == c and x.shape[1] != c:
        x = x.transpose(0, 3, 1, 2)
    if x.shape[1:] != (c, h, w):
        raise JobConfigError(f"{info.name}: samples have shape {x.shape[1:]}, expected {(c, h, w)}")
    return np.ascontiguousarray(x)


def _from_npz(path: Path, info: DatasetInfo) -> Arrays:
    try:
        with np.load(path) as z:
            arrs = [z[k] for k in ("x_train", "y_train", "x_test", "y_test")]
    except KeyError as e:
        raise JobConfigError(
            f"{path.name} lacks array {e}; expected x_train, y_train, x_test, y_test"
        ) from None
    except (OSError, ValueError) as e:
        raise JobConfigError(f"{path.name} is not a readable .npz file: {e}") from None
    x_tr, y_tr, x_te, y_te = arrs
    return Arrays(
        _nchw(x_tr, info), y_tr.astype(np.int64).ravel(), _nchw(x_te, info), y_te.astype(np.int64).ravel()
    )


def _unpickle(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open("rb") as f:
            d = pickle.load(f, encoding="bytes")
        return np.asarray(d[b"data"], dtype=np.uint8), np.asarray(d[b"labels"], dtype=np.int64)
    except (OSError, pickle.UnpicklingError, KeyError, EOFError) as e:
        raise JobConfigError(f"{path} is not a CIFAR-10 python batch: {e}") from None


def _from_cifar_pickles(folder: Path, info: DatasetInfo) -> Arrays:
    parts = [_unpickle(p) for p in sorted(folder.glob("data_batch_*"))]
    x_te, y_te = _unpickle(folder / "test_batch")
    x_tr = np.concatenate([p[0] for p in parts])
    y_tr = np.concatenate([p[1] for p in parts])
    return Arrays(_nchw(x_tr, info), y_tr, _nchw(x_te, info), y_te)


def from_channel(channel: Path, info: DatasetInfo) -> Arrays:
    """Read a dataset from a channel folder; raises :class:`JobConfigError` if it holds none."""
    npz = channel / f"{info.name}.npz"
    if npz.is_file():
        return _from_npz(npz, info)
    if info.name == "cifar10":
        for folder in (channel, channel / "cifar-10-batches-py"):
            if (folder / "test_batch").is_file() and any(folder.glob("data_batch_*")):
                return _from_cifar_pickles(folder, info)
    expected = f"{info.name}.npz" + (" or the CIFAR-10 python batches" if info.name == "cifar10" else "")
    raise JobConfigError(f"channel 'train' ({channel}) holds no {info.name} data: expected {expected}")


def download(info: DatasetInfo, dest: Path) -> Arrays:
    """The dataset's standard download (cloud only), cached under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / Path(info.url).name
    if not target.is_file():
        try:
            urllib.request.urlretrieve(info.url, target)
        except OSError as e:
            raise JobConfigError(f"download of {info.url} failed: {e}") from None
    if info.name == "mnist":
        return _from_npz(target, info)
    with tarfile.open(target) as tar:
        tar.extractall(dest, filter="data")
    return _from_cifar_pickles(dest / "cifar-10-batches-py", info)


class Batches:
    """One rank's share of a dataset, batched on ``device``; iterate for one epoch."""

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        batch_size: int,
        info: DatasetInfo,
        train: bool,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        normalise: bool = True,
    ):
        self.x, self.y = x, y
        self.batch_size = batch_size
        self.info = info
        self.train = train
        self.rank, self.world_size = rank, world_size
        self.normalise = normalise
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        self.mean = torch.tensor(info.mean, device=x.device).view(1, -1, 1, 1)
        self.std = torch.tensor(info.std, device=x.device).view(1, -1, 1, 1)
        n = len(self.x)
        self.samples = n // world_size  # equal shards keep DDP ranks in step
        if self.samples < batch_size:
            raise JobConfigError(
                f"dataset too small: {n} samples ({self.samples} per rank) is fewer than one batch of "
                f"{batch_size}; use a smaller batch size"
            )

    def __len__(self) -> int:
        steps = math.ceil(self.samples / self.batch_size)
        # BatchNorm cannot train on a batch of one: such a last batch is dropped
        return steps - 1 if self.train and self.samples % self.batch_size == 1 else steps

    @property
    def full_batch_equivalents(self) -> float:
        """The epoch's work in full batches (the last batch is partial)."""
        return min(self.samples / self.batch_size, float(len(self)))

    @property
    def last_batch_size(self) -> int:
        """Samples in the epoch's last batch (less than ``batch_size`` when it is partial)."""
        return self.samples - (len(self) - 1) * self.batch_size

    def partial_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """A batch of the epoch's last, partial batch's shape (None when every batch is full).

        A new input shape costs a GPU one-off work the first time (cuDNN autotuning with
        ``cudnn.benchmark``): early-stop mode times it so that the run's one-off cost is complete.
        """
        size = self.last_batch_size
        if size >= self.batch_size:
            return None
        return self._prepare(self.x[:size]), self.y[:size]

    def _prepare(self, xb: torch.Tensor) -> torch.Tensor:
        xb = xb.float() if xb.dtype != torch.float32 else xb
        if self.normalise:
            xb = (xb / 255.0 - self.mean) / self.std
        if self.train and self.info.flip:
            flip = torch.rand(xb.shape[0], device=xb.device) < 0.5
            xb = torch.where(flip.view(-1, 1, 1, 1), xb.flip(3), xb)
        return xb

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n_all = len(self.x)
        perm = torch.randperm(n_all, generator=self.generator) if self.train else torch.arange(n_all)
        idx = perm[self.rank :: self.world_size][: self.samples].to(self.x.device)
        for i in range(len(self)):
            sel = idx[i * self.batch_size : (i + 1) * self.batch_size]
            yield self._prepare(self.x.index_select(0, sel)), self.y.index_select(0, sel)


SYNTHETIC_SIGNAL = 0.5
"""How strongly a synthetic sample shows its class: the class's pattern, times this, on unit noise."""

_PATTERN_SEED_OFFSET = 7919
_EVAL_SEED_OFFSET = 104729


def synthetic_pool(
    info: DatasetInfo, size: int, *, seed: int, train: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` synthetic samples and their labels: unit noise plus :data:`SYNTHETIC_SIGNAL` x a random
    pattern of the sample's class.

    The class patterns depend on ``seed`` only, so the training and the evaluation draws (independent
    noise and labels) are one task: a model learns it in a few steps, and its evaluation accuracy says
    how well it generalises, as with real data. Pure random labels could only be memorised, and an
    evaluation draw of other samples would stay at chance whatever the training did.
    """
    patterns = torch.randn(
        (info.classes, *info.shape),
        generator=torch.Generator(device="cpu").manual_seed(seed + _PATTERN_SEED_OFFSET),
    )
    g = torch.Generator(device="cpu").manual_seed(seed if train else seed + _EVAL_SEED_OFFSET)
    x = torch.randn((size, *info.shape), generator=g)
    y = torch.randint(0, info.classes, (size,), generator=g)
    return x + SYNTHETIC_SIGNAL * patterns[y], y


class SyntheticBatches(Batches):
    """Synthetic samples of the dataset's shape (:func:`synthetic_pool`), generated once on the device and
    cycled: throughput as with real data, and a task a model can learn."""

    POOL = 4

    def __init__(
        self,
        info: DatasetInfo,
        *,
        batch_size: int,
        train: bool,
        device: torch.device,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        train_samples: int | None = None,
    ):
        samples = info.train_samples if train else info.eval_samples
        if train_samples:  # a smaller synthetic dataset; validation keeps the real train/eval ratio
            ratio = info.eval_samples / info.train_samples
            eval_samples = max(round(train_samples * ratio), batch_size * world_size)  # >= one batch
            samples = train_samples if train else eval_samples
        x, y = synthetic_pool(info, min(self.POOL * batch_size, samples), seed=seed, train=train)
        x, y = x.to(device), y.to(device)
        super().__init__(
            x,
            y,
            batch_size=batch_size,
            info=info,
            train=train,
            seed=seed,
            rank=0,
            world_size=1,
            normalise=False,
        )
        self.samples = samples // world_size
        if self.samples < batch_size:
            raise JobConfigError(
                f"dataset too small: {samples} samples ({self.samples} per rank) is fewer than one batch "
                f"of {batch_size}; use a smaller batch size"
            )

    def partial_batch(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        size = self.last_batch_size
        return None if size >= self.batch_size else (self.x[:size], self.y[:size])

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        pool = len(self.x)
        full = pool // self.batch_size
        for i in range(len(self)):
            size = min(self.batch_size, self.samples - i * self.batch_size)
            start = (i % max(full, 1)) * self.batch_size
            if start + size > pool:
                start = 0
            yield self.x[start : start + size], self.y[start : start + size]


def load_arrays(workload: str, *, channel: Path, allow_download: bool, cache: Path) -> Arrays:
    info = DATASETS[workload]
    if channel.is_dir():
        return from_channel(channel, info)
    if allow_download:
        return download(info, cache)
    raise JobConfigError(f"channel 'train' is missing ({channel}) and downloading is off")
