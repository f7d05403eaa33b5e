"""moto's hot paths made cheap for thousands of jobs and hundreds of concurrent requests.

A Distributed Map's children run in threads of this process, and each job makes about ten requests and
evaluates a dozen states:

* Every request looks up its account's backend through ``BackendDict._create_account_specific_backend``,
  which takes moto's one process-wide ``backend_lock`` and scans the list of backends in use (a
  Python ``__eq__`` per entry) even when the account's backend exists: every request of every service
  queues on that lock. The lookup now returns at once when the backend exists (moto's own code still
  creates it, under its lock, the first time).
* Every request parses its parameters with the service's model, loaded once and cached without a
  lock: the first requests of hundreds of children starting at once each load the model again (a
  directory walk and a large JSON file, seconds of CPU in all). The first load is now made once.
* The Step Functions interpreter parses every JSONPath (``InputPath``, ``ResultPath``, ``$.x`` in
  ``Parameters`` ...) each time a state evaluates it, building a new ply parser each time (~3 ms of
  CPU, some 25 times a job). A path's parsed form (an immutable expression) is now kept and reused.

None of them changes what moto answers. :func:`install` is idempotent and lasts for the process.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_lock = threading.Lock()
_installed = False


def install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _fast_backend_lookup()
        _load_models_once()
        _parse_json_paths_once()
        _installed = True


def _fast_backend_lookup() -> None:
    from moto.core.base_backend import BackendDict

    create = BackendDict._create_account_specific_backend

    def _create_account_specific_backend(self: Any, account_id: str) -> None:
        # A backend in the dict was created (and registered for reset) by moto since its last reset.
        if dict.__contains__(self, account_id):
            return
        create(self, account_id)

    BackendDict._create_account_specific_backend = _create_account_specific_backend  # type: ignore[method-assign]


def _load_models_once() -> None:
    from moto.core import responses, routing, utils

    cached = utils.get_service_model
    lock = threading.Lock()
    models: dict[str, Any] = {}

    def get_service_model(service_name: str) -> Any:
        model = models.get(service_name)
        if model is None:
            with lock:  # one thread loads it; the others wait for it instead of loading it too
                model = models.get(service_name)
                if model is None:
                    model = models[service_name] = cached(service_name)
        return model

    def cache_clear() -> None:
        with lock:
            models.clear()
            cached.cache_clear()

    get_service_model.cache_clear = cache_clear  # type: ignore[attr-defined]  # as functools.cache's
    utils.get_service_model = get_service_model  # type: ignore[assignment]
    for module in (responses, routing):  # they imported the name
        module.get_service_model = get_service_model  # type: ignore[attr-defined]


def _parse_json_paths_once() -> None:
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    for module in (json_path, result_path):  # each imported its own jsonpath_ng ``parse``
        module.parse = functools.lru_cache(maxsize=4096)(module.parse)  # type: ignore[attr-defined]
