"""The streaming JSON writer gives the text of json.dumps with the same indent, byte for byte."""

from __future__ import annotations

import json
import math
from array import array

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trainsweep import jsonstream
from trainsweep.artefacts import _json_safe
from trainsweep.jsonstream import LazyMapping, RawJSON, iter_json, iter_json_bytes
from trainsweep.logs import native
from trainsweep.logs.model import Epoch, JoinedStamps


def streamed(value, indent: int, dumps=None) -> str:
    return "".join(iter_json(value, indent=indent, dumps=dumps))


SAMPLES = [
    0.1,
    -0.0,
    1e300,
    5e-324,
    3,
    True,
    None,
    'é\n"x"',
    [],
    {},
    [[]],
    [{}],
    {"a": []},
    {"a": {}},
    [1.5, 2, None, True, "s"],
    {"b": 1, "a": [0.1, 0.2, [3, {"k": [4.5]}]], "c": {"d": None}},
    {1: "int key", "x": 2},  # non-str keys: json.dumps converts them
    {"nested": {2.5: 1, None: [1]}},
    [float("nan"), float("inf"), -float("inf"), 1.0],
    {"n": float("nan")},
    list(range(100)),
    [0.1 * i for i in range(100)],
    [[0.1, 0.2], 0.3, {"a": 1}],
    [0.1, [0.2], 0.3],
    ("tuple", 1),
    {"e": [{"s": [1.0, 2.0]}, {"s": []}]},
]


@pytest.mark.parametrize("indent", [0, 1, 4])
@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_the_text_is_json_dumps(value, indent: int) -> None:
    assert streamed(value, indent) == json.dumps(value, indent=indent)


@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_the_record_options_are_kept(value) -> None:
    """With _json_safe and allow_nan=False (the run record): non-finite numbers are null."""

    def dumps(x):
        return json.dumps(_json_safe(x), indent=1, allow_nan=False)

    assert streamed(value, 1, dumps) == dumps(value)


def test_arrays_ranges_and_joined_stamps_are_written_as_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_ITEMS", 7)  # many chunk boundaries
    steps = array("d", [0.1 * i for i in range(50)] + [float("nan")] + [2.0] * 20)
    numbers = array("l", range(-5, 60))
    epoch = Epoch(1, step_s=array("d", [1.0, 2.0]), real_time=array("d", [10.0, 11.5, 12.25]))
    joined = JoinedStamps([epoch, [13.0], array("d", [14.0] * 9)])
    value = {"steps": steps, "numbers": numbers, "range": range(1, 30), "empty": range(0), "stamps": joined}
    as_lists = {k: list(v) for k, v in value.items()}
    for indent in (1, 4):
        assert streamed(value, indent) == json.dumps(as_lists, indent=indent)
    assert streamed(array("d"), 1) == "[]"


def test_chunks_of_mixed_items(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_ITEMS", 3)
    value = [1.0, 2, 3.5, "x", None, float("inf"), [1], 4.0, {"a": 5}, 6, 7, 8, 9.5]
    assert streamed(value, 2) == json.dumps(value, indent=2)


def test_lazy_mappings_and_raw_text() -> None:
    inner = {"1": 0.5, "2": 0.25}
    lazy = LazyMapping(2, lambda: iter([("a", {"steps": RawJSON(json.dumps(inner, indent=4))}), ("b", [])]))
    expected = json.dumps({"x": 1, "e": {"a": {"steps": inner}, "b": []}}, indent=4)
    assert streamed({"x": 1, "e": lazy}, 4) == expected
    assert streamed({"e": LazyMapping(0, lambda: iter(()))}, 4) == json.dumps({"e": {}}, indent=4)


def test_bytes_come_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "PIECE_CHARS", 10)
    pieces = ["abc", "defgh", "ijklmnop", "q", ""]
    blocks = list(iter_json_bytes(pieces))
    assert b"".join(blocks) == b"abcdefghijklmnopq"
    assert len(blocks) == 2


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.text(max_size=4), children, max_size=5),
    ),
    max_leaves=40,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=values, indent=st.sampled_from([0, 1, 2, 4]), chunk=st.integers(1, 5))
