"""``trainsweep import``: analyse a folder of existing training logs into the results layout.

Walks a folder for logs (the seeds' ``result-<VMTYPE>-<BS>-e<N>.txt|.out``, ``*.log``, and other
``.txt``/``.out`` files with training content), parses each one (a bad file never stops the others),
writes every run's artefacts, runs cross-file quality checks (byte-identical logs under different
names, identical timings), writes ``quality.json`` and, per results root, the sweep artefacts.

Results roots mirror the source tree: logs in ``<dir>/logs/`` (the seed layout, whose outputs sit in
``<dir>/execution-times/``) or directly in ``<dir>/`` go to ``<out>/<dir>/``. So logs of different
experiments, which may share a name such as ``result-p2-1-256-e1.txt``, never overwrite each other.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import json
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from trainsweep import axes, layout
from trainsweep.errors import TrainsweepError
from trainsweep.logs.model import RunTimings

if TYPE_CHECKING:
    from trainsweep.cost.records import BillingRecord

QUALITY_KIND = "trainsweep.quality"
QUALITY_SCHEMA_VERSION = 1

LOG_SUFFIXES = frozenset({".txt", ".out", ".log"})
SNIFF_BYTES = 256 * 1024
# Byte strings that only training logs contain (every dialect the parser reads).
TRAINING_MARKERS = (
    b"step training time",
    b"steps training:",
    b"Epoch time",
    b"Validation time",
    b"Real time:",
    b"nicializacao",
    b"Initialization time",
    b":::MLLOG",
    b"[MO833]",
)
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
ARCHIVE_MAX_BYTES = 512 * 1024 * 1024
"""Archives (e.g. SageMaker's ``model.tar.gz`` with the training log inside) up to this size are searched."""
ARCHIVE_MAX_UNCOMPRESSED_BYTES = 4 * 1024 * 1024 * 1024
"""An archive is read up to this many bytes once uncompressed (a 512 MiB ``.tar.gz`` of zeros expands
to about 500 GiB): a member that ends beyond it, and every member after it, is neither searched nor read."""
ARCHIVE_MAX_MEMBERS = 100_000
"""Members of one archive looked at (tarfile keeps each one's header in memory)."""
HIDDEN_FILE = "hidden file (its name starts with a dot): not read"
NO_TRAINING_CONTENT = "no training-log content"
"""The reason a ``.txt``/``.out`` file without training content is skipped (the common, harmless one)."""
POOL_MIN_FILES = 4
"""Below this many logs, parsing in-process is faster than starting worker processes."""

Progress = Callable[[int, int, str], None]
"""``progress(done, total, relative_path)``, called after each log is processed."""


class ImportSourceError(TrainsweepError):
    """The folder to import cannot be read at all (missing, not a folder)."""


@dataclass
class FileOutcome:
    """What happened to one log file of an import."""

    path: str
    """Path relative to the imported folder (POSIX separators)."""
    results_root: str
    """Results root relative to the output folder ("" = the output folder itself)."""
    run_name: str
    status: str
    """The parser's run status, or ``error`` when the file could not be processed at all."""
    dialect: str | None = None
    sha256: str | None = None
    size: int = 0
    computing_system: str | None = None
    instance_type: str | None = None
    """The ``ml.*`` type read from the log's header or the spelling of its name; None when not read."""
    billing_record: str | None = None
    """The DescribeTrainingJob dump matched to this run (path relative to the imported folder)."""
    batch_size: int | None = None
    run_index: int | None = None
    epochs: int = 0
    steps: int = 0
    timings_fingerprint: str | None = None
    rank: int | None = None
    """The rank whose timings this file holds, when it is one rank file of a merged run (``run_name``)."""
    problems: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("timings_fingerprint")
        return d


@dataclass
class ImportResult:
    """The outcome of :func:`import_dir`; ``quality`` is what was written to ``quality.json``."""

    out: Path
    files: list[FileOutcome]
    skipped: list[dict[str, str]]
    quality: dict[str, Any]
    runs: dict[str, RunTimings] = field(default_factory=dict, repr=False)
    """Parsed runs by source path (relative, POSIX)."""

    @property
    def processed(self) -> int:
        return len(self.files)

    @property
    def with_problems(self) -> int:
        return sum(1 for f in self.files if f.problems)


# ---- discovery -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    path: str
    relative: str
    results_root: str
    run_name: str
    member: str | None = None
    """The log's name inside the archive at ``path``; None for a plain file."""
    setting: tuple[tuple[str, axes.AxisValue], ...] = ()
    """The axes' values its folders or file name carry (``dtype=bfloat16/``:
    :func:`trainsweep.axes.from_path`)."""
    file_name: str | None = None
    """The file name the parser reads the cell from when the name carried a setting (without it)."""


@contextmanager
def _open_log(path: str, member: str | None) -> Iterator[IO[bytes]]:
    """The log's bytes: the file itself, or one member of a tar archive (read, never extracted)."""
    if member is None:
        with open(path, "rb") as f:  # noqa: PTH123 - plain open is the fast path in workers
            yield f
        return
    with tarfile.open(path, "r:*") as archive:
        # Not archive.extractfile(name): looking a name up reads (decompresses) the whole archive.
        found = next((m for m in _bounded_members(archive) if m.name == member), None)
        extracted = archive.extractfile(found) if found is not None else None
        if extracted is None:
            raise OSError(f"{member} is not a regular file within the bounds of {path}")
        with extracted:
            yield extracted


def _bounded_members(
    archive: tarfile.TarFile, stopped: list[tarfile.TarInfo] | None = None
) -> Iterator[tarfile.TarInfo]:
    """The archive's members up to the first one that ends beyond :data:`ARCHIVE_MAX_UNCOMPRESSED_BYTES`
    of uncompressed bytes or lies beyond :data:`ARCHIVE_MAX_MEMBERS`; that one (only its header was
    read: going on to the next member would decompress its data) is appended to ``stopped``.
    """
    for i, m in enumerate(archive):
        if i >= ARCHIVE_MAX_MEMBERS or m.offset_data + m.size > ARCHIVE_MAX_UNCOMPRESSED_BYTES:
            if stopped is not None:
                stopped.append(m)
            return
        yield m


def _archive_limit_reason(stopped: list[tarfile.TarInfo], seen: int) -> str | None:
    """Why :func:`_bounded_members` stopped before the end of the archive; None when it did not."""
    if not stopped:
        return None
    if seen >= ARCHIVE_MAX_MEMBERS:
        return f"archive has more than {ARCHIVE_MAX_MEMBERS} members: the rest not searched for logs"
    mib = ARCHIVE_MAX_UNCOMPRESSED_BYTES / (1024 * 1024)
    return (
        f"archive expands beyond {mib:g} MiB uncompressed: {stopped[0].name} ({stopped[0].size} bytes) "
        "and every member after it not searched for logs"
    )


def _archive_logs(path: Path) -> tuple[list[str], str | None]:
    """The names of the training logs inside a tar archive, and the reason it was not (fully) searched."""
    try:
        if path.stat().st_size > ARCHIVE_MAX_BYTES:
            return [], f"archive larger than {ARCHIVE_MAX_BYTES // (1024 * 1024)} MiB: not searched for logs"
        found: list[str] = []
        stopped: list[tarfile.TarInfo] = []
        seen = 0
        with tarfile.open(path, "r:*") as archive:
            for m in _bounded_members(archive, stopped):
                seen += 1
                name = PurePosixPath(m.name).name
                if (
                    not m.isfile()
                    or name.startswith(".")
                    or PurePosixPath(name).suffix.lower() not in LOG_SUFFIXES
                ):
                    continue
                if not _log_by_name(name):
                    f = archive.extractfile(m)
                    if f is None or not _has_training_content(f.read(SNIFF_BYTES)):
                        continue
                found.append(m.name)
        return found, _archive_limit_reason(stopped, seen)
    except (OSError, tarfile.TarError, EOFError) as exc:
        return [], f"cannot read the archive: {exc}"


def _log_by_name(name: str) -> bool:
    """A seed-named or ``.log`` file is taken as a log; any other is sniffed for training content."""
    return layout.parse_seed_log_name(name) is not None or name.lower().endswith(".log")


def _has_training_content(head: bytes) -> bool:
    return any(marker in head for marker in TRAINING_MARKERS)


def _looks_like_training_log(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return True  # let the parser report why it cannot be read
    return _has_training_content(head)


def _is_candidate(name: str) -> bool:
    """Whether a file of this name would be read (a log or an archive) were it a visible regular file."""
    lower = name.lower().lstrip(".")
    return PurePosixPath(lower).suffix in LOG_SUFFIXES or lower.endswith(ARCHIVE_SUFFIXES)


def _folders_to_walk(
    here: Path, names: list[str], src: Path, exclude: Path | None, skipped: list[dict[str, str]]
) -> list[str]:
    """The sub-folders of ``here`` to walk into, in order; hidden folders and links to folders are
    added to ``skipped`` with the reason, the output folder ``exclude`` is left out silently."""
    walked = []
    for name in sorted(names):
        path = here / name
        if path.resolve() == exclude:
            continue
        if path.is_symlink():
            reason = f"symbolic link to the folder {path.readlink()}: links to folders are not walked into"
        elif name.startswith("."):
            reason = "hidden folder (its name starts with a dot): not searched"
        else:
            walked.append(name)
            continue
        skipped.append({"path": path.relative_to(src).as_posix(), "reason": reason})
    return walked


def _not_a_regular_file(path: Path) -> str:
    """Why a candidate that is no regular file is not read: a dangling link, a link loop, a FIFO, ..."""
    if path.is_symlink():
        try:
            path.stat()
        except FileNotFoundError:
            return f"dangling symbolic link (to {path.readlink()}, which does not exist): not read"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "symbolic link loop (the link leads back to itself): not read"
            return f"symbolic link that cannot be followed ({exc.strerror or exc}): not read"
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}): not read"
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    )
    kind = next((what for test, what in kinds if test(mode)), "not a regular file")
    return f"not a regular file ({kind}): not read"


