"""Zero-code timing for the processes a command starts (``workload.command``): which one is the script.

A command runs a launcher as often as a script (``torchrun ... train.py``, ``accelerate launch train.py``):
the process to time is not the one trainsweep starts. The launcher therefore puts :data:`SITE_DIR` first
on ``PYTHONPATH``; its ``sitecustomize`` calls :func:`start` as every Python process of the command starts
(the launcher, its ranks, their helpers). A process whose main program is the script the command names
(``TRAINSWEEP_COMMAND_SCRIPT``, or the module in ``TRAINSWEEP_COMMAND_MODULE``) replaces itself, same
process id and interpreter options, with :mod:`trainsweep.instrument.bootstrap` running that script with
its arguments: it is timed, classified and writes the cell status exactly as an entry point is. Every other
process (the launcher itself, ``DataLoader`` workers, tools the script runs) stays passive: it loads
nothing of trainsweep's timing and writes no status. Outside a trainsweep cell (no
``TRAINSWEEP_INSTRUMENT``) nothing happens.

A ``sitecustomize`` module the environment had before (Debian's Python ships one) still runs: this one
hands over to it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainsweep.training import contract

SITE_DIR = Path(__file__).resolve().parent / "site"
"""The folder put first on ``PYTHONPATH``: it holds only ``sitecustomize.py`` (and a package marker)."""
BOOTSTRAP = "trainsweep.instrument.bootstrap"


@dataclass(frozen=True)
class MainProgram:
    """What a Python process runs, from its command line: a script or a module, and the interpreter's
    options before it (``-u``, ``-X dev``...)."""

    kind: str  # script | module
    name: str
    options: tuple[str, ...]
    args: tuple[str, ...]


def main_program(argv: Sequence[str], orig_argv: Sequence[str]) -> MainProgram | None:
    """The main program of this process (``sys.argv`` as ``site`` sees it, and ``sys.orig_argv``);
    None for ``-c``, standard input or an interactive interpreter."""
    if not argv or argv[0] in ("", "-", "-c"):
        return None
    at = len(orig_argv) - len(argv)  # where argv[0] (the script, or -m's module) starts in orig_argv
    if at < 1:
        return None
    if argv[0] == "-m":
        if orig_argv[at - 1] != "-m":
            return None  # -mpkg.mod written as one word: not a form launchers use
        return MainProgram("module", orig_argv[at], tuple(orig_argv[1 : at - 1]), tuple(argv[1:]))
    return MainProgram("script", argv[0], tuple(orig_argv[1:at]), tuple(argv[1:]))


def is_target(main: MainProgram, env: Mapping[str, str]) -> bool:
    """Whether ``main`` is the program the command names (a script compared by its real path)."""
    if main.kind == "module":
        return main.name == env.get(contract.COMMAND_MODULE_ENV)
    script = env.get(contract.COMMAND_SCRIPT_ENV)
    return script is not None and os.path.realpath(main.name) == os.path.realpath(script)


def bootstrap_argv(executable: str, main: MainProgram) -> list[str]:
    """The command line that runs ``main`` under the bootstrap, with the same interpreter options."""
    program = ["-m", main.name] if main.kind == "module" else [main.name]
    return [executable, *main.options, "-m", BOOTSTRAP, *program, *main.args]


def start() -> None:
    """Called by ``sitecustomize`` at every start of a Python process of a command job."""
    env = os.environ
    main = None
    if env.get(contract.INSTRUMENT_ENV):
        main = main_program(sys.argv, getattr(sys, "orig_argv", []))
    if main is not None and is_target(main, env):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, bootstrap_argv(sys.executable, main))  # does not return
    _run_next_sitecustomize()


def _run_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this folder's one hides, if the path holds another."""
    path = [p for p in sys.path if p and Path(p).resolve() != SITE_DIR]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # as site.py treats a failing sitecustomize: say so, go on
        print(f"Error in sitecustomize ({spec.origin}): {type(e).__name__}: {e}", file=sys.stderr)