def test_any_json_value(value, indent: int, chunk: int) -> None:
    old = jsonstream.CHUNK_ITEMS
    jsonstream.CHUNK_ITEMS = chunk
    try:
        assert streamed(value, indent) == json.dumps(value, indent=indent)
        if not any(isinstance(x, float) and not math.isfinite(x) for x in _leaves(value)):
            assert streamed(value, indent, lambda x: json.dumps(x, indent=indent, allow_nan=False)) == (
                json.dumps(value, indent=indent, allow_nan=False)
            )
    finally:
        jsonstream.CHUNK_ITEMS = old


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


# ---- runs of numbers encoded by orjson: where its text would differ, json.dumps's is kept -----------

# Python writes these with an exponent (1e-05, 2.5e-07, 1e+16) or as NaN/Infinity; orjson writes the
# first ones without one ("0.00001") or with a shorter one ("2.5e-7"), and non-finite ones as null.
DIFFERENT_IN_ORJSON = [1e-05, 9.999999999999999e-05, 2.5e-07, 5e-324, -3e-06, 1e16, 1.5e22, -2e300]
LIKE_IN_ORJSON = [0.0001, -0.0, 0.0, 9999999999999998.0, 0.1, 1.0, 123.456, 0.30000000000000004, 1e15]


@pytest.mark.parametrize("odd", [*DIFFERENT_IN_ORJSON, float("nan"), float("inf"), 2**64, -(2**63) - 1])
@pytest.mark.parametrize("position", [0, 16_383, 16_384, 19_999])
def test_one_odd_number_in_a_long_run_keeps_the_json_dumps_text(odd: float, position: int) -> None:
    """The run of numbers around it is encoded in C; the chunk that holds it is written as json.dumps does."""
    steps = [0.25 + i * 1e-3 for i in range(20_000)]
    steps[position] = odd
    values = {"list": steps, "stamps": [1.6e9 + i for i in range(1_000)] + [odd]}
    if isinstance(odd, float):
        values["array"] = array("d", steps)
    as_lists = {k: list(v) for k, v in values.items()}
    for indent in (1, 4):
        assert streamed(values, indent) == json.dumps(as_lists, indent=indent)

    def record(x):
        return json.dumps(_json_safe(x), indent=1, allow_nan=False)

    assert streamed(values, 1, record) == record(as_lists)


def test_numbers_orjson_writes_like_python_stay_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """No number of a run is formatted one by one in Python when orjson's text is already json.dumps's."""
    values = [*LIKE_IN_ORJSON, *range(-5, 5), 2**63 - 1] * 100
    expected = json.dumps(values, indent=1)
    calls = []
    real = jsonstream._numbers_text
    monkeypatch.setattr(
        jsonstream, "_numbers_text", lambda chunk, join: calls.append(r := real(chunk, join)) or r
    )
    assert streamed(values, 1) == expected
    assert calls and all(text is not None for text in calls)


@settings(max_examples=200, deadline=None)
@given(
    numbers=st.lists(
        st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**70), 2**70)),
        min_size=1,
        max_size=300,
    ),
    chunk=st.integers(1, 400),
)
def test_any_run_of_numbers_is_written_as_json_dumps_writes_it(numbers: list, chunk: int) -> None:
    old = jsonstream.CHUNK_ITEMS
    jsonstream.CHUNK_ITEMS = chunk
    try:
        floats = [float(x) if isinstance(x, float) else x / 3 for x in numbers]
        for value in (numbers, floats, array("d", floats), {"k": numbers, "f": floats}):
            for indent in (0, 1, 4):
                assert streamed(value, indent) == json.dumps(
                    list(value) if isinstance(value, array) else value, indent=indent
                )
    finally:
        jsonstream.CHUNK_ITEMS = old


