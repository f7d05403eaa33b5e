"""The optional C hot loops (``_scan.c``): the cloud-ML reader's scanner and the JSON writer's layout.

It is built at install time where a C compiler is there; without one, or with the environment variable
``TRAINSWEEP_PURE_PYTHON=1``, the reader uses its Python path, which gives the same results (tested) at
about half the speed.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable, Iterator
from typing import Any

PURE_PYTHON_ENV = "TRAINSWEEP_PURE_PYTHON"

ScanStretch = Callable[[bytes, int, int, float], "tuple[bytes, bytes | None, int, bytes] | None"]
ScanStretches = Callable[
    [bytes, list[int], float, bytes], "list[tuple[bytes, bytes | None, int, bytes] | bool | None]"
]
RareLines = Callable[[bytes, tuple[bytes, ...]], list[int]]
JsonLayout = Callable[[bytes, int, int, bytes], "str | None"]
PlainMapping = Callable[[dict, int, type, dict], "tuple[dict[str, Any], int] | None"]


def _load() -> Any:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    if array("d").itemsize != 8 or array("l").itemsize != 8:
        return None  # the C code hands back 8-byte doubles and 64-bit step numbers
    try:
        from trainsweep.logs import _scan  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _scan


_module = _load()
scan_stretch: ScanStretch | None = _module.scan_stretch if _module is not None else None
"""``scan_stretch(region, start, end, max_duration)``: see ``_scan.c``; None when not built or turned off."""
scan_stretches: ScanStretches | None = _module.scan_stretches if _module is not None else None
"""``scan_stretches(region, cuts, max_duration, avoid)``: :data:`scan_stretch` of ``region[cuts[0]:cuts[1]]``,
``region[cuts[2]:cuts[3]]``, ... in one call; for each stretch None when it is shorter than 12 bytes or
holds no step and no stamp, False when the Python path must read it (or it holds ``avoid``, when that is
not empty). None when not built or turned off."""
rare_lines: RareLines | None = _module.rare_lines if _module is not None else None
"""``rare_lines(region, starts)``: the offsets of the newlines of ``region`` followed by one of the bytes
of the tuple ``starts``; None when not built or turned off."""
find_all: Callable[[bytes, bytes], list[int]] | None = _module.find_all if _module is not None else None
"""``find_all(data, literal)``: where ``literal`` occurs in ``data``, in order, not overlapping; None when
not built or turned off."""
contains: Callable[[bytes, bytes], bool] | None = _module.contains if _module is not None else None
"""``contains(data, literal)``: ``literal in data``, by memmem; None when not built or turned off."""
count_newlines: Callable[[bytes], int] | None = _module.count_newlines if _module is not None else None
"""``count_newlines(data)``: ``data.count(b"\\n")``, sixteen bytes at a time; None when not built or
turned off."""
json_layout: JsonLayout | None = _module.json_layout if _module is not None else None
"""``json_layout(compact, indent, level, lead)``: orjson's compact text laid out as ``json.dumps(value,
indent=indent)`` at ``level`` (with a ``lead``, a list's items only, after it), or None where the two
could differ; see ``_scan.c`` and :mod:`trainsweep.jsonstream`. None when not built or turned off."""
plain_mapping: PlainMapping | None = _module.plain_mapping if _module is not None else None
"""``plain_mapping(item, limit, array_type, last_range)``: :func:`trainsweep.jsonstream._plain_mapping` for
the usual epoch entry (its arrays of 8-byte doubles or longs and its ranges as lists, its scalars as they
are), or None where that function must decide; see ``_scan.c``. None when not built or turned off."""


def has(region: bytes, literal: bytes) -> bool:
    """``literal in region``, in C where it is built."""
    found = contains
    return found(region, literal) if found is not None else literal in region


def finditer_at(pattern: re.Pattern[bytes], region: bytes, literal: bytes) -> Iterator[re.Match[bytes]]:
    """``pattern.finditer(region)`` for a pattern whose every match begins with ``literal``: tried only
    where :data:`find_all` (C) finds the literal, and not inside a match already found, as finditer does.
    The regex engine's own search where the C code is not built."""
    find = find_all
    if find is None:
        return pattern.finditer(region)
    return _matches_at(pattern.match, region, find(region, literal))


def _matches_at(
    match: Callable[[bytes, int], re.Match[bytes] | None], region: bytes, hits: list[int]
) -> Iterator[re.Match[bytes]]:
    end = 0
    for at in hits:
        if at >= end and (m := match(region, at)) is not None:
            end = m.end()
            yield m
