"""A script's source dir: found from the spec, packed once into ``sourcedir.tar.gz``, requirements checked.

``trainsweep run`` packs the folder (what ``.gitignore`` files and the spec's ``exclude`` leave in), names the
archive by its content hash and uploads it under the sweep's prefix, where every job of the sweep fetches
it. The archive is deterministic (sorted members, no times, no owners), so the same tree gives the same
bytes and the same key. Local mode runs scripts in this Python environment: :func:`missing_requirements`
names what it lacks before any job starts.

Pure: no AWS call (the upload is the caller's).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainsweep.errors import TrainsweepError

SIZE_LIMIT_BYTES = 100 * 1024 * 1024
DEFAULT_REQUIREMENTS = "requirements.txt"
# Never worth shipping: version control, caches, virtual environments, trainsweep's own results.
DEFAULT_EXCLUDE = (
    ".git/",
    ".hg/",
    ".svn/",
    "__pycache__/",
    "*.pyc",
    ".venv/",
    "venv/",
    ".ipynb_checkpoints/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    "trainsweep-results/",
)


class SourceError(TrainsweepError):
    """The script or its source dir cannot be used; the message says which file and what to do."""


@dataclass(frozen=True)
class LocalSource:
    """A script workload resolved on this machine."""

    root: Path  # the source dir
    entry_point: str  # relative to root (a command's named script; "" when it names a module)
    requirements: str | None  # relative to root, None when there is none


@dataclass(frozen=True)
class PackedSource:
    """``sourcedir.tar.gz`` of a source dir."""

    data: bytes
    digest: str  # first 16 hex digits of the archive's SHA-256
    files: int
    unpacked_bytes: int


def is_remote(source_dir: str | None) -> bool:
    return bool(source_dir) and str(source_dir).startswith("s3://")


def spec_dir(spec_source: Any) -> Path:
    """The folder a spec's relative paths start from: the spec file's, else (spec text) the current one."""
    if isinstance(spec_source, Path) or (isinstance(spec_source, str) and "\n" not in spec_source):
        return Path(spec_source).resolve().parent
    return Path.cwd()


def split_entry(entry_point: str, source_dir: str | None) -> tuple[str, str]:
    """(source dir, entry point inside it): without ``source_dir`` the entry point's folder is the source."""
    if source_dir is not None:
        return source_dir, entry_point
    entry = Path(entry_point)
    return (entry.parent.as_posix() or "."), entry.name


def resolve(
    entry_point: str, source_dir: str | None, requirements: str | None, spec_dir: Path
) -> LocalSource:
    """Find the script and its folder below ``spec_dir`` (the spec file's folder) and check they exist.

    Raises:
        SourceError: the source dir, the entry point or a named requirements file does not exist.
    """
    source, entry = split_entry(entry_point, source_dir)
    root = (spec_dir / source).resolve()
    if not root.is_dir():
        raise SourceError(
            f"workload.source_dir: {root} is not a folder (paths are relative to the spec file)"
        )
    script = root / entry
    if not script.is_file():
        where = f"in source_dir {root}" if source_dir is not None else "(relative to the spec file)"
        raise SourceError(f"workload.entry_point: {entry_point!r} not found {where}: {script} does not exist")
    try:
        script.relative_to(root)
    except ValueError:
        raise SourceError(f"workload.entry_point: {entry_point!r} lies outside source_dir {root}") from None
    return LocalSource(root, Path(entry).as_posix(), _requirements(root, requirements))


def _requirements(root: Path, requirements: str | None) -> str | None:
    if requirements is not None:
        if not (root / requirements).is_file():
            raise SourceError(f"workload.requirements: {root / requirements} does not exist")
        return requirements
    return DEFAULT_REQUIREMENTS if (root / DEFAULT_REQUIREMENTS).is_file() else None


