"""``trainsweep parse LOG`` without building the typer app: the plain calls of the command, run first.

Building the app costs about 0.3 s of CPU before a command runs (typer, click and rich, and pydantic,
which typer's parameter handling imports): as much as parsing 25 MB of log. :func:`run` recognises the
plain forms of ``trainsweep parse`` (``LOG`` with ``--vmtype V``, ``--batch-size N``, ``--run N``, each at
most once, as ``--opt V`` or ``--opt=V``) whose meaning typer could not read otherwise, and runs the
command's own code with the standard library alone. Anything else (help, an unknown or repeated option,
a value typer checks or refuses, ``--``, a LOG that is missing or a folder, a log that cannot be opened,
shell completion) returns False, and typer runs the command as always, with its own messages: the output
and exit status are the same either way (``tests/processes/test_cli_fast.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_OPTIONS = {"--vmtype": "vmtype", "--batch-size": "batch_size", "--run": "run"}
_MINIMUM = {"batch_size": 1, "run": 0}  # the commands' typer.Option(min=...)
_MAX_DIGITS = 18  # a plain int typer reads the same way; longer ones are left to typer


def _recognise(args: list[str]) -> tuple[Path, dict[str, Any]] | None:
    """``(LOG, options)`` for ``parse`` with plain arguments, else None (typer reads them)."""
    if not args or args[0] != "parse":
        return None
    log: str | None = None
    options: dict[str, Any] = {}
    rest = args[1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        i += 1
        if not arg.startswith("-"):
            if log is not None or not arg:
                return None
            log = arg
            continue
        name, eq, value = arg.partition("=")
        key = _OPTIONS.get(name)
        if key is None or key in options:
            return None
        if not eq:
            if i == len(rest):
                return None
            value = rest[i]
            i += 1
        plain = _plain_value(key, value)
        if plain is None:
            return None
        options[key] = plain
    if log is None:
        return None
    return Path(log), options


def _plain_value(key: str, value: str) -> str | int | None:
    """An option's value as the command gets it, when typer would read it the same way; else None."""
    if not value or value.startswith("-") or value != value.strip():
        return None
    if key not in _MINIMUM:
        return value
    if not (value.isascii() and value.isdigit()) or len(value) > _MAX_DIGITS:
        return None
    if value != str(int(value)) or int(value) < _MINIMUM[key]:
        return None
    return int(value)


def print_run_record(timings: Any) -> None:
    """The run record of a parsed log to stdout, streamed (a very long log's record is hundreds of MB)."""
    from trainsweep.artefacts import iter_run_record

    sys.stdout.flush()
    write = sys.stdout.buffer.write
    for block in iter_run_record(timings):
        write(block)
    sys.stdout.buffer.flush()


def run(args: list[str]) -> bool:
    """Run ``trainsweep parse`` for plain ``args`` (after the program name); False: typer must run it.

    What typer does around a command is done the same way: an interrupt exits 130, a closed stdout
    (``| head``) exits 1 without a traceback.
    """
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return False  # a shell-completion request, which typer answers
    recognised = _recognise(args)
    if recognised is None:
        return False
    log, options = recognised
    if not log.exists() or log.is_dir():
        return False  # typer prints the error
    try:
        from trainsweep.logs import parse

        try:
            timings = parse(
                log,
                computing_system=options.get("vmtype"),
                batch_size=options.get("batch_size"),
                run_index=options.get("run"),
            )
        except OSError:
            return False  # nothing written yet: typer reads it again and prints the error
        print_run_record(timings)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        import errno

        if exc.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper

        sys.stdout = PacifyFlushWrapper(sys.stdout)  # type: ignore[assignment]
        sys.stderr = PacifyFlushWrapper(sys.stderr)  # type: ignore[assignment]
        sys.exit(1)
    return True
