"""Teach moto's Step Functions interpreter to write a Distributed Map's results (``ResultWriter``).

moto 5.2 runs a Distributed Map (``ItemReader`` from S3, child workflows, ``MaxConcurrency``) but its
``ResultWriter`` writes an empty ``manifest.json`` and drops the results. :func:`install` replaces it by
one that writes what AWS writes below ``<Prefix><map run id>/``: ``SUCCEEDED_0.json`` and
``FAILED_0.json`` (JSON arrays of child executions, each with ``Status`` and, when it succeeded, its
``Output`` as a JSON string) and a ``manifest.json`` that lists them, so AggregateSweep reads the same
files in local mode as on AWS. It also evaluates the writer's ``Parameters`` (``Prefix.$``) against the
Map state's input, as AWS does (moto evaluates them on the children's outputs), and it makes the
interpreter create its boto3 clients one at a time and share them (hundreds of children create them
in parallel, thousands in a large sweep).

What differs from AWS: moto keeps no input, error or cause of a child execution that failed, so a
``FAILED`` entry has ``Status`` only (AggregateSweep then records that job's cells as failed with "no
result recorded"); every run's results fit in one file per status (AWS splits at 5 GB); the results
folder is named by a fresh id, not the map run's, and ``MapRunArn`` may name another map run of the
same execution (moto does not say which run is writing).
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from typing import Any

from trainsweep.local import moto_load
from trainsweep.local.clients import LockedBoto3

_lock = threading.Lock()
_installed = False


def result_files(results: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """The entries of each result file, by status, for the outputs moto collected (None: failed)."""
    files: dict[str, list[dict[str, Any]]] = {"SUCCEEDED": [], "FAILED": []}
    for output in results:
        if output is None:
            files["FAILED"].append({"Status": "FAILED"})
        else:
            files["SUCCEEDED"].append({"Status": "SUCCEEDED", "Output": json.dumps(output)})
    return files


def install() -> None:
    """Replace moto's S3 ``ResultWriter`` (idempotent, thread-safe; for the process's lifetime)."""
    global _installed
    with _lock:
        if _installed:
            return
        from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval import (
            resource_eval_s3,
        )

        cls = resource_eval_s3.ResourceEvalS3

        def _handle_put_object(env: Any, resource_runtime_part: Any, state_credentials: Any) -> None:
            parameters = dict(env.stack.pop())
            results = env.stack.pop()
            s3 = cls._get_s3_client(
                resource_runtime_part=resource_runtime_part, state_credentials=state_credentials
            )
            map_run_arn = env.map_run_record_pool_manager.get_all().pop().map_run_arn
            prefix = parameters.get("Prefix") or ""
            if prefix and not prefix.endswith("/"):
                prefix += "/"
            # moto's pool is per execution, and groups' maps end concurrently: its last record need not
            # be this map's, so the folder gets its own id (AWS uses the map run's).
            prefix += uuid.uuid4().hex + "/"
            bucket = parameters["Bucket"]
            listed: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
            for status, entries in result_files(list(results or [])).items():
                if not entries:
                    continue
                key = f"{prefix}{status}_0.json"
                body = json.dumps(entries).encode()
                s3.put_object(Bucket=bucket, Key=key, Body=body)
                listed[status].append({"Key": key, "Size": len(body)})
            manifest = {"DestinationBucket": bucket, "MapRunArn": map_run_arn, "ResultFiles": listed}
            key = prefix + "manifest.json"
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(manifest).encode())
            env.stack.append(
                {"MapRunArn": map_run_arn, "ResultWriterDetails": {"Bucket": bucket, "Key": key}}
            )

        cls._handle_put_object = staticmethod(_handle_put_object)  # type: ignore[method-assign]
        _restore_map_input_for_writer()
        _serialise_client_creation()
        moto_load.install()
        _installed = True


_map_inputs = threading.local()


def _restore_map_input_for_writer() -> None:
    """Evaluate ``ResultWriter.Parameters`` against the Map state's input, as AWS does.

    moto evaluates them on the children's outputs (``Prefix.$`` then misses). The Map's input is kept
    per thread (each Map state evaluates in one thread, groups in parallel in their own).
    """
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer import result_writer_decl
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap

    eval_execution = StateMap._eval_execution
    eval_writer = result_writer_decl.ResultWriter._eval_body

    def _eval_execution(self: Any, env: Any) -> None:
        stack = _map_inputs.__dict__.setdefault("stack", [])
        stack.append(copy.deepcopy(env.states.get_input()))
        try:
            eval_execution(self, env)
        finally:
            stack.pop()

    def _eval_body(self: Any, env: Any) -> None:
        stack = getattr(_map_inputs, "stack", None)
        if not stack:
            eval_writer(self, env)
            return
        # The parameters read the value on top of the evaluation stack (moto leaves the children's
        # outputs there, which the writer then takes): evaluate them on the Map's input instead.
        env.stack.append(copy.deepcopy(stack[-1]))
        self.parargs.eval(env=env)
        parameters = env.stack.pop()
        env.stack.pop()
        env.stack.append(parameters)
        self.resource_eval.eval_resource(env=env)

    StateMap._eval_execution = _eval_execution  # type: ignore[method-assign]
    result_writer_decl.ResultWriter._eval_body = _eval_body  # type: ignore[method-assign]


def _serialise_client_creation() -> None:
    """Create the interpreter's boto3 clients one at a time, and once per set of arguments.

    Every task state of every child workflow makes its own client from boto3's default session, and a
    Distributed Map runs hundreds of children in threads at once: creating clients from one session in
    parallel is not thread-safe in boto3 and now and then raises inside a task, which the interpreter
    turns into an uncatchable ``States.Runtime`` (the job's cells then have no result). The clients
    themselves are thread-safe: the interpreter's are shared (:class:`~trainsweep.local.clients.LockedBoto3`).
    """
    from moto.stepfunctions.parser.asl.utils import boto_client

    if not isinstance(boto_client.boto3, LockedBoto3):
        boto_client.boto3 = LockedBoto3(boto_client.boto3, reuse=True)  # type: ignore[assignment]