def _results_root(relative_dir: PurePosixPath) -> str:
    """The results root of the logs of a folder: the folder, less a last ``logs`` and the folders that
    name a setting (``dtype=bfloat16``): the logs of every setting make one sweep."""
    parts = [p for p in relative_dir.parts if axes.named_pairs(p) is None]
    if parts and parts[-1] == layout.LOGS_DIR:
        parts = parts[:-1]
    return "/".join(parts)


def _task(path: Path, relative: PurePosixPath, member: str | None = None) -> _Task:
    """The work of one log (``member`` of the archive at ``path``, else the file), its run name and
    results root, with the setting its folders and name carry."""
    inner = PurePosixPath(member) if member is not None else PurePosixPath(relative.name)
    setting, stem = axes.from_path(relative.parent.parts, inner.stem)
    return _Task(
        path=str(path),
        relative=str(relative),
        results_root=_results_root(relative.parent),
        run_name=stem + axes.name_suffix(setting),
        member=member,
        setting=tuple(setting.items()),
        file_name=stem + inner.suffix if setting else None,
    )


def _outside_link(path: Path, root: Path) -> Path | None:
    """Where the symbolic link ``path`` leads when that is outside the folder ``root`` (resolved);
    None for a file that is no link, or a link that stays inside ``root``."""
    if not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))  # unlike Path.resolve(), no RuntimeError on a link loop
    return None if target.is_relative_to(root) else target


