"""What a script really trained with, seen without a change to its code: the numeric precision of its
model's training forward passes, and whether it called ``torch.compile``.

* **Precision.** A global module forward pre-hook, installed for the first :data:`SAMPLE_STEPS` training
  steps and removed after them (no per-step cost later), looks at each module with parameters of its own
  that is called in training mode with gradients on: whether autocast was on for the device those
  parameters are on (``torch.is_autocast_enabled``), in which dtype (``torch.get_autocast_dtype``), and
  the parameters' dtype. The run trained in the autocast dtype when most of those calls ran under
  autocast, else in the dtype most of the parameters are in (``model.to(torch.bfloat16)`` trains in
  bfloat16 without autocast).
* **Compile.** ``torch.compile`` and ``nn.Module.compile`` are wrapped to note a call; a compiled module
  the hook sees called (``OptimizedModule``) counts too. The hook records such a module's precision at
  its call and removes itself there, before the compiler traces the model: a global hook that appears or
  goes between calls would make the compiled model compile again.

The session (:mod:`trainsweep.instrument.session`) writes :meth:`UsageWatch.events` once, as the
built-in workloads write theirs: :data:`trainsweep.axes.PRECISION_KEY` (the same key and spelling) and
:data:`trainsweep.axes.COMPILED_KEY`. :mod:`trainsweep.honoured` compares them with the run's setting.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainsweep.axes import COMPILED_KEY, PRECISION_KEY

SAMPLE_STEPS = 3
"""Training steps whose module calls are looked at; the hook is removed after them."""


def dtype_name(dtype: torch.dtype) -> str:
    """``float32``, ``bfloat16``, ...: a dtype as specs and the built-ins spell it."""
    return str(dtype).removeprefix("torch.")


def _compiled_module(module: nn.Module) -> bool:
    """A module ``torch.compile`` wrapped (its ``OptimizedModule``), or one whose ``.compile()`` ran."""
    # no hasattr: nn.Module.__getattr__ raises for a missing name, a cost on every module call
    if type(module).__name__ == "OptimizedModule":
        return True
    return module.__dict__.get("_compiled_call_impl") is not None


class UsageWatch:
    """Counts what the hook and the compile wrappers see; :meth:`events` says what the run used."""

    def __init__(self) -> None:
        self.compiled = False
        self.autocast: Counter[str] = Counter()
        """Calls of modules with parameters that ran under autocast, by its dtype."""
        self.plain = 0
        """Calls of modules with parameters that ran without autocast."""
        self.parameters: Counter[str] = Counter()
        """Parameter elements of the modules called, by dtype (each module counted once)."""
        self.device_type: str | None = None
        self._seen: set[int] = set()
        self.release: Callable[[], None] | None = None
        """Removes the hook (set by whoever installed it)."""

    def compile_called(self) -> None:
        self.compiled = True

    def module_called(self, module: nn.Module) -> None:
        """The pre-hook's work: a training-mode call with gradients on is counted."""
        if not module.training or not torch.is_grad_enabled():
            return
        if _compiled_module(module):
            self.compiled = True
            self._count(module, list(module.parameters()))
            self.stop()  # before the compiler traces the model with the hook in place
            return
        own = list(module.parameters(recurse=False))
        if own:
            self._count(module, own)

    def _count(self, module: nn.Module, params: list[nn.Parameter]) -> None:
        floating = [p for p in params if p.is_floating_point()]
        if not floating:
            return
        device = floating[0].device.type
        self.device_type = self.device_type or device
        try:
            on = torch.is_autocast_enabled(device)
        except (RuntimeError, ValueError):  # a device type autocast does not know (meta)
            on = False
        if on:
            self.autocast[dtype_name(torch.get_autocast_dtype(device))] += 1
        else:
            self.plain += 1
        if id(module) not in self._seen:
            self._seen.add(id(module))
            for p in floating:
                self.parameters[dtype_name(p.dtype)] += p.numel()

    def stop(self) -> None:
        """The sampled steps are over (or the model is compiled): the hook goes."""
        if self.release is not None:
            self.release()
            self.release = None

    @property
    def precision(self) -> str | None:
        """The precision the sampled calls trained in; None when no module with parameters was called."""
        if self.autocast and sum(self.autocast.values()) >= self.plain:
            return self.autocast.most_common(1)[0][0]
        if self.parameters:
            return self.parameters.most_common(1)[0][0]
        return None

    def events(self) -> list[tuple[str, Any]]:
        """(key, value) of what to write: the precision when known, and whether torch.compile was called."""
        precision = self.precision
        out: list[tuple[str, Any]] = [(PRECISION_KEY, precision)] if precision is not None else []
        return [*out, (COMPILED_KEY, self.compiled)]


def pre_hook(watch: UsageWatch) -> Callable[[nn.Module, Any], None]:
    """The global forward pre-hook feeding ``watch``; it does nothing while the compiler traces."""

    def hook(module: nn.Module, args: Any) -> None:
        if not torch.compiler.is_compiling():
            watch.module_called(module)

    return hook


def wrap_compile(watch: UsageWatch, original: Any) -> Any:
    """``torch.compile`` (or ``nn.Module.compile``) that tells ``watch`` it was called."""

    @functools.wraps(original)
    def compile(*args: Any, **kwargs: Any) -> Any:
        watch.compile_called()
        return original(*args, **kwargs)

    return compile
