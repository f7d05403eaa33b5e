"""The automatic hooks: what a training script does, seen without a change to its code.

* ``DataLoader.__init__`` is wrapped to note every loader built (the evaluation loader early stop
  times), ``DataLoader.__iter__`` to hand out an iterator that tells the session when a pass starts,
  yields a batch and ends, and that ends a pass early at the caps;
* PyTorch's global optimizer step post-hook ends a training step at each ``optimizer.step()``;
  ``Optimizer.__init__`` is wrapped to note that the script has one, ``torch.autograd.backward`` (which
  ``Tensor.backward`` calls) to end a step at each backward pass of a script without one;
* ``torch.no_grad`` and ``torch.inference_mode`` (as blocks and as decorators) tell the session when a
  block turns gradients off and when it ends: an evaluation inside the training loop
  (:mod:`trainsweep.instrument.loops`);
* for the first few training steps global module forward hooks, and ``torch.compile`` wrapped, see
  the precision the script trains in and whether it compiles (:mod:`trainsweep.instrument.usage`);
* in early-stop mode, global module forward hooks find the model (the outermost module with the most
  parameters called in a step), removed again after a few steps.

Everything is undone by :meth:`Installed.remove` (tests install and remove in one process).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd import grad_mode
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim
from torch.utils.data import DataLoader
from torch.utils.hooks import RemovableHandle

from trainsweep.instrument import spawned, usage
from trainsweep.instrument.passes import LoaderPass
from trainsweep.instrument.session import Session


class TrackedIterator:
    """A DataLoader iterator that reports its pass to the session; anything else goes to the original."""

    def __init__(self, it: Iterator[Any], p: LoaderPass, session: Session) -> None:
        self._it = it
        self._pass = p
        self._session = session

    def __iter__(self) -> TrackedIterator:
        return self

    def __next__(self) -> Any:
        if self._session.before_next(self._pass):
            raise StopIteration
        try:
            batch = next(self._it)
        except StopIteration:
            self._session.pass_end(self._pass)
            raise
        self._session.after_next(self._pass, batch)
        return batch

    def __len__(self) -> int:
        return len(self._it)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


_GRAD_OFF = (grad_mode.no_grad, grad_mode.inference_mode)
"""Context managers (and decorators) whose outermost use turns gradients off."""


@dataclass
class Installed:
    """The hooks of one session; :meth:`remove` restores PyTorch as it was."""

    session: Session
    original_init: Any
    original_iter: Any
    handles: list[RemovableHandle] = field(default_factory=list)
    capture: list[RemovableHandle] = field(default_factory=list)
    patched: list[tuple[Any, str, Any]] = field(default_factory=list)
    """(owner, attribute, original) of every function replaced, restored in reverse order."""

    def patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        self.patched.append((owner, name, original))
        setattr(owner, name, make(original))

    def release_capture(self) -> None:
        for h in self.capture:
            h.remove()
        self.capture.clear()

    def remove(self) -> None:
        self.release_capture()
        for h in self.handles:
            h.remove()
        self.handles.clear()
        DataLoader.__init__ = self.original_init  # type: ignore[method-assign]
        DataLoader.__iter__ = self.original_iter  # type: ignore[method-assign]
        for owner, name, original in reversed(self.patched):
            setattr(owner, name, original)
        self.patched.clear()
        self.session.forwards.stop()
        self.session.release_capture = None


def install(session: Session) -> Installed:
    """Hook PyTorch so that ``session`` sees the loaders, the optimizer steps and (early stop) the model."""
    original_init = DataLoader.__init__
    original_iter = DataLoader.__iter__

    @functools.wraps(original_init)
    def __init__(self: DataLoader, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        original_init(self, *args, **kwargs)
        session.loader_created(self)

    @functools.wraps(original_iter)
    def __iter__(self: DataLoader) -> Any:  # noqa: N807
        p = session.pass_start(self)  # before the original: starting workers is part of the pass
        it = original_iter(self)
        return it if p is None else TrackedIterator(it, p, session)

    DataLoader.__init__ = __init__  # type: ignore[method-assign]
    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]
    installed = Installed(session, original_init, original_iter)
    installed.handles.append(
        optim.register_optimizer_step_pre_hook(lambda opt, args, kwargs: session.optimizer_stepping(opt))
    )
    installed.handles.append(
        optim.register_optimizer_step_post_hook(lambda opt, args, kwargs: session.optimizer_stepped(opt))
    )
    if session.capturing:
        installed.capture.append(nn_module.register_module_forward_pre_hook(_pre_hook(session)))
        installed.capture.append(
            nn_module.register_module_forward_hook(_post_hook(session), always_call=True)
        )
        session.release_capture = installed.release_capture
    _install_usage_hooks(installed)
    _install_loop_hooks(installed)
    session.forwards.start()  # until the first step: where a loop without a loader starts
    return installed


def _install_usage_hooks(installed: Installed) -> None:
    """The hooks that sample the first steps' precision (they remove themselves) and the compile wrappers."""
    watch = installed.session.usage
    pre, post = usage.hooks(watch)
    handles = [
        nn_module.register_module_forward_pre_hook(pre),
        nn_module.register_module_forward_hook(post, with_kwargs=True, always_call=True),
    ]
    installed.handles.extend(handles)

    def release() -> None:
        for h in handles:
            h.remove()

    watch.release = release
    installed.patch(torch, "compile", functools.partial(usage.wrap_compile, watch))
    if "compile" in nn_module.Module.__dict__:  # in place: model.compile()
        installed.patch(nn_module.Module, "compile", functools.partial(usage.wrap_compile, watch))


def _install_loop_hooks(installed: Installed) -> None:
    """The hooks for loops without a loader or an optimizer: optimizers built, backward passes, blocks
    with gradients off."""
    session = installed.session

    def wrap_init(original: Any) -> Any:
        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
            original(self, *args, **kwargs)
            session.optimizer_built()

        return __init__

    def wrap_backward(original: Any) -> Any:
        @functools.wraps(original)
        def backward(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            session.backward_done()
            return out

        return backward

    installed.patch(optim.Optimizer, "__init__", wrap_init)
    installed.patch(torch.autograd, "backward", wrap_backward)
    ranks = spawned.wrap_start_processes(session, session.settings.workload)
    for owner, name in spawned.targets():
        installed.patch(owner, name, ranks)
    for cls in _GRAD_OFF:
        installed.patch(cls, "__enter__", functools.partial(_wrap_enter, session))
        installed.patch(cls, "__exit__", functools.partial(_wrap_exit, session))


_OUTER = "_trainsweep_outer"


def _wrap_enter(session: Session, original: Any) -> Any:
    @functools.wraps(original)
    def __enter__(self: Any) -> Any:  # noqa: N807
        outer = torch.is_grad_enabled()
        out = original(self)
        if outer:
            setattr(self, _OUTER, True)
            session.grad_off_start()
        return out

    return __enter__


def _wrap_exit(session: Session, original: Any) -> Any:
    @functools.wraps(original)
    def __exit__(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:  # noqa: N807
        out = original(self, exc_type, exc, tb)
        if self.__dict__.pop(_OUTER, False):
            session.grad_off_end(failed=exc_type is not None)
        return out

    return __exit__


def _pre_hook(session: Session) -> Any:
    def hook(module: Any, args: Any) -> None:
        session.module_called(module)

    return hook


def _post_hook(session: Session) -> Any:
    def hook(module: Any, args: Any, output: Any) -> None:
        session.module_returned(module)

    return hook