def discover(
    src: Path, *, exclude: Path | None = None, follow_symlinks: bool = False
) -> tuple[list[_Task], list[dict[str, str]], list[Path]]:
    """Find the logs below ``src`` (hidden folders and ``exclude`` skipped) in one walk.

    Symbolic links to files outside ``src`` (e.g. to ``/etc/passwd``) are not read, but listed as
    skipped, unless ``follow_symlinks``; links to folders are never walked into.

    Returns (tasks in path order, skipped files with the reason, JSON files: candidate billing records).
    """
    tasks: list[_Task] = []
    skipped: list[dict[str, str]] = []
    json_files: list[Path] = []
    exclude_resolved = exclude.resolve() if exclude is not None else None
    root = src.resolve()
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        dirnames[:] = _folders_to_walk(here, dirnames, src, exclude_resolved, skipped)
        for filename in sorted(filenames):
            path = here / filename
            relative = PurePosixPath(path.relative_to(src).as_posix())
            suffix = path.suffix.lower()
            if filename.startswith("."):
                if _is_candidate(filename):
                    skipped.append({"path": str(relative), "reason": HIDDEN_FILE})
                continue
            if not follow_symlinks and (target := _outside_link(path, root)) is not None:
                skipped.append(
                    {
                        "path": str(relative),
                        "reason": f"symbolic link to {target}, outside the imported folder: not read "
                        "(--follow-symlinks reads it)",
                    }
                )
                continue
            if not path.is_file():
                if _is_candidate(filename):
                    skipped.append({"path": str(relative), "reason": _not_a_regular_file(path)})
                continue
            if suffix == ".json":
                json_files.append(path)
            if filename.lower().endswith(ARCHIVE_SUFFIXES):
                members, why = _archive_logs(path)
                if why is not None:
                    skipped.append({"path": str(relative), "reason": why})
                for member in members:
                    inner = relative / PurePosixPath(member.lstrip("/")).as_posix().removeprefix("./")
                    tasks.append(
                        replace(_task(path, inner, member), results_root=_results_root(relative.parent))
                    )
                continue
            if suffix not in LOG_SUFFIXES:
                continue
            if not _log_by_name(filename) and not _looks_like_training_log(path):
                skipped.append({"path": str(relative), "reason": NO_TRAINING_CONTENT})
                continue
            tasks.append(_task(path, relative))
    return _unique_run_names(tasks), skipped, json_files


def _unique_run_names(tasks: list[_Task]) -> list[_Task]:
    """Two logs of one results root with the same stem keep their extension in the run name."""
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for t in tasks:
        seen[(t.results_root, t.run_name)] += 1
    return [
        replace(t, run_name=PurePosixPath(t.relative).name) if seen[(t.results_root, t.run_name)] > 1 else t
        for t in tasks
    ]


# ---- per-file work (runs in worker processes) --------------------------------------------------------


@dataclass
class _Processed:
    outcome: FileOutcome
    run: RunTimings | None
    artefacts: list[tuple[str, str]]
    """(relative path below the results root, staged file holding its bytes), in writing order."""


_READ_ERRORS = (OSError, tarfile.TarError, EOFError, zlib.error)


class _Reader:
    """The log's file object for the parser, remembering why a read failed (so that the log is read
    once: the parser computes its SHA-256 and size, and a file that cannot be read stays an import
    error instead of an ``unreadable`` run)."""

    def __init__(self, f: IO[bytes], name: str) -> None:
        self._f = f
        self.name = name
        self.error: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        try:
            return self._f.read(size)
        except _READ_ERRORS as exc:
            self.error = exc
            raise OSError(str(exc)) from exc


def _file_sha256(task: _Task) -> tuple[str, int]:
    """SHA-256 and size of a log the parser could not finish (normally the parser computes them)."""
    h = hashlib.sha256()
    size = 0
    with _open_log(task.path, task.member) as f:
        while piece := f.read(1 << 20):
            h.update(piece)
            size += len(piece)
    return h.hexdigest(), size


def _timings_fingerprint(run: RunTimings) -> str | None:
    if run.steps_total < 2:
        return None
    h = hashlib.sha256()
    for steps in run.iter_steps():  # the bytes of flat_steps(), epoch by epoch
        h.update(steps)
    for e in run.epochs:
        h.update(repr((e.index, e.steps, e.validation_s, e.epoch_s)).encode())
    return h.hexdigest()


def _stage_artefacts(run: RunTimings, staging: Path) -> list[tuple[str, str]]:
    """Write the run's artefacts block by block into files below ``staging`` (bounded memory)."""
    from trainsweep.artefacts import iter_run_artefacts

    staged: list[tuple[str, str]] = []
    staging.mkdir(parents=True, exist_ok=True)
    for relative, blocks in iter_run_artefacts(run):
        target = staging / str(len(staged))
        with target.open("wb") as f:
            for block in blocks:
                f.write(block)
        staged.append((relative, str(target)))
    return staged