def resolve_command(
    words: list[str], source_dir: str | None, requirements: str | None, spec_dir: Path
) -> LocalSource:
    """The source dir of a command (default: the spec file's folder) with the script the command names
    checked in it (a module, or a script given by an absolute path, is the image's business).

    Raises:
        SourceError: the source dir, the named script or a named requirements file does not exist.
    """
    from trainsweep.training.command import named_target

    root = (spec_dir / (source_dir or ".")).resolve()
    if not root.is_dir():
        raise SourceError(
            f"workload.source_dir: {root} is not a folder (paths are relative to the spec file)"
        )
    target = named_target(words)
    script = ""
    if target is not None and target.kind == "script" and not Path(target.name).is_absolute():
        path = (root / target.name).resolve()
        if not path.is_file() or not path.is_relative_to(root):
            shipped = sorted(p.relative_to(root).as_posix() for p in root.glob("*.py"))[:10]
            raise SourceError(
                f"workload.command: names the script {target.name!r}, which is not in the source dir {root} "
                f"(the command runs from there; it holds {', '.join(shipped) or 'no .py file'} at its top)"
            )
        script = Path(target.name).as_posix()
    return LocalSource(root, script, _requirements(root, requirements))


def local_source(workload: Any, spec_dir: Path) -> LocalSource:
    """The checked local source of a spec's own code (command or entry point)."""
    if workload.command is not None:
        return resolve_command(workload.command_words, workload.source_dir, workload.requirements, spec_dir)
    return resolve(workload.entry_point, workload.source_dir, workload.requirements, spec_dir)


def _ignore_specs(root: Path, extra: list[str]) -> list[tuple[Path, object]]:
    """(folder, pathspec) for the defaults + ``extra`` at the root and every ``.gitignore`` in the tree."""
    import pathspec

    specs: list[tuple[Path, object]] = [(root, pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDE, *extra]))]
    for gitignore in sorted(root.rglob(".gitignore")):
        try:
            lines = gitignore.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        specs.append((gitignore.parent, pathspec.GitIgnoreSpec.from_lines(lines)))
    return specs


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, object]]) -> bool:
    for folder, spec in specs:
        try:
            rel = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        if spec.match_file(rel + "/" if is_dir else rel):  # type: ignore[attr-defined]
            return True
    return False


def _walk(root: Path, exclude: list[str] | None) -> tuple[list[Path], list[Path]]:
    """The files to pack and the links to folders inside the tree to keep as links, both sorted; ignored
    folders are not descended into.

    A link to a folder is never descended into: a link back up the tree (``pkg/self -> ..``) would
    otherwise pack the same files again at every depth until the system's link limit. Links out of the
    tree are left out.
    """
    specs = _ignore_specs(root, list(exclude or []))
    files: list[Path] = []
    links: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for child in sorted(folder.iterdir()):
            if child.is_symlink():
                target = child.resolve()
                if not target.is_relative_to(root):
                    continue  # a link out of the tree would ship files the user did not mean to
                if target.is_dir():
                    if not _ignored(child, True, specs):
                        links.append(child)
                    continue
            if child.is_dir():
                if not _ignored(child, True, specs):
                    stack.append(child)
            elif child.is_file() and not _ignored(child, False, specs):
                files.append(child)
    return sorted(files), sorted(links)


def _too_big(root: Path, files: list[Path], total: int, limit: int) -> SourceError:
    by_top: dict[str, int] = {}
    for f in files:
        top = f.relative_to(root).parts[0]
        by_top[top] = by_top.get(top, 0) + f.stat().st_size
    biggest = sorted(by_top.items(), key=lambda kv: -kv[1])[:3]
    listed = ", ".join(f"{name} ({size / 2**20:.1f} MB)" for name, size in biggest)
    return SourceError(
        f"source dir {root} holds {total / 2**20:.1f} MB to pack, over the {limit / 2**20:.0f} MB limit "
        f"(largest: {listed}); leave data and checkpoints out with a .gitignore or workload.exclude, "
        "and give data with the spec's data: field"
    )


