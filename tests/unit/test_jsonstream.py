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