def _process(job: tuple[_Task, str | None]) -> _Processed:
    """Parse one log and write its artefacts into the staging folder ``job[1]``; never raises (a
    failure becomes the outcome). The main process moves the staged files to their place."""
    task, staging = job  # staging None: parse only (no artefacts), as read_dir wants
    outcome = FileOutcome(task.relative, task.results_root, task.run_name, status="error")
    from trainsweep.logs import parse

    with ExitStack() as stack:
        try:
            f = stack.enter_context(_open_log(task.path, task.member))
        except _READ_ERRORS as exc:
            outcome.problems.append(_problem("import.unreadable", f"cannot read the file: {exc}", "error"))
            return _Processed(outcome, None, [])
        # A plain file keeps its path as its name, so that the parser also sees the folder (old EC2
        # logs are named by GPU count only); an archive member goes by its own name.
        reader = _Reader(f, _name_to_read(task))
        try:
            run = parse(reader, name=None if task.member is None else reader.name)
        except Exception as exc:  # a parser bug must not stop the import
            outcome.problems.append(
                _problem("import.crashed", f"processing failed: {type(exc).__name__}: {exc}", "error")
            )
            with suppress(*_READ_ERRORS):  # the file's identity still counts in the duplicate checks
                outcome.sha256, outcome.size = _file_sha256(task)
            return _Processed(outcome, None, [])
    if reader.error is not None:
        outcome.problems.append(
            _problem("import.unreadable", f"cannot read the file: {reader.error}", "error")
        )
        return _Processed(outcome, None, [])
    outcome.sha256, outcome.size = run.sha256, run.bytes_read
    _set_named_axes(run, task)
    try:
        run.name = task.run_name  # unique within its results root (see _unique_run_names)
        artefacts = _stage_artefacts(run, Path(staging)) if staging is not None else []
    except Exception as exc:  # a renderer bug must not stop the import
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        outcome.problems.append(
            _problem("import.crashed", f"processing failed: {type(exc).__name__}: {exc}", "error")
        )
        return _Processed(outcome, None, [])
    outcome.status = run.status
    outcome.dialect = run.dialect
    outcome.computing_system = run.computing_system
    outcome.batch_size = run.batch_size
    outcome.run_index = run.run_index
    outcome.epochs = len(run.epochs)
    outcome.steps = run.steps_total
    outcome.timings_fingerprint = _timings_fingerprint(run)
    outcome.problems.extend(p.to_dict() for p in run.problems)
    if run.steps_total == 0 and not _is_mlperf(run) and not any(p.severity == "error" for p in run.problems):
        outcome.problems.append(
            _problem("import.no_steps", "the log contains no training step times", "error")
        )
    return _Processed(outcome, run, artefacts)


def _name_to_read(task: _Task) -> str:
    """The name the parser reads the cell from: a plain file's path (so that it also sees the folder;
    old EC2 logs are named by GPU count only), an archive member's own name; without the setting a
    file name carries."""
    name = task.path if task.member is None else PurePosixPath(task.member).name
    if task.file_name is None:
        return name
    return str(PurePosixPath(name).with_name(task.file_name)) if task.member is None else task.file_name


def _set_named_axes(run: RunTimings, task: _Task) -> None:
    """The setting the log's folders or name carry becomes the run's, unless its log says one; a log
    that says another value than its name is flagged (the log's word is kept)."""
    if not task.setting:
        return
    named = dict(task.setting)
    said = run.extra.get(axes.LOG_KEY)
    if not isinstance(said, dict):
        run.extra[axes.LOG_KEY] = named
        return
    differ = {k: v for k, v in named.items() if k in said and axes.text(said[k]) != axes.text(v)}
    if differ:
        run.add_problem(
            "axes-contradict-name",
            f"the log says {axes.label({k: said[k] for k in differ})}, its name "
            f"{axes.label(differ)}: the log's setting is kept",
        )
    run.extra[axes.LOG_KEY] = {**named, **said}


def _is_mlperf(run: RunTimings) -> bool:
    """An MLPerf result log: timed by blocks and its time to train, not by steps."""
    from trainsweep.logs import mllog

    return mllog.MLPERF in run.extra


def _problem(code: str, message: str, severity: str = "warning") -> dict[str, Any]:
    """An import-level problem: about the whole file, so it has no line."""
    return {"code": code, "message": message, "line": None, "severity": severity}