def _items_as_json_dumps(keys, values, join: str) -> str:
    return join.join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in zip(keys, values, strict=True))


@pytest.mark.parametrize(
    ("keys", "values"),
    [
        (["1", "2", "3"], array("d", [0.5, 0.25, 12.0])),
        (["1", "2", "-3", "40"], [1, 2.5, 0.0001, -0.0]),
        ([str(i) for i in range(1, 2_001)], array("d", [0.1 * i for i in range(2_000)])),
        (["7"], array("l", [2**40])),
    ],
)
def test_seed_step_items_are_encoded_in_c_with_json_dumps_text(keys, values) -> None:
    assert jsonstream.number_items_text(keys, values, ",\n    ") == _items_as_json_dumps(
        keys, values, ",\n    "
    )


@pytest.mark.parametrize(
    ("keys", "values"),
    [
        (["1", "2"], [0.5, 1e-05]),  # orjson: 0.00001
        (["1", "2"], [0.5, 2.5e-07]),  # orjson: 2.5e-7
        (["1", "2"], array("d", [0.5, float("nan")])),  # orjson: null
        (["1", "1"], [0.5, 0.25]),  # a repeated key
        (["1", "a"], [0.5, 0.25]),  # not a number
        (["1", "\u0661"], [0.5, 0.25]),  # an Arabic-Indic digit: json.dumps escapes it, orjson would not
        (["1", "2"], [0.5, True]),
        (["1", "2"], [0.5, 2**64]),  # beyond 64 bits
        (["1"], [0.5, 0.25]),  # not as many keys as values
    ],
)
def test_seed_step_items_orjson_would_write_otherwise_are_left_to_json_dumps(keys, values) -> None:
    assert jsonstream.number_items_text(keys, values, ",\n    ") is None


# ---- sequences of plain mappings (a run record's epochs): orjson, then laid out in C -----------------

needs_layout = pytest.mark.skipif(native.json_layout is None, reason="the C layout is not built")


@needs_layout
@settings(max_examples=300, deadline=None)
@given(value=values, indent=st.sampled_from([0, 1, 2, 4]), level=st.integers(0, 3))
@example(value={"\x7f": None}, indent=0, level=0)  # DEL: json.dumps escapes it, orjson does not
def test_the_c_layout_is_json_dumps_text_or_none(value, indent: int, level: int) -> None:
    if any(isinstance(x, float) and not math.isfinite(x) for x in _leaves(value)):
        return  # orjson writes null for them: the caller never hands them over
    try:
        compact = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return  # ints beyond 64 bits
    text = native.json_layout(compact, indent, level)
    expected = json.dumps(value, indent=indent).replace("\n", "\n" + " " * (indent * level))
    assert text is None or text == expected
    plain = all(
        not isinstance(x, str) or (x.isascii() and x.isprintable() and '"' not in x and "\\" not in x)
        for x in [*_leaves(value), *_keys(value)]
    )
    if (
        plain
        and b"e" not in compact.replace(b"true", b"").replace(b"false", b"")
        and b"0.0000" not in compact
    ):
        assert text == expected  # nothing that orjson writes otherwise: laid out, not refused


