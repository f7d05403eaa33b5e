"""Indented JSON written piece by piece: the same text as ``json.dumps(value, indent=N)``, in bounded memory.

A run record or seed JSON of a very long log holds millions of numbers; building the whole dict of
Python objects first and then one string costs gigabytes. :func:`iter_json` walks the value instead and
yields the text in pieces. Mappings and sequences (lists, tuples, ``array``, ``range`` and other
sequences, e.g. the parser's ``JoinedStamps``) are written as they are iterated, long ones in chunks;
a :class:`LazyMapping` stands for a mapping whose items are produced on demand (e.g. per epoch). Every
other value goes through ``json.dumps`` with the same options, so the text is the same byte for byte.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import Any

CHUNK_ITEMS = 1 << 14
"""Scalars of a long sequence encoded per ``json.dumps`` call."""
PIECE_CHARS = 1 << 20
""":func:`iter_json_bytes` gathers pieces into blocks of about this many characters."""


class LazyMapping:
    """A JSON object whose ``(key, value)`` pairs come from ``items()`` when it is written.

    Args:
        count: how many items ``items()`` yields (only whether it is 0 matters: ``{}`` is written then).
        items: called once per writing; keys must be ``str``.
    """

    __slots__ = ("_count", "_items")

    def __init__(self, count: int, items: Callable[[], Iterable[tuple[str, Any]]]) -> None:
        self._count, self._items = count, items

    def __len__(self) -> int:
        return self._count

    def items(self) -> Iterable[tuple[str, Any]]:
        return self._items()


class RawJSON:
    """Text already encoded as ``json.dumps`` would at level 0 (with the same ``indent``); written as is,
    re-indented to where it sits."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _is_sequence(value: Any) -> bool:
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return False
    return isinstance(value, (list, tuple, array, range, Sequence))


def iter_json(
    value: Any,
    *,
    indent: int,
    dumps: Callable[[Any], str] | None = None,
    level: int = 0,
) -> Iterator[str]:
    """Yield the text of ``dumps(value)`` (default ``json.dumps(value, indent=indent)``) in pieces.

    Args:
        value: what to write; see the module docstring.
        indent: spaces per level, as ``json.dumps``'s ``indent``.
        dumps: encodes one value as ``json.dumps`` would at level 0 with the same ``indent`` (say, with
            ``allow_nan=False`` or after replacing non-finite floats); its text is re-indented here.
        level: the nesting level ``value`` sits at.
    """
    if dumps is None:

        def dumps(x: Any) -> str:
            return json.dumps(x, indent=indent)

    yield from _iter(value, indent, dumps, level)


_FLOAT = {float}
_INT = {int}
_SCALARS = {float, int, bool, str, type(None)}


def _is_container(x: Any) -> bool:
    return isinstance(x, Mapping | LazyMapping | RawJSON) or _is_sequence(x)


def _shift(text: str, spaces: str) -> str:
    # JSON text has no raw newline inside strings: every newline starts an indented line.
    return text.replace("\n", "\n" + spaces) if spaces else text


def _iter(value: Any, indent: int, dumps: Callable[[Any], str], level: int) -> Iterator[str]:
    if type(value) is RawJSON:
        yield _shift(value.text, " " * (indent * level))
        return
    if isinstance(value, LazyMapping) or (
        isinstance(value, Mapping) and len(value) > 0 and all(type(k) is str for k in value)
    ):
        if len(value) == 0:
            yield "{}"
            return
        inner = "\n" + " " * (indent * (level + 1))
        sep = "{" + inner
        for key, item in value.items():
            yield sep + json.dumps(key) + ": "
            sep = "," + inner
            yield from _iter(item, indent, dumps, level + 1)
        yield "\n" + " " * (indent * level) + "}"
        return
    if _is_sequence(value):
        if len(value) == 0:
            yield "[]"
            return
        inner = " " * (indent * level)
        item_sep = "\n" + " " * (indent * (level + 1))
        sep = "["
        items = iter(value)
        first = next(items)
        items = chain((first,), items)
        if _is_container(first):  # e.g. epochs: each written as it is iterated, never all at once
            for x in items:
                yield sep + item_sep
                sep = ","
                yield from _iter(x, indent, dumps, level + 1)
        else:
            join = "," + item_sep
            while chunk := list(islice(items, CHUNK_ITEMS)):
                kinds = set(map(type, chunk))
                if kinds == _FLOAT and all(map(math.isfinite, chunk)):
                    yield sep + item_sep + join.join(map(float.__repr__, chunk))  # as json.dumps writes them
                elif kinds == _INT:
                    yield sep + item_sep + join.join(map(int.__repr__, chunk))
                elif kinds <= _SCALARS:
                    text = dumps(chunk)  # "[\n<indent>a,\n<indent>b\n]"
                    yield sep + _shift(text[1:-2], inner)
                else:
                    for x in chunk:
                        yield sep + item_sep
                        sep = ","
                        yield from _iter(x, indent, dumps, level + 1)
                sep = ","
        yield "\n" + inner + "]"
        return
    kind = type(value)
    if kind is float and math.isfinite(value):  # scalars as json.dumps writes them, whatever its options
        yield float.__repr__(value)
    elif kind is int:
        yield int.__repr__(value)
    elif value is None:
        yield "null"
    else:
        yield _shift(dumps(value), " " * (indent * level))


def iter_json_bytes(pieces: Iterable[str]) -> Iterator[bytes]:
    """UTF-8 blocks of about :data:`PIECE_CHARS` characters from text pieces."""
    block: list[str] = []
    size = 0
    for piece in pieces:
        block.append(piece)
        size += len(piece)
        if size >= PIECE_CHARS:
            yield "".join(block).encode()
            block, size = [], 0
    if block:
        yield "".join(block).encode()
