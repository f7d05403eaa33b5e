"""Run Lambda functions deployed into moto from their handler source, without Docker.

moto's ``LambdaFunction._invoke_lambda`` is the single path behind Invoke, Step Functions tasks,
S3 notifications and custom resources; without Docker it never runs the function's code.
:func:`install` replaces it: the function's handler is resolved (by default from
``lambdas/<name>/handler.py``, where ``<name>`` is the function's ``TRAINSWEEP_FUNCTION`` environment
variable that the CDK constructs set) and called in this process with the function's environment
variables, so its boto3 clients reach the same moto (in-process mock or server).

S3 notifications run asynchronously, as on AWS (moto would run them inside the ``PutObject`` call):
:func:`wait_idle` waits for those still running. Invocations run concurrently, each in its caller's
thread; the function's environment is a layer over ``os.environ`` seen by that thread only
(:mod:`trainsweep.local.scoped_env`), so no invocation sees another's variables or loses its own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from trainsweep.aws.config import EMBEDDED_ENV
from trainsweep.local import scoped_env
from trainsweep.local.clients import LockedBoto3

FUNCTION_ENV = "TRAINSWEEP_FUNCTION"
"""Environment variable naming the handler folder under ``lambdas/`` (set by the CDK constructs)."""

LAMBDAS_DIR = Path(__file__).resolve().parents[2] / "lambdas"

Handler = Callable[[Any, Any], Any]
HandlerResolver = Callable[[Any], Handler | None]
"""Given moto's ``LambdaFunction``, return the callable to run (or None: not ours)."""

_install_lock = threading.Lock()
_load_lock = threading.Lock()
_pending_lock = threading.Lock()
_pending: set[threading.Thread] = set()
_installed: dict[str, Any] = {}
_modules: dict[Path, ModuleType] = {}


class LambdaContext:
    """The parts of the Lambda context object that handlers and Powertools read."""

    def __init__(self, function: Any, timeout_s: float):
        self.function_name = function.function_name
        self.function_version = getattr(function, "version", "$LATEST")
        self.invoked_function_arn = function.function_arn
        self.memory_limit_in_mb = int(getattr(function, "memory_size", 128) or 128)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = getattr(function, "logs_group_name", f"/aws/lambda/{self.function_name}")
        self.log_stream_name = self.aws_request_id
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def load_handler(path: Path, attribute: str = "handler") -> Handler:
    """Import a handler file once (as its own module, so same-named files don't collide).

    Thread-safe: the first invocations of a function often arrive together (a Distributed Map's
    children), and each used to import the file again (a fresh module, logger and clients each).
    """
    path = path.resolve()
    module = _modules.get(path)
    if module is None:
        with _load_lock:
            module = _modules.get(path)
            if module is None:
                module = _modules[path] = _import_handler(path)
    return getattr(module, attribute)


def _import_handler(path: Path) -> ModuleType:
    import boto3

    name = f"trainsweep_lambda_{path.parent.name}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import handler {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if getattr(module, "boto3", None) is boto3:
        # Invocations run on many threads: the handler's clients are created one at a time, and
        # shared by invocations with the same AWS environment.
        module.boto3 = LockedBoto3(boto3, reuse=True)  # type: ignore[attr-defined]
    return module


def source_resolver(lambdas_dir: Path = LAMBDAS_DIR) -> HandlerResolver:
    """Resolve a function to ``<lambdas_dir>/<TRAINSWEEP_FUNCTION>/handler.py``'s ``handler``."""

    def resolve(function: Any) -> Handler | None:
        name = (function.environment_vars or {}).get(FUNCTION_ENV)
        if not name:
            return None
        path = lambdas_dir / name / "handler.py"
        if not path.is_file():
            return None
        attribute = (function.handler or "handler.handler").rsplit(".", 1)[-1]
        return load_handler(path, attribute)

    return resolve


