"""What the instrumentation reads from a user's objects: a loader's batch size and epoch size, a batch's
length, and how to feed a batch to the model to time validation batches for early stop.

Scripts are free in what they put in a batch, so every reader here answers None (or raises a plain
exception the caller turns into a flag) instead of guessing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader


def batch_length(batch: Any) -> int | None:
    """Samples in a batch: the first dimension of its first tensor (tuple, list or dict order), else None."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if isinstance(batch, dict):
        items: Iterable[Any] = batch.values()
    elif isinstance(batch, list | tuple):
        items = batch
    else:
        return None
    for item in items:
        n = batch_length(item)
        if n is not None:
            return n
    return None


def loader_batches(loader: DataLoader) -> int | None:
    """``len(loader)``: batches in one pass on this rank, None for an iterable dataset without a length."""
    try:
        return len(loader)
    except TypeError:
        return None


def loader_samples(loader: DataLoader, batch_size: int | None, cap: int | None) -> int | None:
    """Samples one pass of ``loader`` covers on this rank (``cap`` batches at most), None when unknown.

    The sampler's length is the per-rank count under a ``DistributedSampler``; a ``drop_last`` loader
    covers only its whole batches.
    """
    batches = loader_batches(loader)
    if batches is None or not batch_size:
        return None
    sampler = (
        loader.sampler if loader.batch_size is not None else getattr(loader.batch_sampler, "sampler", None)
    )
    try:
        samples = min(len(sampler), batches * batch_size)  # type: ignore[arg-type]
    except TypeError:
        samples = batches * batch_size
    if cap is not None:
        samples = min(samples, cap * batch_size)
    return samples


def to_device(obj: Any, device: torch.device) -> Any:
    """``obj`` with every tensor in it (tuples, lists, dicts) moved to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_device(v, device) for v in obj) if type(obj) in (list, tuple) else obj
    return obj


def model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def model_call(model: nn.Module, batch: Any) -> Callable[[], Any]:
    """A call of ``model`` on ``batch`` as a training script would make it.

    A tuple or list gives its first element as the input (``(inputs, labels)``), a dict gives keyword
    arguments (Hugging Face batches), a tensor is the input itself.

    Raises:
        TypeError: the batch has none of these shapes.
    """
    device = model_device(model)
    if isinstance(batch, dict):
        kwargs = to_device(batch, device)
        return lambda: model(**kwargs)
    if isinstance(batch, list | tuple) and batch:
        x = to_device(batch[0], device)
        return lambda: model(x)
    if isinstance(batch, torch.Tensor):
        x = to_device(batch, device)
        return lambda: model(x)
    raise TypeError(f"a {type(batch).__name__} batch cannot be fed to the model")


def time_model_batches(
    model: nn.Module, batches: Iterable[Any], n: int, sync: Callable[[], None]
) -> list[float]:
    """Seconds of ``model`` on ``n`` batches, in eval mode without gradients.

    A loader with fewer batches is passed over again (the first batch is warm-up, the estimate needs
    a few more). Synchronised per batch: training is over when this runs, nothing is left to perturb.
    """
    was_training = model.training
    model.eval()
    times: list[float] = []
    try:
        with torch.no_grad():
            while len(times) < n:
                before = len(times)
                for batch in batches:
                    if len(times) >= n:
                        break
                    call = model_call(model, batch)
                    sync()
                    t0 = time.perf_counter()
                    call()
                    sync()
                    times.append(time.perf_counter() - t0)
                if len(times) == before:
                    break  # an empty loader
    finally:
        model.train(was_training)
    return times


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class ModelFinder:
    """Finds the model among the modules called in the first training steps: the outermost one (called
    while no other module runs) with the most parameters, so a loss module or an augmentation is passed over.

    Fed by global forward pre- and post-hooks; after ``steps`` steps the hooks can go (:attr:`done`).
    """

    def __init__(self, steps: int) -> None:
        self.left = steps
        self._candidates: list[nn.Module] = []
        self._depth = 0
        self._params: dict[int, int] = {}
        # held: early stop may time validation after the script returned and dropped its model
        self._model: nn.Module | None = None

    @property
    def done(self) -> bool:
        return self.left <= 0

    @property
    def model(self) -> nn.Module | None:
        return self._model

    def called(self, module: nn.Module) -> None:
        if self._depth == 0:
            self._candidates.append(module)
        self._depth += 1

    def returned(self, module: nn.Module) -> None:
        self._depth = max(self._depth - 1, 0)

    def step_done(self) -> None:
        """A training step ended: its outermost modules are judged."""
        self._depth = 0  # a forward that raised leaves no post-hook call behind
        if not self._candidates or self.done:
            return
        best = max(self._candidates, key=self._count)
        if self._count(best):
            self._model = best
        self._candidates.clear()
        self.left -= 1

    def _count(self, module: nn.Module) -> int:
        key = id(module)
        if key not in self._params:
            self._params[key] = parameter_count(module)
        return self._params[key]


def sync() -> None:
    """Wait for the GPU (once the script used CUDA): where the instrumentation reads a boundary's time."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def now() -> tuple[float, float]:
    """(``perf_counter``, ``time.time``) now."""
    return time.perf_counter(), time.time()
