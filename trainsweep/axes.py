"""Script settings swept like the batch size: the spec's ``axes``, their combinations, their names.

``axes: {dtype: [float32, bfloat16], compile: [false, true]}`` maps a hyperparameter (or a ``{placeholder}``
of ``workload.command``) to the values to try; the grid is their product with the instance types, batch
sizes and node counts. Each combination of values is a *setting*: a ``{name: value}`` mapping that the job
record carries per cell, the job gives the script, and the run record and ``sweep.csv`` report.

This module is pure: it checks the values, forms the combinations and the short name part (*token*) a run
name carries for a setting.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence

AxisValue = str | int | float | bool
Setting = dict[str, AxisValue]

MAX_CELLS = 10_000
"""The largest grid (instance types × node counts × batch sizes × settings) a spec may ask for."""
TOKEN_MAX = 24
"""The longest setting token a run name carries; a longer one (or two that would read alike) is a hash."""
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
"""An axis name: also a placeholder, an argument name and a ``sweep.csv`` column."""
_VALUE_TEXT = re.compile(r"^[A-Za-z0-9-]{1,64}$")

LOG_KEY = "trainsweep.axes"
"""The MLLOG key (and ``run.extra`` key of the run record) of a run's setting, as the job gave it."""
PRECISION_KEY = "trainsweep.precision"
"""The MLLOG key (and ``run.extra`` key) of the numeric precision a run really trained in: a built-in's
checked output, an instrumented script's seen forward passes (:mod:`trainsweep.instrument.usage`)."""
COMPILED_KEY = "trainsweep.compiled"
"""The MLLOG key (and ``run.extra`` key) of whether an instrumented script called ``torch.compile``."""


def text(value: AxisValue) -> str:
    """A value as the script and names get it: ``true``/``false`` for booleans, else ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kind(value: AxisValue) -> str:
    return "boolean" if isinstance(value, bool) else type(value).__name__.replace("str", "text")


def values_problem(values: Sequence[AxisValue]) -> str | None:
    """What is wrong with an axis's list of values (None: nothing)."""
    if not values:
        return "an axis needs at least one value"
    kinds = {_kind(v) for v in values}
    if len(kinds) > 1:
        return f"values of one type only, got {' and '.join(sorted(kinds))}: {list(values)!r}"
    seen: set[str] = set()
    for v in values:
        t = text(v)
        if not _VALUE_TEXT.match(t):
            return (
                f"{t!r} cannot be carried in a job name (letters, digits and '-', at most 64): "
                "sweep values such as 1e-3 or 3e-4, or name them (lr-small)"
            )
        if t.lower() in seen:
            return f"{t!r} is listed twice"
        seen.add(t.lower())
    return None


def cell_count(axes: Mapping[str, Sequence[AxisValue]]) -> int:
    """How many settings the axes make (1 without axes)."""
    n = 1
    for values in axes.values():
        n *= len(values)
    return n


def settings(axes: Mapping[str, Sequence[AxisValue]] | None) -> list[Setting]:
    """Every combination of the axes' values, the first axis varying slowest; ``[{}]`` without axes."""
    if not axes:
        return [{}]
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes.values())]


def _hashed(setting: Setting) -> str:
    return "s" + hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:8]


def tokens(all_settings: Sequence[Setting]) -> list[str]:
    """The name part of each setting (``bfloat16-true``), lower-case; ``""`` for the empty setting.

    When one is longer than :data:`TOKEN_MAX` or two read alike (``a-b`` + ``c`` and ``a`` + ``b-c``),
    every setting gets a hash of itself instead, so names stay short and unique.
    """
    plain = ["-".join(text(v) for v in s.values()).lower() for s in all_settings]
    if all(len(t) <= TOKEN_MAX for t in plain) and len(set(plain)) == len(plain):
        return plain
    return [_hashed(s) if s else "" for s in all_settings]


def label(setting: Mapping[str, AxisValue]) -> str:
    """``dtype=bfloat16 compile=true`` (``""`` for the empty setting): how tables show a setting."""
    return " ".join(f"{k}={text(v)}" for k, v in setting.items())


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def folder_parts(said: object) -> list[tuple[str, str]]:
    """A setting as a log says it, as ``(name, value)`` pairs safe in a path (no ``/``, no ``..``: a log
    is input); ``[]`` when it is not a mapping."""
    if not isinstance(said, Mapping):
        return []

    def safe(x: object) -> str:
        return _UNSAFE.sub("_", text(x) if isinstance(x, AxisValue) else str(x))[:64] or "_"

    return [(safe(k), safe(v)) for k, v in list(said.items())[:16]]


def names_of(records: Sequence[Mapping[str, AxisValue] | None]) -> list[str]:
    """The axis names of some settings, in first-seen order."""
    out: dict[str, None] = {}
    for r in records:
        out.update(dict.fromkeys(r or {}))
    return list(out)


_NAMED_PAIR = re.compile(r"^([A-Za-z][A-Za-z0-9_-]{0,63})=([A-Za-z0-9-]{1,64})$")


def typed(said: str) -> AxisValue:
    """A value as a name spells it, typed as a spec would give it: ``true``/``false`` a boolean, a whole
    number an int, anything else the text."""
    low = said.lower()
    if low in ("true", "false"):
        return low == "true"
    if re.fullmatch(r"-?[0-9]+", said):
        return int(said)
    return said


def named_pairs(part: str) -> Setting | None:
    """``dtype=bfloat16`` or ``dtype=bfloat16,compile=true`` (a folder or file name, or its part after a
    comma) as a setting; None when ``part`` is not made of such pairs only."""
    out: Setting = {}
    for piece in part.split(","):
        m = _NAMED_PAIR.match(piece)
        if m is None:
            return None
        out[m.group(1)] = typed(m.group(2))
    return out


def from_path(folders: Sequence[str], file_stem: str) -> tuple[Setting, str]:
    """The setting a log's folders and file name carry, and the file stem without it.

    A folder named ``dtype=bfloat16`` (or ``dtype=bfloat16,compile=true``) sets those axes for the logs
    below it; a file named ``result-p3-1-64-e0,dtype=bfloat16.txt`` for itself (the stem is then
    ``result-p3-1-64-e0``). A deeper folder, then the file name, wins over a folder above it.
    """
    setting: Setting = {}
    for folder in folders:
        setting.update(named_pairs(folder) or {})
    head, _, tail = file_stem.partition(",")
    said = named_pairs(tail) if tail else None
    if said is None:
        return setting, file_stem
    setting.update(said)
    return setting, head


def name_suffix(setting: Mapping[str, AxisValue]) -> str:
    """``,dtype=bfloat16,compile=true``: what an imported run's name carries of its setting (``""``)."""
    return "".join(f",{k}={text(v)}" for k, v in setting.items())