def install(handler_resolver: HandlerResolver | None = None, *, async_s3: bool = True) -> None:
    """Make moto run Lambda functions from source. Idempotent: a later call replaces the resolver."""
    from moto.awslambda.models import LambdaFunction

    with _install_lock:
        _installed["resolver"] = handler_resolver or source_resolver()
        _installed["async_s3"] = async_s3
        if "original" in _installed:
            return
        _installed["original"] = LambdaFunction._invoke_lambda

        def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
            return invoke_function(self, event)

        LambdaFunction._invoke_lambda = _invoke_lambda  # type: ignore[method-assign]


def uninstall() -> None:
    """Restore moto's own ``_invoke_lambda`` (tests)."""
    from moto.awslambda.models import LambdaFunction

    with _install_lock:
        original = _installed.pop("original", None)
        if original is not None:
            LambdaFunction._invoke_lambda = original  # type: ignore[method-assign]
        _installed.clear()


def wait_idle(timeout: float = 60.0) -> bool:
    """Wait for asynchronous invocations (S3 notifications) to finish; False if some still run."""
    deadline = time.monotonic() + timeout
    while True:
        with _pending_lock:
            threads = list(_pending)
        if not threads:
            return True
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if time.monotonic() >= deadline:
            with _pending_lock:
                return not _pending


def _is_s3_notification(event: Any) -> bool:
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        return False
    return all(isinstance(r, dict) and r.get("eventSource") == "aws:s3" for r in records)


def invoke_function(function: Any, event: Any) -> tuple[str, bool, str]:
    """Run one invocation; returns moto's ``(payload, errored, logs)``."""
    if isinstance(event, str | bytes):
        with contextlib.suppress(ValueError):
            event = json.loads(event)
    if event is None:
        event = {}
    if _installed.get("async_s3") and _is_s3_notification(event):
        thread = threading.Thread(target=_run_async, args=(function, event), daemon=True)
        with _pending_lock:
            _pending.add(thread)
        thread.start()
        return "", False, ""
    return _run(function, event)


def _run_async(function: Any, event: Any) -> None:
    try:
        _run(function, event)
    finally:
        with _pending_lock:
            _pending.discard(threading.current_thread())


def _environment(function: Any) -> dict[str, str]:
    from moto import settings
    from moto.core.models import botocore_stubber

    env = {str(k): str(v) for k, v in (function.environment_vars or {}).items()}
    env.update(
        {
            "AWS_LAMBDA_FUNCTION_NAME": function.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_size),
            "AWS_REGION": function.region,
            "AWS_DEFAULT_REGION": function.region,
            EMBEDDED_ENV: "1",  # PlanSweep accepts the local instance types only here
        }
    )
    if not botocore_stubber.enabled and "AWS_ENDPOINT_URL" not in os.environ:
        # moto runs as a server: point the handler's boto3 at it, as moto's Docker runner does.
        env["AWS_ENDPOINT_URL"] = f"http://localhost:{settings.moto_server_port()}"
    return env


def _run(function: Any, event: Any) -> tuple[str, bool, str]:
    resolver: HandlerResolver = _installed["resolver"]
    try:
        handler = resolver(function)
    except Exception as exc:  # an import error in the handler is the function's error, as on AWS
        return _error_payload(exc), True, traceback.format_exc()
    if handler is None:
        err = RuntimeError(f"no local handler for Lambda function {function.function_name}")
        return _error_payload(err), True, str(err)
    # The function's variables are a layer over os.environ for this invocation's thread only: other
    # invocations and the interpreter's threads never see them, nor see anything removed.
    with scoped_env.scoped(_environment(function)):
        try:
            result = handler(event, LambdaContext(function, float(function.timeout or 3)))
            return json.dumps(result, default=str), False, ""
        except Exception as exc:
            logs = traceback.format_exc()
            _save_logs(function, logs)
            return _error_payload(exc), True, logs


def _error_payload(exc: BaseException) -> str:
    return json.dumps(
        {
            "errorMessage": str(exc),
            "errorType": type(exc).__name__,
            "stackTrace": traceback.format_exception(exc)[-5:],
        }
    )


def _save_logs(function: Any, text: str) -> None:
    # Logging is best effort; the error payload already carries the failure.
    with contextlib.suppress(Exception):
        function.save_logs(text)