class _Workers:
    """An optional process pool. Jobs run in this process when the pool is off or breaks."""

    def __init__(self, workers: int, jobs: int, *, preload: tuple[str, ...] = ()):
        self.pool: ProcessPoolExecutor | None = None
        if workers > 1 and jobs >= POOL_MIN_FILES:
            import multiprocessing

            # Load the parser, matplotlib (and the report's pandas) once here, so that forked workers
            # start with them instead of each importing them. fork (not spawn) also works when the
            # caller's script has no ``if __name__ == "__main__"`` guard; the CLI's progress display
            # runs no thread while the workers are forked (auto_refresh=False).
            import trainsweep.artefacts
            import trainsweep.logs
            import trainsweep.plots.run  # noqa: F401

            for module in preload:
                with suppress(ImportError):  # raised again where it is used (_sweep_artefacts_job)
                    importlib.import_module(module)

            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self.pool = ProcessPoolExecutor(workers, mp_context=context)

    def run(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(item))`` for every item, in completion order."""
        done: set[int] = set()
        if self.pool is not None:
            try:
                futures = {self.pool.submit(fn, item): i for i, item in enumerate(items)}
                for future in as_completed(futures):
                    i = futures[future]
                    try:
                        result = future.result()
                    except BrokenProcessPool:
                        raise
                    except Exception:  # e.g. a result that would not pickle: redone in this process below
                        continue
                    done.add(i)
                    yield i, result
            except BrokenProcessPool:  # a worker died (e.g. out of memory): go on in this process
                self.close()
        for i, item in enumerate(items):
            if i not in done:
                yield i, fn(item)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def _run_files(
    workers: _Workers, tasks: list[_Task], staging: Path, progress: Progress | None
) -> list[_Processed]:
    results: dict[int, _Processed] = {}
    jobs = [(t, str(staging / str(i))) for i, t in enumerate(tasks)]
    for i, processed in workers.run(_process, jobs):
        results[i] = processed
        if progress is not None:
            progress(len(results), len(tasks), tasks[i].relative)
    return [results[i] for i in range(len(tasks))]


# ---- cross-file checks and writing -------------------------------------------------------------------


def _contradicts_its_name(o: FileOutcome) -> bool:
    return any(p["code"] == "header-contradicts-name" for p in o.problems)


def _keep(same: list[FileOutcome]) -> FileOutcome:
    """The copy kept as the run: the first (in path order) whose header does not contradict its name."""
    return next((o for o in same if not _contradicts_its_name(o)), same[0])


def _flag_copies(same: list[FileOutcome], kept: FileOutcome, code: str, what: str) -> None:
    """Say in each copy which one is kept as the run and why; the others are left out of the sweep."""
    others = [o for o in same if o is not kept]
    if _contradicts_its_name(kept):
        why = "every copy's header contradicts its name: the first in path order is kept"
    elif any(_contradicts_its_name(o) for o in others):
        why = "its header agrees with its name, the others' do not"
    else:
        why = "nothing in the log tells the names apart: the first in path order is kept"
    names = ", ".join(o.path for o in others)
    kept.problems.append(_problem(code, f"{what} {names}: kept as the run ({why}); the copies are left out"))
    for o in others:
        o.problems.append(
            _problem(code, f"{what} {kept.path}, which is kept as the run ({why}): this copy is left out")
        )


def _cross_file_checks(outcomes: list[FileOutcome]) -> list[dict[str, Any]]:
    duplicates: list[dict[str, Any]] = []
    by_sha: dict[str, list[FileOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.sha256 is not None and o.size > 0:
            by_sha[o.sha256].append(o)
    for sha, same in by_sha.items():
        if len(same) < 2:
            continue
        kept = _keep(same)
        duplicates.append(
            {"kind": "identical_bytes", "sha256": sha, "paths": [o.path for o in same], "kept": kept.path}
        )
        _flag_copies(same, kept, "import.duplicate_log", "byte-identical to")
    by_timings: dict[str, list[FileOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.timings_fingerprint is not None:
            by_timings[o.timings_fingerprint].append(o)
    for same in by_timings.values():
        if len({o.sha256 for o in same}) < 2:
            continue  # only byte-identical copies, reported above
        kept = _keep(same)
        duplicates.append({"kind": "identical_timings", "paths": [o.path for o in same], "kept": kept.path})
        _flag_copies(
            same,
            kept,
            "import.duplicate_content",
            "the same step, validation and epoch times (different bytes: a copy, not a repetition) as",
        )
    return duplicates


def _merge_rank_files(
    processed: list[_Processed], staging: Path, skipped: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """Make one run of the per-rank log files of each run (the rule: :mod:`trainsweep.logs.ranks`).

    The merged run takes the place of its primary rank file's run (its artefacts replace that file's);
    the other rank files keep their outcome, with ``rank`` and the merged run's name, and no run of their
    own. When the folder holds nothing but this run's rank files (``c4x/`` of seed 002), it is a run's
    folder, not an experiment's: the run goes to the results root above it, beside its siblings. Returns
    ``quality.json``'s ``rank_runs``: per merged run its name, results root, rank files and problems. A
    file named like the ranks that was skipped (no training content, e.g. empty) is one of those problems.
    """
    from trainsweep.logs.ranks import rank_key

    by_folder: dict[str, list[_Processed]] = defaultdict(list)
    for p in processed:
        by_folder[str(PurePosixPath(p.outcome.path).parent)].append(p)
    skipped_by: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for sk in skipped:
        where = (str(PurePosixPath(sk["path"]).parent), rank_key(sk["path"]))
        skipped_by[where].append((sk["path"], f"skipped: {sk['reason']}"))
    merged_runs: list[dict[str, Any]] = []
    for folder, here in sorted(by_folder.items()):
        groups: dict[str, list[_Processed]] = defaultdict(list)
        for p in here:
            groups[rank_key(p.outcome.path)].append(p)
        for key, group in sorted(groups.items()):
            entry = _merge_group(
                folder,
                key,
                group,
                skipped_by.get((folder, key), []),
                whole_folder=len(group) == len(here),
                staging=staging / f"ranks-{len(merged_runs)}",
            )
            if entry is not None:
                merged_runs.append(entry)
    return merged_runs


def _merge_group(
    folder: str,
    key: str,
    group: list[_Processed],
    skipped: list[tuple[str, str]],
    *,
    whole_folder: bool,
    staging: Path,
) -> dict[str, Any] | None:
    """Merge one group of same-named files of a folder when they are ranks of one run; else None."""
    from trainsweep.logs.ranks import merge_ranks, only_rank

    ranked = [(only_rank(p.run), p) for p in group if p.run is not None and p.outcome.status != "error"]
    members = [(rank, p) for rank, p in ranked if rank is not None]
    ranks = [rank for rank, _ in members]
    if len(members) < 2 or len(set(ranks)) == 1 or len({p.run.dialect for _, p in members if p.run}) > 1:
        return None  # one file, or repetitions of one rank (result_0 .. result_9), or different tools
    if len(set(ranks)) < len(ranks):
        shown = ", ".join(str(r) for r in sorted(ranks))
        for _, p in members:
            p.outcome.problems.append(
                _problem(
                    "import.ranks_ambiguous",
                    f"{len(members)} files named like the ranks of one run hold the ranks {shown}: some rank "
                    "more than once, so they cannot be told apart; each is kept as a run of its own",
                )
            )
        return None
    # A file named like the ranks that gave no timings at all is a broken rank file; one with timings of
    # several ranks is a run of its own.
    left_out = [p for p in group if p.run is None or p.outcome.status == "error" or p.run.steps_total == 0]
    results_root = members[0][1].outcome.results_root
    moved_up = whole_folder and folder not in ("", ".") and results_root == folder
    stem = key.strip("-_. ")
    if moved_up:
        parent = PurePosixPath(folder).parent
        results_root = "" if str(parent) == "." else str(parent)
        name = f"{PurePosixPath(folder).name}-{stem}" if stem else PurePosixPath(folder).name
    else:
        name = stem or "ranks"
    why = [(p.outcome.path, _left_out_reason(p)) for p in left_out] + skipped
    run = merge_ranks([(rank, p.outcome.path, p.run) for rank, p in members if p.run], name, why)
    primary = min(members, key=lambda m: (m[0] != 0, m[0]))[1]
    try:
        artefacts = _stage_artefacts(run, staging)
    except Exception as exc:  # a renderer bug: the rank files stay runs of their own
        primary.outcome.problems.append(
            _problem("import.crashed", f"merging the rank files failed: {type(exc).__name__}: {exc}", "error")
        )
        return None
    for rank, p in members:
        p.outcome.results_root, p.outcome.run_name, p.outcome.rank = results_root, name, rank
        if p is not primary:
            p.run, p.artefacts = None, []
    primary.run, primary.artefacts = run, artefacts
    gaps = [pr.message for pr in run.problems if pr.code in ("rank-missing", "rank-file-left-out")]
    for message in gaps:
        primary.outcome.problems.append(_problem("import.rank_incomplete", f"run {name}: {message}"))
    for p in left_out:
        p.outcome.results_root = results_root
        p.outcome.problems.append(
            _problem(
                "import.rank_file_left_out",
                f"named like the rank files of run {name} but gave no rank timings: "
                "the run is made from the other ranks",
                "error",
            )
        )
    return {
        "run": name,
        "results_root": results_root,
        "files": {str(rank): p.outcome.path for rank, p in sorted(members, key=lambda m: m[0])},
        "left_out": [path for path, _ in why],
        "problems": gaps,
    }


def _left_out_reason(p: _Processed) -> str:
    errors = [pr["message"] for pr in p.outcome.problems if pr.get("severity") == "error"]
    return errors[0] if errors else "no step times"


def _summary(outcomes: list[FileOutcome], skipped: list[dict[str, str]], duplicates: list) -> dict[str, Any]:
    statuses: dict[str, int] = defaultdict(int)
    codes: dict[str, int] = defaultdict(int)
    errors = warnings = 0
    for o in outcomes:
        statuses[o.status] += 1
        for p in o.problems:
            codes[p["code"]] += 1
            if p.get("severity") == "error":
                errors += 1
            else:
                warnings += 1
    return {
        "files": len(outcomes),
        "runs_parsed": sum(1 for o in outcomes if o.status != "error"),
        "by_status": dict(sorted(statuses.items())),
        "files_with_problems": sum(1 for o in outcomes if o.problems),
        "problems": errors + warnings,
        "errors": errors,
        "warnings": warnings,
        "by_code": dict(sorted(codes.items())),
        "duplicate_groups": len(duplicates),
        "skipped": len(skipped),
    }


def _write(out: Path, relative: str, data: bytes) -> None:
    target = out / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _join(root: str, relative: str) -> str:
    return f"{root}/{relative}" if root else relative


def _source_folder(src: str | os.PathLike[str]) -> Path:
    """``src`` as a Path; ImportSourceError when it does not exist or is not a folder."""
    src_path = Path(src)
    if not src_path.is_dir():
        what = "does not exist" if not src_path.exists() else "is not a folder"
        raise ImportSourceError(f"{src_path} {what}: give the folder that holds the logs")
    return src_path


def _worker_count(workers: int | None) -> int:
    """``workers`` (at least 1), by default the CPUs this process may run on."""
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, workers)


def import_dir(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    workers: int | None = None,
    report: bool = True,
    follow_symlinks: bool = False,
) -> ImportResult:
    """Analyse every training log below ``src`` and write the results layout below ``out``.

    Args:
        src: folder to walk (recursively; hidden folders and ``out`` itself are skipped).
        out: output folder (created); per results root ``execution-times/<VMTYPE>/<BS>/e<N>.*`` and
            ``runs/<name>.json``, the sweep artefacts when available, and ``quality.json`` at the top.
        progress: called after each log with (done, total, relative path).
        workers: parallel worker processes (default: the CPUs available; 1 = in this process).
        report: also write each results root's sweep artefacts (table, plots, ``report.html``).
        follow_symlinks: also read files that symbolic links below ``src`` lead to outside it (by
            default such links are listed as skipped, never read).

    Raises:
        ImportSourceError: ``src`` does not exist or is not a folder. Problems with single files never
            raise: they are reported in the result and in ``quality.json``.
    """
    src_path, out_path = _source_folder(src), Path(out)
    tasks, skipped, json_files = discover(src_path, exclude=out_path, follow_symlinks=follow_symlinks)
    from trainsweep.cost.records import read_records

    records = read_records(src_path, json_files)
    pool = _Workers(_worker_count(workers), len(tasks), preload=("trainsweep.report",) if report else ())
    try:
        return _import(tasks, skipped, out_path, pool, progress, report, records)
    finally:
        pool.close()


def read_dir(src: str | os.PathLike[str], *, workers: int | None = None) -> ImportResult:
    """Read the logs below ``src`` as :func:`import_dir` does (same walk, parser, copy checks and
    instance-type reading) without writing anything: ``files`` and ``runs`` as in an import, ``quality``
    holding the duplicates found, the files skipped and the logs whose instance type was not read.

    Raises:
        ImportSourceError: ``src`` does not exist or is not a folder.
    """
    src_path = _source_folder(src)
    tasks, skipped, _ = discover(src_path)
    pool = _Workers(_worker_count(workers), len(tasks))
    try:
        results: dict[int, _Processed] = dict(pool.run(_process, [(t, None) for t in tasks]))
    finally:
        pool.close()
    processed = [results[i] for i in range(len(tasks))]
    outcomes = [p.outcome for p in processed]
    runs = {p.outcome.path: p.run for p in processed if p.run is not None}
    duplicates = _cross_file_checks(outcomes)
    unread = _read_instance_types(outcomes, runs)
    quality = {"duplicates": duplicates, "skipped": skipped, "instance_type_unread": unread}
    return ImportResult(src_path, outcomes, skipped, quality, runs)


def _import(
    tasks: list[_Task],
    skipped: list[dict[str, str]],
    out_path: Path,
    pool: _Workers,
    progress: Progress | None,
    report: bool,
    records: Iterable[BillingRecord] = (),
) -> ImportResult:
    out_path.mkdir(parents=True, exist_ok=True)
    # Workers write each log's artefacts as they make them, into a staging folder on the same file
    # system; here they are moved into place in path order (the first log wins a collision).
    staging = Path(tempfile.mkdtemp(prefix=".trainsweep-import-", dir=out_path))
    try:
        processed = _run_files(pool, tasks, staging, progress)
        outcomes = [p.outcome for p in processed]
        duplicates = _cross_file_checks(outcomes)
        rank_runs = _merge_rank_files(processed, staging, skipped)
        runs: dict[str, RunTimings] = {}
        written: set[str] = set()
        for p in processed:
            o = p.outcome
            for relative, staged in p.artefacts:
                target = _join(o.results_root, relative)
                if target in written:
                    o.problems.append(
                        _problem(
                            "import.output_collision",
                            f"{target} was already written for another log of this import; not overwritten",
                        )
                    )
                    continue
                destination = out_path / target
                destination.parent.mkdir(parents=True, exist_ok=True)
                Path(staged).replace(destination)
                written.add(target)
                o.outputs.append(target)
            if p.run is not None:
                runs[o.path] = p.run
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    notes: list[str] = []
    unread = _read_instance_types(outcomes, runs)
    not_instance_types = _not_instance_types(outcomes, runs)
    jobs, billing = _billing_jobs(outcomes, runs, list(records))
    summary = _summary(outcomes, skipped, duplicates)
    summary["instance_type_unread"] = len(unread)
    if not_instance_types:
        summary["not_an_instance_type"] = len(not_instance_types)
    quality: dict[str, Any] = {
        "kind": QUALITY_KIND,
        "schema_version": QUALITY_SCHEMA_VERSION,
        "summary": summary,
        "files": [o.to_dict() for o in outcomes],
        "instance_type_unread": unread,
        **({"not_an_instance_type": not_instance_types} if not_instance_types else {}),
        "billing_records": billing,
        "duplicates": duplicates,
        "rank_runs": rank_runs,
        "skipped": skipped,
        "notes": notes,
    }
    if report:
        _write_sweep_artefacts(pool, out_path, outcomes, runs, quality, written, notes, jobs)
        _write_mlperf_reports(out_path, runs, written)
    else:
        notes.append("sweep artefacts (sweep.csv, sweep.json, report.html, plots) not requested")
    _write(out_path, layout.QUALITY_JSON, (json.dumps(quality, indent=1) + "\n").encode())
    return ImportResult(out_path, outcomes, skipped, quality, runs)


def _read_instance_types(outcomes: list[FileOutcome], runs: dict[str, RunTimings]) -> list[dict[str, Any]]:
    """Set each parsed log's instance type; return ``{path, spelling, reason}`` for every log whose
    instance type could not be read (``spelling``: what its name, folder or header said, None if nothing)."""
    from trainsweep import instances
    from trainsweep.cost.metrics import resolve_instance_type

    unread: list[dict[str, Any]] = []
    for o in outcomes:
        run = runs.get(o.path)
        if run is None:
            continue
        itype = resolve_instance_type(run)
        if itype in instances.CATALOGUE:
            o.instance_type = itype
            continue
        spelling = run.computing_system or run.header.instance_type
        if _is_mlperf(run):
            continue  # an MLPerf system is read, and is not an instance type: _not_instance_types
        if spelling:
            reason = f"{spelling!r} is a spelling no row of the spelling table reads (docs/log-formats.md)"
        else:
            reason = "neither the log's name, its folder nor its header says the instance type"
            o.problems.append(_problem("import.no_instance_type", f"{reason}: no GPU count, no price"))
        unread.append({"path": o.path, "spelling": spelling, "reason": reason})
    # The rank files of a merged run have no run of their own: they take the merged run's type.
    merged = {
        (o.results_root, o.run_name): o.instance_type
        for o in outcomes
        if o.rank is not None and o.path in runs
    }
    for o in outcomes:
        if o.rank is not None and o.path not in runs:
            o.instance_type = merged.get((o.results_root, o.run_name))
    return unread


def _not_instance_types(outcomes: list[FileOutcome], runs: dict[str, RunTimings]) -> list[dict[str, Any]]:
    """MLPerf runs on a system that is not a SageMaker type (the parser sets the type when the system's
    name is one): ``{path, system, reason}`` each, also said in the file's problems; never guessed."""
    from trainsweep.logs import mllog

    found: list[dict[str, Any]] = []
    for o in outcomes:
        run = runs.get(o.path)
        if run is None or not _is_mlperf(run) or o.instance_type is not None:
            continue
        system = run.extra[mllog.MLPERF].get("system") or {}
        name = system.get("system_name") or run.extra[mllog.MLPERF].get("system_folder")
        reason = (
            f"MLPerf system {name!r} is not a SageMaker instance type: compared by time to train only, "
            "no price"
            if name
            else "the MLPerf log and its folders name no system: compared by time to train only, no price"
        )
        o.problems.append(_problem("import.not_an_instance_type", reason))
        found.append({"path": o.path, "system": name, "reason": reason})
    return found


