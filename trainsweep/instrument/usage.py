"""What a script really trained with, seen without a change to its code: the numeric precision of its
model's training forward passes, and whether it called ``torch.compile``.

* **Precision.** Global module forward hooks, installed for the first :data:`SAMPLE_STEPS` training
  steps and removed after them (no per-step cost later), look at each module with parameters of its own
  that returns from a call in training mode with gradients on, weighted by those parameters' size:
  whether autocast was on for the device they are on (``torch.is_autocast_enabled``) and in which dtype
  (``torch.get_autocast_dtype``), else the dtype the module computed in (its output's; its parameters'
  when it returns no floating tensor). The run trained in the autocast dtype when most of that weight
  ran under autocast, else in the dtype most of it computed in: ``model.to(torch.bfloat16)`` and
  mixed-precision wrappers that cast the parameters for the forward pass (FSDP's) train in bfloat16
  without autocast. Read after the call, the parameters are the ones the call used.
* **Compile.** ``torch.compile`` and ``nn.Module.compile`` are wrapped to note a call; a compiled module
  seen called (``OptimizedModule``) counts too. The pre-hook records such a module's precision at its
  call (autocast, else its parameters' dtype) and removes the hooks there, before the compiler traces the
  model: a global hook that appears or goes between calls would make the compiled model compile again.

The session (:mod:`trainsweep.instrument.session`) writes :meth:`UsageWatch.events` once, as the
built-in workloads write theirs: :data:`trainsweep.axes.PRECISION_KEY` (the same key and spelling) and
:data:`trainsweep.axes.COMPILED_KEY`. :mod:`trainsweep.honoured` compares them with the run's setting.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from trainsweep.axes import COMPILED_KEY, PRECISION_KEY
from trainsweep.instrument.script_flops import ForwardRecorder

SAMPLE_STEPS = 3
"""Training steps whose module calls are looked at; the hooks are removed after them."""


def dtype_name(dtype: torch.dtype) -> str:
    """``float32``, ``bfloat16``, ...: a dtype as specs and the built-ins spell it."""
    return str(dtype).removeprefix("torch.")


def _compiled_module(module: nn.Module) -> bool:
    """A module ``torch.compile`` wrapped (its ``OptimizedModule``), or one whose ``.compile()`` ran."""
    # no hasattr: nn.Module.__getattr__ raises for a missing name, a cost on every module call
    if type(module).__name__ == "OptimizedModule":
        return True
    return module.__dict__.get("_compiled_call_impl") is not None


def output_dtype(output: Any) -> torch.dtype | None:
    """The dtype of a module's output: its first floating tensor (a tensor, the first item of a tuple or
    list, the first value of a mapping such as a Hugging Face output); None when there is none."""
    if isinstance(output, Mapping):
        output = next(iter(output.values()), None)
    elif isinstance(output, list | tuple):
        output = output[0] if output else None
    if isinstance(output, torch.Tensor) and output.is_floating_point():
        return output.dtype
    return None


class UsageWatch:
    """Counts what the hooks and the compile wrappers see; :meth:`events` says what the run used."""

    def __init__(self) -> None:
        self.compiled = False
        self.autocast: Counter[str] = Counter()
        """Parameter elements of the module calls that ran under autocast, by its dtype."""
        self.computed: Counter[str] = Counter()
        """Parameter elements of the module calls that ran without autocast, by the dtype they computed in."""
        self.release: Callable[[], None] | None = None
        """Removes the hooks (set by whoever installed them)."""
        self.forward = ForwardRecorder()
        """The outermost training call, to count the step's FLOPs with at the end of the run."""

    def compile_called(self) -> None:
        self.compiled = True

    def module_called(self, module: nn.Module, args: tuple[Any, ...] = ()) -> None:
        """The pre-hook's work: a compiled model is recorded and the hooks go, before it is traced."""
        if _compiled_module(module) and module.training and torch.is_grad_enabled():
            self.compiled = True
            if self.forward.depth == 0:  # its keyword arguments are not seen before the call
                self.forward.offer(module, args, {})
            self._count(list(module.parameters()), None)
            self.stop()
            return
        self.forward.entered()

    def module_returned(
        self,
        module: nn.Module,
        output: Any,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """The post-hook's work: a training-mode call with gradients on of a module with parameters (and
        the call, when it is an outermost one, offered to :attr:`forward`)."""
        self.forward.left(module, args, kwargs or {})
        if not module.training or not torch.is_grad_enabled():
            return
        own = list(module.parameters(recurse=False))
        if own:
            self._count(own, output)

    def _count(self, params: list[nn.Parameter], output: Any) -> None:
        floating = [p for p in params if p.is_floating_point()]
        if not floating:
            return
        weight = sum(p.numel() for p in floating)
        device = floating[0].device.type
        try:
            on = torch.is_autocast_enabled(device)
        except (RuntimeError, ValueError):  # a device type autocast does not know (meta)
            on = False
        if on:
            self.autocast[dtype_name(torch.get_autocast_dtype(device))] += weight
            return
        biggest = max(floating, key=lambda p: p.numel())
        self.computed[dtype_name(output_dtype(output) or biggest.dtype)] += weight

    def stop(self) -> None:
        """The sampled steps are over (or the model is compiled): the hooks go."""
        if self.release is not None:
            self.release()
            self.release = None

    @property
    def precision(self) -> str | None:
        """The precision the sampled calls trained in; None when no module with parameters was seen."""
        if self.autocast and sum(self.autocast.values()) >= sum(self.computed.values()):
            return self.autocast.most_common(1)[0][0]
        if self.computed:
            return self.computed.most_common(1)[0][0]
        return None

    def events(self) -> list[tuple[str, Any]]:
        """(key, value) of what to write: the precision when known, and whether torch.compile was called."""
        precision = self.precision
        out: list[tuple[str, Any]] = [(PRECISION_KEY, precision)] if precision is not None else []
        return [*out, (COMPILED_KEY, self.compiled)]


def hooks(
    watch: UsageWatch,
) -> tuple[Callable[[nn.Module, Any], None], Callable[..., None]]:
    """The global forward pre-hook and hook feeding ``watch``; they do nothing while the compiler traces.
    The hook takes the keyword arguments (``with_kwargs=True``) and runs also when the call raises
    (``always_call=True``: the nesting of module calls stays right); PyTorch then calls it with
    ``(module, args, None)``."""

    def pre(module: nn.Module, args: Any) -> None:
        if not torch.compiler.is_compiling():
            watch.module_called(module, args)

    def post(module: nn.Module, args: Any, *rest: Any) -> None:
        kwargs, output = rest if len(rest) == 2 else ({}, None)
        if not torch.compiler.is_compiling():
            watch.module_returned(module, output, args, kwargs)

    return pre, post


def wrap_compile(watch: UsageWatch, original: Any) -> Any:
    """``torch.compile`` (or ``nn.Module.compile``) that tells ``watch`` it was called."""

    @functools.wraps(original)
    def compile(*args: Any, **kwargs: Any) -> Any:
        watch.compile_called()
        return original(*args, **kwargs)

    return compile
