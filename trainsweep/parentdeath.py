"""Child processes that die with their parent: a killed sweep leaves no training process behind.

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is delivered when the *thread* that started
the child ends, or its whole process dies, however it dies (SIGKILL included): start the child from a
thread that lives as long as the child (one that waits for it).

The child arms the signal itself: :func:`dying_with_parent` turns a command into one that starts as a
small launcher (an interpreter, isolated and without ``site``: about 15 ms per start) which arms
the signal, leaves if its parent is already gone, and becomes the command with ``execvp``. The signal
survives ``execve`` (Linux clears it only for set-user-ID, set-group-ID and file-capability binaries).
No Python code runs in a forked copy of the caller, so :class:`subprocess.Popen` keeps its
``vfork``/exec path and runs no at-fork handlers: the caller may be full of native threads (torch,
gloo, a notebook's) where a ``preexec_fn`` is unsafe.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# argv: parent pid, signal, LC_CTYPE as the caller gave it ("=value", or "" when unset), command...
# Python's start-up changes two things the command would see: it ignores SIGPIPE and SIGXFSZ (ignored
# dispositions survive exec; Popen resets both for its child) and, in the C locale, it sets
# LC_CTYPE=C.UTF-8 in the environment (PEP 538). The launcher undoes both before exec.
LAUNCHER = """\
import ctypes, os, signal, sys
parent, sig, ctype, *argv = sys.argv[1:]
ctypes.CDLL(None).prctl(1, int(sig), 0, 0, 0)
if os.getppid() != int(parent):
    os._exit(1)
for name in ("SIGPIPE", "SIGXFSZ"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
if ctype:
    os.environ["LC_CTYPE"] = ctype[1:]
else:
    os.environ.pop("LC_CTYPE", None)
try:
    os.execvp(argv[0], argv)
except OSError as e:
    sys.stderr.write(f"cannot start {argv[0]!r}: {e.strerror or e}\\n")
    os._exit(127)
"""


def dying_with_parent(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    sig: int = signal.SIGKILL,
) -> list[str]:
    """``argv`` started so that it is sent ``sig`` when its parent thread or process dies.

    Pass the result to :class:`subprocess.Popen` with the same ``env`` and ``cwd``; the program gets
    the same argv, environment, working directory, standard streams and process group as without the
    wrapper. Where there is no ``prctl`` (not Linux) ``argv`` comes back as it is.

    Raises:
        FileNotFoundError, PermissionError: the program cannot be found or run, as ``Popen`` would
            raise it. An exec that fails for a reason its file does not tell (a ``noexec`` mount, a
            bad format) is reported by the launcher instead: ``cannot start 'X': <reason>`` on
            stderr, exit status 127.
    """
    command = [os.fspath(a) for a in argv]
    if not command or not sys.executable or not _has_prctl():
        return command
    environ = os.environ if env is None else env
    _find_program(command[0], environ, cwd)
    ctype = environ.get("LC_CTYPE")
    return [
        sys.executable, "-I", "-S", "-c", LAUNCHER,
        str(os.getpid()), str(int(sig)), "" if ctype is None else "=" + ctype,
        *command,
    ]  # fmt: skip


@functools.cache
def _has_prctl() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return hasattr(ctypes.CDLL(None), "prctl")
    except (ImportError, OSError):
        return False


def _find_program(program: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> None:
    """Raise what ``Popen`` raises for a program that exec cannot run: the first error other than
    "not there" along the search path (as exec reports it), else :class:`FileNotFoundError`."""
    if "/" in program:  # a path, not a name to look up
        candidates = [Path(program)]
    else:
        candidates = [Path(d, program) for d in os.get_exec_path(dict(env))]
    for candidate in candidates:
        code = _exec_error(Path(cwd, candidate) if cwd is not None else candidate)
        if code is None:
            return
        if code not in (errno.ENOENT, errno.ENOTDIR):
            raise OSError(code, os.strerror(code), program)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _exec_error(path: Path) -> int | None:
    """The errno exec would fail with for ``path`` as far as its file tells (None: it would run)."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return e.errno
    if not stat.S_ISREG(mode) or not os.access(path, os.X_OK):
        return errno.EACCES
    return None
