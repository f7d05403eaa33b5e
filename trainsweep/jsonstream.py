"""Indented JSON written piece by piece: the same text as ``json.dumps(value, indent=N)``, in bounded memory.

A run record or seed JSON of a very long log holds millions of numbers; building the whole dict of
Python objects first and then one string costs gigabytes. :func:`iter_json` walks the value instead and
yields the text in pieces. Mappings and sequences (lists, tuples, ``array``, ``range`` and other
sequences, e.g. the parser's ``JoinedStamps``) are written as they are iterated, long ones in chunks;
a :class:`LazyMapping` stands for a mapping whose items are produced on demand (e.g. per epoch). Every
other value goes through ``json.dumps`` with the same options, so the text is the same byte for byte.

Runs of numbers (the bulk of a run record: step times, step numbers, wall-clock stamps) are encoded by
orjson in C, a chunk at a time, and then laid out with the indent. orjson writes a float as Python's
``repr`` does (shortest round-trip digits) except below 1e-4, where Python switches to an exponent
earlier, and it writes NaN and infinities as ``null``; a chunk whose text shows either (an exponent, a
``null`` or a number below 1e-4) is written again number by number as ``json.dumps`` writes it.

A long sequence of small mappings of numbers (a run record's epochs) is written a group at a time where
the C layout is built (:data:`trainsweep.logs.native.json_layout`): the group's mappings as plain lists
and numbers in one orjson call, then laid out with the indent in C, which refuses what could differ from
``json.dumps``'s text (then the group is written as above). Only mappings of ``str`` keys to ``None``,
bools, ints, finite floats, ASCII strings and sequences of at most :data:`CHUNK_ITEMS` finite numbers go
that way, so that a ``null`` there is always a ``None``; the usual epoch is checked and made plain in C
(:data:`trainsweep.logs.native.plain_mapping`), any other mapping by :func:`_plain_mapping` itself.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice
from typing import Any

import orjson

from trainsweep.logs import native

CHUNK_ITEMS = 1 << 14
"""Scalars of a long sequence encoded in one piece (one orjson call, else one ``json.dumps`` call)."""
GROUP_VALUES = 1 << 16
"""Numbers of the mappings written in one group (one orjson call and one layout in C)."""
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


_FLOAT: set[type] = {float}
_INT: set[type] = {int}
_NUMBERS: set[type] = {float, int}
_SCALARS = {float, int, bool, str, type(None)}
_SLICED = (list, tuple, array, range)
"""Sequences cut into chunks by slicing (in C) rather than by iterating."""
_ARRAY_KINDS: dict[str, set[type]] = {**dict.fromkeys("fd", _FLOAT), **dict.fromkeys("bBhHiIlLqQ", _INT)}
_encode_key: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A key as ``json.dumps`` writes it (its C string encoder; ``ensure_ascii``, the default)."""
_BELOW_1E_4 = re.compile(rb"[\[,:]-?0\.0000")
"""A number orjson wrote without an exponent that Python's ``repr`` writes with one (``1e-05``)."""


def _below_1e_4(text: bytes) -> bool:
    """Whether :data:`_BELOW_1E_4` is found in ``text``: tried only where ``0.0000`` is (stamps such as
    ``1596431480.00003`` hold it too, and the regex is slow over a whole chunk)."""
    at = text.find(b"0.0000")
    while at >= 0:
        before = at - 1 if at > 0 and text[at - 1] == 0x2D else at  # "-0.0000..."
        if before > 0 and text[before - 1] in b"[,:":
            return True
        at = text.find(b"0.0000", at + 1)
    return False


def _is_container(x: Any) -> bool:
    return isinstance(x, Mapping | LazyMapping | RawJSON) or _is_sequence(x)


def _shift(text: str, spaces: str) -> str:
    # JSON text has no raw newline inside strings: every newline starts an indented line.
    return text.replace("\n", "\n" + spaces) if spaces else text


def _chunks(value: Any, items: Iterator[Any]) -> Iterator[tuple[list[Any], set[type] | None]]:
    """The items of a sequence as lists of at most :data:`CHUNK_ITEMS`, each with the types of its
    items when they are known without looking (an ``array``'s typecode), else None."""
    kind = type(value)
    if kind in _SLICED:
        kinds = _ARRAY_KINDS.get(value.typecode) if kind is array else None
        for start in range(0, len(value), CHUNK_ITEMS):
            chunk = value[start : start + CHUNK_ITEMS]
            yield (chunk.tolist() if kind is array else list(chunk) if kind is not list else chunk), kinds
    else:
        while chunk := list(islice(items, CHUNK_ITEMS)):
            yield chunk, None


