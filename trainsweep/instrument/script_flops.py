"""The FLOPs of an instrumented script's training step, counted once per run without running the model.

While the usage hooks are in place (:mod:`trainsweep.instrument.usage`, the first sampled steps), a
:class:`ForwardRecorder` remembers the outermost module call of the training forward pass (a call made
while no other module call is active, in training mode with gradients on; of those, the one whose module
has the most parameters, the latest on a tie): its module (held until the run ends: a script's ``main()``
often returns, and drops its model, before the run ends), the shapes and dtypes of its tensor arguments
(positional and keyword) with the small non-tensor values, and the autocast state; no tensor argument.

When the run's training ends, :func:`event` counts that call once with PyTorch's FLOP counter
(:mod:`trainsweep.instrument.flops`): ``torch.func.functional_call`` of the module with ``meta`` copies of
its parameters and buffers and ``meta`` inputs of the recorded shapes, under the recorded autocast, then
a backward pass of the output's loss (a floating scalar output, a ``loss`` key or attribute, or the second
item of a tuple such as nanoGPT's ``(logits, loss)``), else of the sum of its first floating output. No
real compute and no device memory. ``DistributedDataParallel`` / ``DataParallel`` and ``torch.compile``'s
wrapper are unwrapped to the model they hold; FSDP, whose parameters are sharded, is not counted. A count
that fails gives the event's failure form, ``{"error": why}``: the report says ``FLOPs not counted: why``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from trainsweep.instrument import flops

_SMALL = (type(None), bool, int, float, complex, torch.dtype, torch.device)
_MAX_STR = 200
_WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module", "OptimizedModule": "_orig_mod"}
"""Wrappers whose wrapped model is the one to count, and the attribute that holds it."""
_SHARDED = frozenset({"FullyShardedDataParallel", "FSDPModule"})
"""FSDP's wrapper and the class ``fully_shard`` mixes into a model."""


class NotCountableError(Exception):
    """Why the recorded call cannot be counted."""


@dataclass(frozen=True)
class TensorSpec:
    """What is kept of a tensor argument."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    requires_grad: bool


@dataclass(frozen=True)
class Opaque:
    """An argument that is not kept (neither a tensor nor a small value): its type's name."""

    kind: str


@dataclass(frozen=True)
class Call:
    """The recorded outermost training call."""

    module: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    weight: int
    """Parameter elements of its module."""
    autocast: tuple[str, torch.dtype] | None
    """(device type, dtype) of the autocast the call ran under."""


def spec_of(value: Any) -> Any:
    """``value`` with its tensors replaced by :class:`TensorSpec` and anything big by :class:`Opaque`."""
    if isinstance(value, torch.Tensor):
        return TensorSpec(tuple(value.shape), value.dtype, value.requires_grad)
    if isinstance(value, _SMALL) or (isinstance(value, str) and len(value) <= _MAX_STR):
        return value
    if type(value) in (tuple, list):
        return type(value)(spec_of(v) for v in value)
    if type(value) is dict:
        return {k: spec_of(v) for k, v in value.items()}
    return Opaque(type(value).__name__)


def _autocast_of(module: nn.Module) -> tuple[str, torch.dtype] | None:
    p = next(module.parameters(), None)
    if p is None:
        return None
    kind = p.device.type
    try:
        on = torch.is_autocast_enabled(kind)
    except (RuntimeError, ValueError):  # a device type autocast does not know
        return None
    return (kind, torch.get_autocast_dtype(kind)) if on else None


