"""The FLOPs of an instrumented script's training step, counted once per run without running the model.

While the usage hooks are in place (:mod:`trainsweep.instrument.usage`, the first sampled steps), a
:class:`ForwardRecorder` remembers each distinct outermost module call of the training forward pass (a
call made while no other module call is active, in training mode with gradients on, of a module with
parameters, outside a backward pass) and how many times each step made it: its module (held until the run
ends: a script's ``main()`` often returns, and drops its model, before the run ends), the shapes, dtypes
and gradient flags of its tensor arguments (positional and keyword) with the small non-tensor values, and
the autocast state; no tensor argument. A GAN's generator and discriminator (the latter on a real batch, on
a generated one detached and on one that passes its gradient back), a model called on each view or crop of
a batch, an encoder and a decoder called in turn: each distinct call is one.

When the run's training ends, :func:`event` counts each call once with PyTorch's FLOP counter
(:mod:`trainsweep.instrument.flops`): ``torch.func.functional_call`` of the module with ``meta`` copies of
its parameters and buffers and ``meta`` inputs of the recorded shapes, under the recorded autocast, then
a backward pass of the output's loss (a floating scalar output, a ``loss`` key or attribute, or the second
item of a tuple such as nanoGPT's ``(logits, loss)``), else of the sum of its first floating output (a
frozen module beside the model: its forward pass alone), times its calls for each batch, summed. No real
compute and no device memory. ``DistributedDataParallel`` / ``DataParallel`` and ``torch.compile``'s
wrapper are unwrapped to the model they hold; FSDP, whose parameters are sharded, is not counted. A count
that fails gives the event's failure form, ``{"error": why}``: the report says ``FLOPs not counted: why``.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
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


def _in_backward() -> bool:
    """Whether autograd is running a backward pass in this thread."""
    task = getattr(torch._C, "_current_graph_task_id", None)
    return task is not None and task() != -1


MAX_CALLS = 16
"""Distinct outermost training calls kept (a module with one set of input shapes is one); a step that
makes more is not counted."""


@dataclass
class Kept:
    """One module's outermost training calls with one set of input shapes."""

    call: Call
    per_step: list[int]
    """Its calls in each sampled step (:meth:`ForwardRecorder.step_ended`)."""
    now: int = 0
    """Its calls in the step under way."""