def _numbers_text(chunk: list[float | int], join: str) -> str | None:
    """``join.join(json.dumps(x) for x in chunk)`` for ints and finite floats, encoded in C by orjson;
    None when orjson's text would differ from ``json.dumps``'s (see the module docstring)."""
    try:
        text = orjson.dumps(chunk)
    except orjson.JSONEncodeError:  # an int beyond 64 bits
        return None
    if b"e" in text or b"n" in text or _below_1e_4(text):
        return None
    return text[1:-1].decode().replace(",", join)


_DECIMAL_KEYS = re.compile(r"-?[0-9]+(?:\x00-?[0-9]+)*")


def number_items_text(keys: Sequence[str], values: Sequence[float | int], join: str) -> str | None:
    """``join.join(f'"{k}": {json.dumps(v)}' for k, v in zip(keys, values))`` encoded in C by orjson, for
    distinct keys that are integers in decimal (a seed JSON's step numbers) and values that are ints or
    finite floats; None for other keys or values, or when orjson's text of a value would differ from
    ``json.dumps``'s (see the module docstring)."""
    if len(keys) != len(values) or not _DECIMAL_KEYS.fullmatch("\x00".join(keys)):
        return None
    if type(values) is array:
        if _ARRAY_KINDS.get(values.typecode) is None:
            return None
        values = values.tolist()
    elif not set(map(type, values)) <= _NUMBERS:
        return None
    items = dict(zip(keys, values, strict=True))
    if len(items) != len(keys):  # a repeated key: json.dumps of the pairs would keep both
        return None
    try:
        text = orjson.dumps(items)
    except orjson.JSONEncodeError:  # an int beyond 64 bits
        return None
    if b"e" in text or b"n" in text or _below_1e_4(text):
        return None
    return text[1:-1].decode().replace('":', '": ').replace(',"', join + '"')


def _chunk_text(
    chunk: list[Any], kinds: set[type] | None, indent: int, dumps: Callable[[Any], str], level: int
) -> str | None:
    """The text of a chunk of a sequence's items at ``level``, each after its newline and indent (the
    separators included); None when an item is a container (written item by item then)."""
    if kinds is None:
        kinds = set(map(type, chunk))
    item_sep = "\n" + " " * (indent * (level + 1))
    join = "," + item_sep
    if kinds <= _NUMBERS and (numbers := _numbers_text(chunk, join)) is not None:
        return item_sep + numbers
    if kinds == _FLOAT and all(map(math.isfinite, chunk)):
        return item_sep + join.join(map(float.__repr__, chunk))  # as json.dumps writes them
    if kinds == _INT:
        return item_sep + join.join(map(int.__repr__, chunk))
    if kinds <= _SCALARS:
        text = dumps(chunk)  # "[\n<indent>a,\n<indent>b\n]"
        return _shift(text[1:-2], " " * (indent * level))
    return None