class ForwardRecorder:
    """Fed by the usage hooks: keeps the outermost training call (see the module docstring), and how
    many times a step called its module."""

    def __init__(self) -> None:
        self.depth = 0
        self.call: Call | None = None
        self.step_calls: list[int] = []
        """The kept module's outermost training calls in each sampled step (:meth:`step_ended`)."""
        self._calls = 0
        self.shapes_differ = False
        """Whether the kept module's calls had inputs of different shapes (a DINO's crops)."""

    def entered(self) -> None:
        self.depth += 1

    def left(self, module: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """A module call returned (or raised); the outermost one of a training pass is offered."""
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            self.offer(module, args, kwargs)

    def offer(self, module: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Keep this outermost call when it trains and its module is at least as big as the kept one's."""
        if not module.training or not torch.is_grad_enabled():
            return
        weight = sum(p.numel() for p in module.parameters())
        if self.call is not None and weight < self.call.weight:
            return
        call = Call(module, spec_of(tuple(args)), spec_of(dict(kwargs)), weight, _autocast_of(module))
        if self.call is not None and module is self.call.module:
            self._calls += 1
            self.shapes_differ |= (call.args, call.kwargs) != (self.call.args, self.call.kwargs)
        else:  # a new (bigger) module: its calls count from here
            self.step_calls.clear()
            self._calls, self.shapes_differ = 1, False
        self.call = call

    def step_ended(self) -> None:
        """A sampled training step ended."""
        self.step_calls.append(self._calls)
        self._calls = 0

    def calls_per_batch(self, batches_per_step: float) -> int:
        """The kept module's calls for each batch a step trains (at least 1): the median of its calls a
        step, the first step left out where later ones were seen (a script may call its model once before
        training: a summary, a dry run), over the batches a step trains (gradient accumulation calls it
        once per batch)."""
        steps = self.step_calls[1:] or self.step_calls
        if not steps:
            return 1
        return max(1, round(statistics.median_low(steps) / batches_per_step))


def unwrap(module: nn.Module) -> nn.Module:
    """The model inside the data-parallel and compile wrappers.

    Raises:
        NotCountableError: for FSDP, whose parameters are sharded across the ranks.
    """
    while True:
        name = type(module).__name__
        if any(c.__name__ in _SHARDED for c in type(module).__mro__):
            raise NotCountableError(
                f"the model is sharded by FSDP ({name}): sharded parameters are not counted"
            )
        held = _WRAPPERS.get(name)
        inner = module.__dict__.get("_modules", {}).get(held) if held else None
        if not isinstance(inner, nn.Module):
            return module
        module = inner


def _meta(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        t = torch.empty(value.shape, dtype=value.dtype, device="meta")
        return t.requires_grad_() if value.requires_grad and t.is_floating_point() else t
    if isinstance(value, Opaque):
        raise NotCountableError(f"the model was called with a {value.kind}, which is not kept to count with")
    if type(value) in (tuple, list):
        return type(value)(_meta(v) for v in value)
    if type(value) is dict:
        return {k: _meta(v) for k, v in value.items()}
    return value


def _first(value: Any, pick: Callable[[Any], Any]) -> Any:
    """The first leaf of ``value`` (tuples, lists and mappings walked depth first) that ``pick`` returns
    something for; None when there is none."""
    found = pick(value)
    if found is not None:
        return found
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, tuple | list) else ()
    for v in items:
        found = _first(v, pick)
        if found is not None:
            return found
    return None


def _first_tensor(value: Any) -> Any:
    """The first tensor (or tensor spec) in ``value``, depth first; None when there is none."""
    return _first(value, lambda v: v if isinstance(v, torch.Tensor | TensorSpec) else None)


def _floating(value: Any) -> torch.Tensor | None:
    return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None


def loss_of(output: Any) -> torch.Tensor:
    """What a training step's backward pass starts from (see the module docstring)."""
    scalar = _floating(output)
    if scalar is not None and scalar.dim() == 0:
        return scalar
    named = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if isinstance(output, tuple | list) and len(output) > 1 and named is None:
        named = output[1]
    found = _floating(named)
    if found is not None and found.dim() == 0:
        return found
    first = _first_floating(output)
    if first is None:
        raise NotCountableError("the model's output holds no floating tensor to take a backward pass of")
    return first.sum()


def _first_floating(value: Any) -> torch.Tensor | None:
    """The first floating tensor in ``value``, depth first; None when there is none."""
    found: torch.Tensor | None = _first(value, _floating)
    return found


def _meta_copy(p: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(p, device="meta").requires_grad_(p.requires_grad)


def count_call(call: Call) -> tuple[flops.StepCount, nn.Module]:
    """The FLOPs of one training step of the recorded call, and the model counted.

    Raises:
        NotCountableError: when the call cannot be counted; anything the model raises on the meta device.
    """
    model = unwrap(call.module)
    first = _first_tensor((call.args, call.kwargs))
    if not isinstance(first, TensorSpec) or not first.shape:
        raise NotCountableError("the model was called without a batched tensor input")
    state = {n: _meta_copy(p) for n, p in model.named_parameters()}
    state.update({n: torch.empty_like(b, device="meta") for n, b in model.named_buffers()})
    args, kwargs = _meta(call.args), _meta(call.kwargs)

    def step() -> None:
        autocast: AbstractContextManager[Any] = (
            torch.autocast(call.autocast[0], call.autocast[1]) if call.autocast else nullcontext()
        )
        with autocast:
            out = functional_call(model, state, args, kwargs)
        loss = loss_of(out)
        if not loss.requires_grad:
            raise NotCountableError("the model's output does not depend on a parameter that trains")
        loss.backward()

    with activations_kept():
        return flops.count(step, first.shape[0]), model


@contextmanager
def activations_kept() -> Iterator[None]:
    """Activation checkpointing (``torch.utils.checkpoint``) off while a step is counted: MFU counts a
    model's FLOPs, not the forward passes checkpointing runs again in the backward pass (which would run
    the module on its real parameters, outside the meta copies: the count failed). ``checkpoint()`` looks
    up its two mechanisms in its module at each call, also through a ``functools.partial`` of it (Hugging
    Face's ``gradient_checkpointing_enable``): both are replaced by plain calls until the count ends.
    Where they are not there (another PyTorch), nothing is replaced."""
    from torch.utils import checkpoint as ckpt

    names = ("_checkpoint_without_reentrant_generator", "CheckpointFunction")
    if not all(hasattr(ckpt, n) for n in names):
        yield
        return
    saved = {n: getattr(ckpt, n) for n in names}

    def no_recompute(*_args: Any, **_kwargs: Any) -> Iterator[None]:
        yield  # checkpoint() runs the function between its two next() calls: one yield, then done

    class Plain:
        @staticmethod
        def apply(function: Callable[..., Any], _preserve_rng_state: bool, *args: Any) -> Any:
            return function(*args)

    ckpt._checkpoint_without_reentrant_generator = no_recompute  # type: ignore[assignment]
    ckpt.CheckpointFunction = Plain  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(ckpt, n, v)


def event(
    call: Call | None,
    *,
    dtype: str | None,
    world_size: int,
    compiled: bool = False,
    calls_per_batch: int = 1,
    shapes_differ: bool = False,
) -> dict[str, Any]:
    """The run's FLOPS event (:func:`flops.event_value`) for the recorded call, trained in ``dtype`` (the
    usage watch's precision); ``{"error": why}`` when it could not be counted. Never raises.
    ``compiled``: the script called ``torch.compile`` (a model compiled in place runs its calls unseen).
    ``calls_per_batch``: the model's calls for each batch a step trains (two views of a contrastive loss
    call it twice): the count is that many of the recorded call's, when every call had its shapes
    (``shapes_differ`` False); with calls of other shapes, nothing is counted."""
    if call is None:
        hint = " (a model compiled in place, model.compile(), runs its calls unseen)" if compiled else ""
        return {"error": f"no training forward pass of a module was seen{hint}"}
    if calls_per_batch > 1 and shapes_differ:
        return {
            "error": f"the model was called {calls_per_batch} times a batch with inputs of different "
            "shapes: one call's count would not be the step's"
        }
    try:
        step, model = count_call(call)
        step = step.scaled(calls_per_batch) if calls_per_batch > 1 else step
    except NotCountableError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # the user's model on the meta device: any error is the note
        return {"error": flops.failure(exc)}
    param = next(model.parameters(), None)
    where = param.device if param is not None else torch.device("cpu")
    conv, matmul = flops.tf32_allowed(where)
    trained = dtype or (str(param.dtype).removeprefix("torch.") if param is not None else "float32")
    name = torch.cuda.get_device_name(where) if where.type == "cuda" else "cpu"
    precision = flops.peak_precision(trained, step, tf32_conv=conv, tf32_matmul=matmul)
    value = flops.event_value(step, precision=precision, world_size=world_size, device=name)
    if calls_per_batch > 1:
        value["calls_per_batch"] = calls_per_batch
    return value