class ForwardRecorder:
    """Fed by the usage hooks: keeps every distinct outermost training call (see the module docstring) and
    how many times each sampled step made it."""

    def __init__(self) -> None:
        self.depth = 0
        self.kept: dict[tuple[int, str, Any], Kept] = {}
        self.steps = 0
        """Sampled steps ended."""
        self.overflow = False
        """Whether a step made more than :data:`MAX_CALLS` distinct calls (then none is counted)."""

    def entered(self) -> None:
        self.depth += 1

    def left(self, module: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """A module call returned (or raised); the outermost one of a training pass is offered."""
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            self.offer(module, args, kwargs)

    def offer(self, module: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Count this outermost call when it trains a module with parameters (a loss module has none),
        outside a backward pass (where activation checkpointing runs its segments' forward again)."""
        if not module.training or not torch.is_grad_enabled() or _in_backward():
            return
        weight = sum(p.numel() for p in module.parameters())
        if not weight:
            return
        call = Call(module, spec_of(tuple(args)), spec_of(dict(kwargs)), weight, _autocast_of(module))
        key = (id(module), repr((call.args, call.kwargs)), call.autocast)  # the module is kept: its id too
        kept = self.kept.get(key)
        if kept is None:
            if len(self.kept) >= MAX_CALLS:
                self.overflow = True
                return
            kept = self.kept[key] = Kept(call, [0] * self.steps)
        kept.now += 1

    def step_ended(self) -> None:
        """A sampled training step ended."""
        for kept in self.kept.values():
            kept.per_step.append(kept.now)
            kept.now = 0
        self.steps += 1

    @property
    def call(self) -> Call | None:
        """The first kept call of the module with the most parameters (None: no training call seen)."""
        return max((k.call for k in self.kept.values()), key=lambda c: c.weight, default=None)

    def counted(self, batches_per_step: float) -> list[tuple[Call, float]]:
        """Each kept call with its calls for each batch a step trains, the biggest module's first: its
        calls a step, the first step left out where later ones were seen (a script may call its model
        once before training: a summary, a dry run), over the batches a step trains (gradient accumulation
        calls it once per batch). Its calls a step are their median (a step the AMP scaler skipped holds
        two iterations' calls), or their mean for a call made in half the steps or fewer (two optimizers
        stepping in turn, each its own step; inputs padded to each batch's longest). Calls made in none
        of those steps are left out; when none is left, the biggest module's call, once."""
        out = []
        for kept in sorted(self.kept.values(), key=lambda k: -k.call.weight):  # stable: first kept first
            steps = kept.per_step[1:] or kept.per_step or [kept.now]
            per_step = statistics.median_low(steps) or statistics.fmean(steps)
            if n := round(per_step / batches_per_step, 4):
                out.append((kept.call, n))
        primary = self.call
        return out if out or primary is None else [(primary, 1.0)]


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


def count_call(call: Call, *, trains: bool = True) -> tuple[flops.StepCount, nn.Module]:
    """The FLOPs of one training step of the recorded call, and the model counted. A call whose output
    depends on no parameter that trains is counted as its forward pass when ``trains`` is False (a frozen
    module's call beside the model), and cannot be counted otherwise.

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
        if loss.requires_grad:
            loss.backward()
        elif trains:
            raise NotCountableError("the model's output does not depend on a parameter that trains")

    with activations_kept():
        return flops.count(step, first.shape[0]), model


def count_calls(
    calls: Sequence[tuple[Call, float]],
) -> tuple[flops.StepCount, nn.Module, list[flops.StepCount]]:
    """A training step's FLOPs over its calls (each ``(call, calls for each batch)``, the biggest module's
    first): each call counted once, times its calls, summed; the samples a step trains are the biggest
    batch the biggest module was called with. Returns that, the biggest module, and each call's count.

    Raises:
        NotCountableError: when a call cannot be counted (a call beside the biggest module's names its
            module); anything a model raises on the meta device.
    """
    main = calls[0][0].module
    total, samples, by_op, each = 0.0, 0, Counter[str](), []
    model: nn.Module | None = None
    for call, n in calls:
        try:
            step, counted = count_call(call, trains=call.module is main)
        except NotCountableError as exc:
            if call.module is main:
                raise
            raise NotCountableError(f"{type(call.module).__name__}, called beside the model: {exc}") from None
        total += step.flops * n
        by_op.update({op: round(f * n) for op, f in step.by_op.items()})
        each.append(step)
        if call.module is main:
            model, samples = counted, max(samples, step.samples)
    assert model is not None
    return flops.StepCount(round(total), samples, dict(by_op)), model, each


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
    calls: Sequence[tuple[Call, float]],
    *,
    dtype: str | None,
    world_size: int,
    compiled: bool = False,
    overflow: bool = False,
) -> dict[str, Any]:
    """The run's FLOPS event (:func:`flops.event_value`) for the recorded calls (:meth:`ForwardRecorder.
    counted`), trained in ``dtype`` (the usage watch's precision); ``{"error": why}`` when they could not be
    counted. Never raises. ``compiled``: the script called ``torch.compile`` (a model compiled in place runs
    its calls unseen). ``overflow``: a step made more distinct calls than are kept. A step that calls its
    modules more than once a batch (the views of a contrastive loss, a GAN's discriminator) carries
    ``calls_per_batch``; one that calls more than one module, or one with inputs of different shapes (the
    crops of a multi-crop loss), ``calls``: each one's module, samples, calls a batch and FLOPs."""
    if overflow:
        return {"error": f"a training step called its modules in more than {MAX_CALLS} ways: not counted"}
    if not calls:
        hint = " (a model compiled in place, model.compile(), runs its calls unseen)" if compiled else ""
        return {"error": f"no training forward pass of a module was seen{hint}"}
    try:
        step, model, each = count_calls(calls)
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
    if (per_batch := sum(n for _, n in calls)) > 1:
        value["calls_per_batch"] = _number(per_batch)
    if len(calls) > 1:
        value["calls"] = [
            {
                "module": type(c.module).__name__,
                "samples": one.samples,
                "calls_per_batch": _number(n),
                "flops": one.flops,
            }
            for (c, n), one in zip(calls, each, strict=True)
        ]
    return value


def _number(x: float) -> float | int:
    return int(x) if x == int(x) else x