def _scalar_text(value: Any, indent: int, dumps: Callable[[Any], str], level: int) -> str:
    kind = type(value)
    if kind is float and math.isfinite(value):  # scalars as json.dumps writes them, whatever its options
        return float.__repr__(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return _shift(dumps(value), " " * (indent * level))


def _whole_text(value: Any, indent: int, dumps: Callable[[Any], str], level: int) -> str | None:
    """The text of a value written in one piece: a scalar, raw text, an empty sequence or a sequence of
    scalars no longer than one chunk; None for anything else (written piece by piece by :func:`_iter`)."""
    kind = type(value)
    if kind in _SCALARS:
        return _scalar_text(value, indent, dumps, level)
    if kind is RawJSON:
        return _shift(value.text, " " * (indent * level))
    if kind in _SLICED:
        if not value:
            return "[]"
        if len(value) <= CHUNK_ITEMS:
            chunk = value.tolist() if kind is array else value if kind is list else list(value)
            known = _ARRAY_KINDS.get(value.typecode) if kind is array else None
            body = _chunk_text(chunk, known, indent, dumps, level)
            if body is not None:
                return "[" + body + "\n" + " " * (indent * level) + "]"
    return None


_NONE = type(None)
_PLAIN_SCALARS = {int, bool, str, _NONE}
_PLAIN_ITEMS = {float, int}


def _plain_mapping(item: Any, last_range: dict[range, list[int]]) -> tuple[dict[str, Any], int] | None:
    """A mapping as a dict of plain values that orjson encodes (sequences as lists of finite numbers,
    at most :data:`CHUNK_ITEMS` each), and how many numbers it holds; None for anything else.
    ``last_range`` holds the list of the last range seen (consecutive epochs share their step numbers)."""
    if type(item) is not dict:
        return None
    fast = native.plain_mapping  # the usual entry (arrays of doubles or longs, ranges, scalars), in C
    if fast is not None and (found := fast(item, CHUNK_ITEMS, array, last_range)) is not None:
        return found
    plain: dict[str, Any] = {}
    count = 0
    for key, v in item.items():  # a key that is not a str: orjson refuses it
        kind = type(v)
        if kind is float:
            if v - v != 0.0:  # NaN or an infinity: orjson would write null
                return None
        elif kind in _PLAIN_SCALARS:
            pass
        elif kind in _SLICED:
            if len(v) > CHUNK_ITEMS:
                return None
            if kind is array:  # step times, stamps: their kind is their typecode
                kinds = _ARRAY_KINDS.get(v.typecode)
                if kinds is None:
                    return None
                v = v.tolist()
            elif kind is range:
                kinds = _INT
                if v not in last_range:
                    last_range.clear()
                    last_range[v] = list(v)
                v = last_range[v]
            else:
                kinds = None
                v = list(v) if kind is not list else v
            if kinds is None and not set(map(type, v)) <= _PLAIN_ITEMS:
                return None
            if kinds is not _INT and (total := sum(v)) - total != 0.0:
                return None  # a NaN or an infinity among them (or a sum beyond floats)
            count += len(v)
        else:
            return None
        plain[key] = v
    return plain, count


def _mappings_text(plain: list[dict[str, Any]], indent: int, level: int, sep: str) -> str | None:
    """``sep`` and the items of a sequence of plain mappings at ``level`` (as :func:`_chunk_text`), laid
    out in C."""
    layout = native.json_layout
    if layout is None:
        return None
    try:
        # the items only (without the list's "[" and its "\n<indent>]"), after sep
        return layout(orjson.dumps(plain), indent, level, sep.encode())
    except (orjson.JSONEncodeError, TypeError):  # an int beyond 64 bits
        return None


def _groups(items: Iterable[Any]) -> Iterator[tuple[list[Any], list[dict[str, Any]] | None]]:
    """The items in order: runs of plain mappings (at most :data:`GROUP_VALUES` numbers a run) with
    their plain dicts, and each other item alone with None."""
    group: list[Any] = []
    plain: list[dict[str, Any]] = []
    count = 0
    last_range: dict[range, list[int]] = {}
    for x in items:
        found = _plain_mapping(x, last_range)
        if found is not None:
            group.append(x)
            plain.append(found[0])
            count += found[1]
            if count < GROUP_VALUES:
                continue
        if group:
            yield group, plain
            group, plain, count = [], [], 0
        if found is None:
            yield [x], None
    if group:
        yield group, plain


def _containers(items: Iterator[Any], indent: int, dumps: Callable[[Any], str], level: int) -> Iterator[str]:
    """A sequence's items that are containers, each after ``[`` or ``,``: groups of plain mappings laid
    out in C where it is built, other items written by :func:`_iter`."""
    item_sep = "\n" + " " * (indent * (level + 1))
    sep = "["
    grouped = _groups(items) if native.json_layout is not None else (([x], None) for x in items)
    for group, plain in grouped:
        text = _mappings_text(plain, indent, level, sep) if plain is not None else None
        if text is not None:
            yield text
            sep = ","
            continue
        for x in group:
            yield sep + item_sep
            sep = ","
            yield from _iter(x, indent, dumps, level + 1)


def _iter(value: Any, indent: int, dumps: Callable[[Any], str], level: int) -> Iterator[str]:
    text = _whole_text(value, indent, dumps, level)
    if text is not None:
        yield text
        return
    if isinstance(value, LazyMapping) or (
        isinstance(value, Mapping) and len(value) > 0 and all(type(k) is str for k in value)
    ):
        if len(value) == 0:
            yield "{}"
            return
        inner = "\n" + " " * (indent * (level + 1))
        sep = "{" + inner
        # Items written in one piece are gathered (up to PIECE_CHARS) and given together: a piece
        # per key would cost more than writing it.
        parts: list[str] = []
        size = 0
        for key, item in value.items():
            parts.append(sep + _encode_key(key) + ": ")
            sep = "," + inner
            text = _whole_text(item, indent, dumps, level + 1)
            if text is None:
                yield "".join(parts)
                parts, size = [], 0
                yield from _iter(item, indent, dumps, level + 1)
                continue
            parts.append(text)
            size += len(text)
            if size >= PIECE_CHARS:
                yield "".join(parts)
                parts, size = [], 0
        parts.append("\n" + " " * (indent * level) + "}")
        yield "".join(parts)
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
        if _is_container(first):  # e.g. epochs: written as they are iterated, never all at once
            yield from _containers(items, indent, dumps, level)
        else:
            for chunk, kinds in _chunks(value, items):
                body = _chunk_text(chunk, kinds, indent, dumps, level)
                if body is not None:
                    yield sep + body
                else:
                    for x in chunk:
                        yield sep + item_sep
                        sep = ","
                        yield from _iter(x, indent, dumps, level + 1)
                sep = ","
        yield "\n" + inner + "]"
        return
    yield _scalar_text(value, indent, dumps, level)


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