def pack(root: Path, exclude: list[str] | None = None, *, limit: int = SIZE_LIMIT_BYTES) -> PackedSource:
    """Pack ``root`` into a deterministic ``tar.gz``.

    Raises:
        SourceError: more than ``limit`` bytes would be packed (checked before reading any file).
    """
    files, links = _walk(root, exclude)
    stats = [f.stat() for f in files]
    total = sum(st.st_size for st in stats)
    if total > limit:
        raise _too_big(root, files, total, limit)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f, st in zip(files, stats, strict=True):
            info = tarfile.TarInfo(f.relative_to(root).as_posix())
            info.size = st.st_size
            info.mode = 0o755 if st.st_mode & 0o111 else 0o644
            info.mtime = 0
            try:
                with f.open("rb") as fh:
                    tar.addfile(info, fh)
            except OSError as e:  # shrank (or vanished) after it was measured
                raise SourceError(f"{f} changed while it was packed ({e}): run again once it is still") from e
        for link in links:
            info = tarfile.TarInfo(link.relative_to(root).as_posix())
            info.type = tarfile.SYMTYPE
            info.linkname = os.path.relpath(link.resolve(), link.parent)  # relative: stays in the tree
            info.mode = 0o777
            info.mtime = 0
            tar.addfile(info)
    data = gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)
    return PackedSource(data, hashlib.sha256(data).hexdigest()[:16], len(files), total)


def unpack(data: bytes, dest: Path) -> None:
    """Extract an archive made by :func:`pack` (or by the SageMaker SDK) into ``dest``; members that would
    land outside ``dest`` (absolute paths, ``..``, links out) are refused by tarfile's ``data`` filter."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        tar.extractall(dest, filter="data")


def missing_requirements(path: Path) -> list[str]:
    """What this Python environment lacks of a requirements file: ``name (wants SPEC, has VERSION)``.

    Lines pip reads but that name no installable version here (options, URLs, editable installs) are
    skipped; ``-r other.txt`` is followed.
    """
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    missing: list[str] = []
    for line in _requirement_lines(path, set()):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            wants = f", wants {req.specifier}" if req.specifier else ""
            missing.append(f"{req.name} (not installed{wants})")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(f"{req.name} (wants {req.specifier}, has {have})")
    return missing


def _requirement_lines(path: Path, seen: set[Path]) -> list[str]:
    path = path.resolve()
    if path in seen:
        return []
    seen.add(path)
    out: list[str] = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            out += _requirement_lines(path.parent / line.split(None, 1)[1].strip(), seen)
            continue
        if line.startswith("-"):
            continue
        out.append(line)
    return out


@dataclass(frozen=True)
class StagedSource:
    """A script's source dir resolved, packed and (for local mode) checked: ready to upload."""

    local: LocalSource
    packed: PackedSource


def stage(workload: Any, spec_dir: Path, *, check_requirements: bool) -> StagedSource | None:
    """Resolve and pack a spec's script before anything starts; None when there is nothing to pack
    (a built-in, an image, or a source dir that already is an ``s3://`` archive).

    Raises:
        SourceError: a missing script or folder, a source dir over the limit, or (``check_requirements``,
            local mode) requirements this Python environment lacks.
    """
    if not workload.runs_code or is_remote(workload.source_dir):
        return None
    local = local_source(workload, spec_dir)
    packed = pack(local.root, list(workload.exclude))
    if check_requirements and local.requirements is not None:
        missing = missing_requirements(local.root / local.requirements)
        if missing:
            raise SourceError(
                f"local mode runs the script in this Python environment ({sys.executable}), which lacks "
                f"what {local.root / local.requirements} asks for: {'; '.join(missing)}. "
                f"Install them (pip install -r {local.root / local.requirements}) and run again"
            )
    return StagedSource(local, packed)


def spec_with_source(spec: dict[str, Any], staged: StagedSource, uri: str) -> dict[str, Any]:
    """The spec as the sweep runs it: ``workload.source_dir`` is the uploaded archive, the entry point and
    requirements are paths inside it."""
    out = {**spec, "workload": dict(spec["workload"])}
    out["workload"].update(source_dir=uri, requirements=staged.local.requirements)
    if out["workload"].get("entry_point") is not None:
        out["workload"]["entry_point"] = staged.local.entry_point
    return out
