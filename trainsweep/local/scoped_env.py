"""``os.environ`` with a per-invocation layer, for Lambda handlers run in this process.

On AWS each Lambda invocation has its function's environment in its own process. Local mode runs the
handlers in this process, on several threads at once (S3 notifications, Step Functions tasks): setting
the function's variables in the process-wide ``os.environ`` and removing them afterwards let one
invocation's cleanup remove variables another invocation (or a training job's thread) was still
reading. :func:`install` turns the existing ``os.environ`` object into a :class:`ScopedEnviron` (the
same object, so modules and boto3/botocore providers that keep a reference to it see the change);
:func:`scoped` then gives the current thread (its ``contextvars`` context) a layer over the process
environment for the length of a ``with`` block:

* reads in that thread see the layer's variables over the process's (``os.environ[...]``,
  ``os.getenv``, ``in``, iteration, ``dict(os.environ)``);
* writes and deletions in that thread stay in the layer and vanish with it;
* other threads see the process environment, unchanged, and the process environment is never
  modified by an invocation (nothing is set or removed in it, so nothing can vanish mid-read).

What differs from a separate process: the layer is not in the C-level environment (``putenv``), so a
subprocess a handler starts without ``env=`` inherits the process's variables, not the function's; and
threads a handler starts begin without the layer (they see the process environment).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator, Mapping

_REMOVED = None
_layer: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar(
    "trainsweep_env_layer", default=None
)
_lock = threading.Lock()


class ScopedEnviron(os._Environ):  # type: ignore[name-defined,misc]  # os._Environ is private, untyped
    """``os._Environ`` that reads and writes the current context's layer, when there is one."""

    def __getitem__(self, key: str) -> str:
        layer = _layer.get()
        if layer is not None and key in layer:
            value = layer[key]
            if value is _REMOVED:
                raise KeyError(key)
            return value
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: str) -> None:
        layer = _layer.get()
        if layer is None:
            super().__setitem__(key, value)
            return
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"str expected, not {type(key if not isinstance(key, str) else value).__name__}")
        layer[key] = value

    def __delitem__(self, key: str) -> None:
        layer = _layer.get()
        if layer is None:
            super().__delitem__(key)
            return
        if key not in self:
            raise KeyError(key)
        layer[key] = _REMOVED

    def __iter__(self) -> Iterator[str]:
        layer = _layer.get()
        if layer is None:
            yield from super().__iter__()
            return
        snapshot = dict(layer)
        for key in super().__iter__():
            if key not in snapshot:
                yield key
        for key, value in snapshot.items():
            if value is not _REMOVED:
                yield key

    def __len__(self) -> int:
        if _layer.get() is None:
            return super().__len__()
        return sum(1 for _ in self)

    def copy(self) -> dict[str, str]:
        return dict(self.items())


def install() -> None:
    """Make ``os.environ`` a :class:`ScopedEnviron` (idempotent; outside :func:`scoped`: as before)."""
    with _lock:
        if not isinstance(os.environ, ScopedEnviron):
            os.environ.__class__ = ScopedEnviron


@contextlib.contextmanager
def scoped(variables: Mapping[str, str]) -> Iterator[None]:
    """Run the block with ``variables`` over the process environment, for the current context only."""
    install()
    token = _layer.set({str(k): str(v) for k, v in variables.items()})
    try:
        yield
    finally:
        _layer.reset(token)