def _write_mlperf_reports(out: Path, runs: dict[str, RunTimings], written: set[str]) -> None:
    """Per benchmark of the MLPerf result logs, the systems compared (:mod:`trainsweep.report.mlperf`)."""
    mlperf = [run for run in runs.values() if _is_mlperf(run)]
    if not mlperf:
        return
    from trainsweep.report.mlperf import mlperf_artefacts

    for relative, data in mlperf_artefacts(mlperf).items():
        if relative not in written:
            _write(out, relative, data)
            written.add(relative)


def _billing_jobs(
    outcomes: list[FileOutcome], runs: dict[str, RunTimings], records: list[BillingRecord]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Match the DescribeTrainingJob dumps to the runs: ``({results root: job records}, quality entry)``."""
    from trainsweep.cost.records import RunKey, match_records

    keys = [
        RunKey(o.path, o.results_root, o.run_name, o.instance_type, o.batch_size, o.run_index)
        for o in outcomes
        if o.path in runs
    ]
    matched, unmatched = match_records(records, keys)
    jobs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in outcomes:
        rec = matched.get(o.path)
        if rec is not None:
            o.billing_record = rec.path
            jobs[o.results_root].append(rec.job(o.run_name))
    entry = {
        "found": len(records),
        "matched": [{"record": rec.path, "log": path} for path, rec in matched.items()],
        "unmatched": unmatched,
    }
    return jobs, entry


def _sweep_artefacts_job(
    job: tuple[list[RunTimings], dict[str, Any], list[dict[str, Any]]],
) -> dict[str, bytes] | str:
    """One results root's sweep artefacts and its Parquet tables (runs in a worker); a string says why
    there are none."""
    from trainsweep.report import sweep_artefacts
    from trainsweep.tables import parquet_artefacts

    runs, quality, jobs = job
    try:
        artefacts = dict(sweep_artefacts(runs, quality=quality, jobs=jobs or None))
        return artefacts | parquet_artefacts(artefacts.get(layout.SWEEP_CSV), runs)
    except Exception as exc:  # the per-run results stand even if the sweep report fails
        return f"{type(exc).__name__}: {exc}"


def _write_sweep_artefacts(
    pool: _Workers,
    out: Path,
    outcomes: list[FileOutcome],
    runs: dict[str, RunTimings],
    quality: dict[str, Any],
    written: set[str],
    notes: list[str],
    billing: dict[str, list[dict[str, Any]]],
) -> None:
    """Per results root: the analysis engineer's sweep table, plots and report, when available; the
    billing records matched to its runs also go to its ``jobs.json`` (``trainsweep report`` reads them)."""
    members: dict[str, list[FileOutcome]] = defaultdict(list)
    for o in outcomes:
        members[o.results_root].append(o)
    roots: list[str] = []
    jobs: list[tuple[list[RunTimings], dict[str, Any], list[dict[str, Any]]]] = []
    # Largest results roots first, so that the pool does not end waiting on one big experiment.
    for root, group in sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        group_runs = [runs[o.path] for o in group if o.path in runs and runs[o.path].steps_total > 0]
        if group_runs:
            roots.append(root)
            jobs.append(
                (group_runs, dict(quality, files=[o.to_dict() for o in group]), billing.get(root, []))
            )
            if billing.get(root):
                target = _join(root, layout.JOBS_JSON)
                cells = {"cells": billing[root], "source": "DescribeTrainingJob dumps found beside the logs"}
                _write(out, target, (json.dumps(cells, indent=1) + "\n").encode())
                written.add(target)
    failures: dict[str, str] = {}
    for i, result in pool.run(_sweep_artefacts_job, jobs):
        if isinstance(result, str):
            failures[roots[i]] = result
        else:
            for relative, data in sorted(result.items()):
                target = _join(roots[i], relative)
                if target == layout.QUALITY_JSON or target in written:
                    continue
                _write(out, target, data)
                written.add(target)
    for root in sorted(failures):
        notes.append(f"sweep artefacts for {root or '.'} failed: {failures[root]}")


def iter_problem_rows(result: ImportResult) -> Iterable[tuple[str, str, str, str]]:
    """(path, severity, code, message) for every problem of an import, in file order."""
    for o in result.files:
        for p in o.problems:
            line = f" (line {p['line']})" if p.get("line") else ""
            yield o.path, str(p.get("severity", "warning")), str(p["code"]), f"{p['message']}{line}"
