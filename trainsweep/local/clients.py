"""boto3 for code that the embedded AWS runs on many threads at once (the interpreter, Lambda handlers).

Creating clients from boto3's default session in parallel is not thread-safe and now and then raises
inside a task (the interpreter turns that into an uncatchable ``States.Runtime``); the clients
themselves are thread-safe. :class:`LockedBoto3` stands in for the ``boto3`` module of such code:
every ``client()`` call goes through one process-wide lock. With ``reuse=True`` a client asked for
with the same arguments and the same ``AWS_*`` environment (what boto3 reads: region, endpoint,
credentials; a Lambda invocation's own, see :mod:`trainsweep.local.scoped_env`) is made once and
shared: moto's Step Functions interpreter makes a client for every task of every child workflow and
the handlers one per invocation, about 15 ms of CPU each, several per job of a sweep.
"""

from __future__ import annotations

import os
import threading
from typing import Any

CLIENT_LOCK = threading.Lock()
"""Held while any :class:`LockedBoto3` creates a client."""


_UNKEYED = object()
"""A config whose options cannot be read: its client is not shared (an ``id()`` could be reused)."""


def _config_key(config: Any) -> Any:
    if config is None:
        return None
    options = getattr(config, "_user_provided_options", None)
    if not isinstance(options, dict):
        return _UNKEYED
    return tuple(sorted((k, repr(v)) for k, v in options.items()))


class LockedBoto3:
    """``boto3`` whose ``client()`` calls are made one at a time (and shared, with ``reuse``)."""

    def __init__(self, boto3: Any, *, reuse: bool = False) -> None:
        self._boto3 = boto3
        self._reuse = reuse
        self._clients: dict[Any, Any] = {}

    def client(self, *args: Any, **kwargs: Any) -> Any:
        config_key = _config_key(kwargs.get("config"))
        if not self._reuse or config_key is _UNKEYED:
            with CLIENT_LOCK:
                return self._boto3.client(*args, **kwargs)
        environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
        key = (
            environment,
            args,
            tuple(sorted((k, config_key if k == "config" else v) for k, v in kwargs.items())),
        )
        client = self._clients.get(key)  # the usual case: made before, no lock to wait for
        if client is None:
            with CLIENT_LOCK:
                client = self._clients.get(key)
                if client is None:
                    client = self._clients[key] = self._boto3.client(*args, **kwargs)
        return client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._boto3, name)


class SignedBoto3:
    """``boto3`` whose clients sign with the given credentials, whatever credentials the caller passes
    (moto's Step Functions interpreter makes its clients with fixed dummy keys)."""

    def __init__(self, boto3: Any, credentials: dict[str, str]) -> None:
        self._boto3 = boto3
        self._keys = {
            "aws_access_key_id": credentials["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": credentials["AWS_SECRET_ACCESS_KEY"],
        }

    def client(self, *args: Any, **kwargs: Any) -> Any:
        return self._boto3.client(*args, **{**kwargs, **self._keys})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._boto3, name)