def _keys(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


@needs_layout
@pytest.mark.parametrize(
    "value",
    [[1e-05], [-0.00001234], [1e16], [2.5e-07], {"a": 1e300}, ["é"], ['a"b'], ["a\nb"], {"\\": 1}],
)
def test_the_c_layout_refuses_what_orjson_writes_otherwise(value) -> None:
    assert native.json_layout(orjson.dumps(value), 1, 2) is None


@needs_layout
@pytest.mark.parametrize("bad", [b"[1,", b"[1]]", b"{1", b" [1]", b"[nan]", b'["a]', b"[1.5e3]"])
def test_the_c_layout_refuses_what_is_not_compact_json(bad: bytes) -> None:
    assert native.json_layout(bad, 1, 0) is None


def epoch_like(i: int, odd: dict | None = None) -> dict:
    item = {
        "index": i,
        "step_s": array("d", [0.25 + i, 0.5, 1.0 / 3]),
        "step_numbers": range(1, 4),
        "validation_s": None,
        "epoch_s": 1.5,
        "real_time": array("d", [1592371754.45, 1592371755.0]),
        "done": True,
    }
    item.update(odd or {})
    return item


ODD_EPOCHS = [
    {"epoch_s": float("nan")},
    {"step_s": array("d", [0.1, float("inf")])},
    {"step_s": [0.1, float("-inf")]},
    {"step_s": array("d", [1e308, 1e308])},  # finite values whose sum is not
    {"index": 2**64},
    {"step_s": array("d", [1e-05, 0.5])},
    {"epoch_s": 1e16},
    {"name": "é"},
    {"name": 'a "quoted" name'},
    {"step_s": array("d", [0.5] * 50)},  # longer than CHUNK_ITEMS below: written in chunks
    {"nested": {"a": [1, 2]}},
    {"mixed": [1, "x"]},
    {"ints": array("l", [1, -2, 3])},
    {"empty": array("d")},
    {"floats": array("f", [0.5, 0.25])},
    {"step_numbers": range(5, 9)},  # other numbers than the epochs around it
    {"step_numbers": (1, 2, 3)},
]


@pytest.mark.parametrize("odd", ODD_EPOCHS, ids=range(len(ODD_EPOCHS)))
@pytest.mark.parametrize("group", [1, 7, 1 << 16])
def test_epochs_with_anything_odd_among_plain_ones_keep_the_json_dumps_text(
    odd: dict, group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "CHUNK_ITEMS", 40)
    monkeypatch.setattr(jsonstream, "GROUP_VALUES", group)
    epochs = [epoch_like(i) for i in range(5)] + [epoch_like(5, odd)] + [epoch_like(i) for i in range(6, 9)]
    as_lists = [{k: list(v) if isinstance(v, array | range) else v for k, v in e.items()} for e in epochs]
    value = {"kind": "run", "epochs": epochs, "after": [1, 2]}
    expected = {"kind": "run", "epochs": as_lists, "after": [1, 2]}
    assert streamed(value, 1) == json.dumps(expected, indent=1)

    def dumps(x):
        return json.dumps(_json_safe(x), indent=1, allow_nan=False)

    assert streamed(value, 1, dumps) == dumps(_json_safe(expected))


@needs_layout
def test_plain_epochs_are_laid_out_in_c_a_group_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    c_layout = native.json_layout

    def layout(compact: bytes, indent: int, level: int, *lead: bytes):
        calls.append(level)
        return c_layout(compact, indent, level, *lead)

    monkeypatch.setattr(jsonstream, "GROUP_VALUES", 40)  # 8 numbers an epoch: 5 epochs a group
    monkeypatch.setattr(native, "json_layout", layout)
    epochs = [epoch_like(i) for i in range(12)]
    as_lists = [{k: list(v) if isinstance(v, array | range) else v for k, v in e.items()} for e in epochs]
    assert streamed({"epochs": epochs}, 1) == json.dumps({"epochs": as_lists}, indent=1)
    assert calls == [1, 1, 1]  # 5 + 5 + 2 epochs, each group in one call


def test_mappings_with_keys_that_are_not_str_keep_the_json_dumps_text() -> None:
    value = [{"a": 1, "b": [0.5]}, {7: "x", "b": 2.5, None: [1]}, {"a": 2, "b": [0.25]}]
    assert streamed(value, 1) == json.dumps(value, indent=1)


@needs_layout
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from("abc"), st.lists(st.floats(0.5, 1e6), max_size=3)), min_size=1),
    st.integers(0, 3),
    st.integers(0, 4),
    st.sampled_from([b"[", b",", b""]),
)
def test_the_layout_gives_a_lists_items_after_a_lead(
    value: list[dict[str, list[float]]], indent: int, level: int, lead: bytes
) -> None:
    # what the writer yields for a group of epochs: the lead, then the items without the list's "[" and
    # its closing line, in one piece (it was sliced and concatenated in Python)
    whole = native.json_layout(orjson.dumps(value), indent, level)
    items = native.json_layout(orjson.dumps(value), indent, level, lead)
    assert whole is not None
    assert items == lead.decode() + whole[1 : len(whole) - 2 - indent * level]


