"""The streaming JSON writer gives the text of json.dumps with the same indent, byte for byte."""

from __future__ import annotations

import json
import math
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainsweep import jsonstream
from trainsweep.artefacts import _json_safe
from trainsweep.jsonstream import LazyMapping, RawJSON, iter_json, iter_json_bytes
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