@needs_layout
def test_the_layout_with_a_lead_refuses_what_is_not_a_non_empty_list() -> None:
    for compact in (b"[]", b"{}", b'{"a":1}', b"1", b'"x"'):
        assert native.json_layout(compact, 1, 0, b",") is None
    assert native.json_layout(b"[1]", 1, 0, b"\xc3\xa9") is None  # the text is ASCII
    assert native.json_layout(b"[1,2]", 1, 0, b",") == ",\n 1,\n 2"


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.floats(-1e308, 1e308), max_size=4).map(lambda x: array("d", x)),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3).map(lambda x: array("d", x)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4).map(lambda x: array("l", x)),
    st.lists(st.integers(0, 9), max_size=3).map(lambda x: array("i", x)),
    st.builds(range, st.integers(-3, 3), st.integers(-3, 40)),
    st.lists(st.floats(0, 1), max_size=3),
    st.tuples(st.integers(0, 3)),
)


@pytest.mark.skipif(native.plain_mapping is None, reason="the C extension is not built")
@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.one_of(st.text(max_size=4), st.integers(0, 3)), _VALUES, max_size=8))
def test_the_plain_mapping_in_c_is_the_python_one(item: dict) -> None:
    # what C answers (the usual epoch entry: scalars, arrays of doubles or longs, ranges) equals what the
    # Python function answers; where C leaves it to Python (None), Python's answer is what is used
    fast = native.plain_mapping(item, jsonstream.CHUNK_ITEMS, array, {})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "plain_mapping", None)
        slow = jsonstream._plain_mapping(item, {})
    if fast is not None:
        assert fast == slow
        assert [type(v) for v in fast[0].values()] == [type(v) for v in slow[0].values()]
    assert jsonstream._plain_mapping(item, {}) == slow  # the writer's answer is Python's either way


@pytest.mark.skipif(native.plain_mapping is None, reason="the C extension is not built")
def test_the_plain_mapping_in_c_shares_the_last_ranges_list_and_refuses_what_python_must_read() -> None:
    last: dict = {}
    one = native.plain_mapping({"n": range(1, 4)}, 16, array, last)
    two = native.plain_mapping({"n": range(1, 4), "x": 0.5}, 16, array, last)
    assert one == ({"n": [1, 2, 3]}, 3) and two == ({"n": [1, 2, 3], "x": 0.5}, 3)
    assert one[0]["n"] is two[0]["n"]  # consecutive epochs share their step numbers' list
    assert native.plain_mapping({"s": array("d", [1e308, 1e308])}, 16, array, {}) is None  # sum beyond floats
    assert native.plain_mapping({"s": array("d", [0.5] * 17)}, 16, array, {}) is None  # longer than limit
    assert native.plain_mapping({"s": [0.5]}, 16, array, {}) is None  # a list: Python reads it
    assert native.plain_mapping({1: 0.5}, 16, array, {}) is None  # a key that is not a str


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"0.0000", b"-", b"[", b",", b":", b"1", b"0", b".", b"5"]), max_size=14))
def test_numbers_below_1e_4_are_found_where_the_regex_finds_them(parts: list[bytes]) -> None:
    text = b"".join(parts)
    assert jsonstream._below_1e_4(text) is (jsonstream._BELOW_1E_4.search(text) is not None)
