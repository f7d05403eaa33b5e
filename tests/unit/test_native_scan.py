"""The C scanner of the cloud-ML reader (trainsweep/logs/_scan.c) against the Python path it stands in for.

The Python path is the reference: for every input the two must give the same run record. The scanner
must also be built in this install (it is what makes the parse benchmark's figure): a missing C compiler
at install time fails tests/processes/test_native_scan_default.py rather than silently halving the speed.
"""

from __future__ import annotations

import json
import random
import struct
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainsweep.logs import cloudml, native, parse
from trainsweep.logs.numbers import MAX_DURATION_S

SCAN = native.scan_stretch
SCAN_MANY = native.scan_stretches
RARE_LINES = native.rare_lines
FIND_ALL = native.find_all
CONTAINS = native.contains
LOG_SUFFIXES = (".txt", ".out", ".log")


_SCANNER = {
    "scan_stretch": SCAN,
    "scan_stretches": SCAN_MANY,
    "rare_lines": RARE_LINES,
    "find_all": FIND_ALL,
    "contains": CONTAINS,
}
"""The C functions the log readers use, by their name in :mod:`trainsweep.logs.native`."""


def _use_scanner(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    for name, function in _SCANNER.items():
        monkeypatch.setattr(native, name, function if on else None)


def records(source, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The run record of ``source`` read with the scanner and with the Python path alone."""
    _use_scanner(monkeypatch, True)
    fast = json.dumps(parse(source, name="result-p3-1-64-e1.txt").to_record(), sort_keys=True)
    _use_scanner(monkeypatch, False)
    slow = json.dumps(parse(source, name="result-p3-1-64-e1.txt").to_record(), sort_keys=True)
    _use_scanner(monkeypatch, True)
    return fast, slow


def test_every_real_log_reads_the_same_with_and_without_it(
    real_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = [p for p in sorted(real_data.rglob("*")) if p.is_file() and p.suffix in LOG_SUFFIXES]
    assert len(logs) > 100
    for p in logs:
        fast, slow = records(p.read_bytes(), monkeypatch)
        assert fast == slow, p


def scan(text: bytes):
    return SCAN(b"\n" + text, 0, len(text) + 1, MAX_DURATION_S)


def test_plain_stretch() -> None:
    times, numbers, first, stamps = scan(
        b"Real time: 1592371754.45\n3 step training time: 0.25s\n4 step training time: 1.5s\nReal time: 7\n"
    )
    assert array("d", times).tolist() == [0.25, 1.5]
    assert numbers is None and first == 3
    assert array("d", stamps).tolist() == [1592371754.45, 7.0]


def test_numbers_that_are_not_consecutive_come_back() -> None:
    _times, numbers, first, _ = scan(b"5 step training time: 1.0s\n2 step training time: 2.0s\n")
    assert array("l", numbers).tolist() == [5, 2] and first == 5


@pytest.mark.parametrize(
    "text",
    [
        b"1 step training time: -0.5s\n",  # a sign
        b"1 step training time: -0\n",
        b"1 step training time: 0x1p3s\n",  # hexadecimal: not a number of the log
        b"1 step training time: 1_000s\n",  # float() reads it; the log's numbers never have it
        b"1 step training time: 1e\n",
        b"1 step training time: 1e1234567s\n",  # an exponent longer than the C path reads
        b"1 step training time: 0.5s and more\n",  # something after the value
        b"1 step training time: nan\n",
        b"1 step training time: 1.2.3s\n",  # not a number float() reads
        b"1 step training time: .s\n",
        b"1 step training time: 99999999999s\n",  # absurd: longer than a month
        b"x step training time: 0.5s\n",  # a step time without a step number
        b"12345678901234567890 step training time: 0.5s\n",  # a step number beyond 64 bits
        b"Real time: -5\n",
        b"Real time: 1e999\n",  # infinite
        b"Real time: 12e3x\n",
        b"1 step training time: 0." + b"1" * 70 + b"s\n",  # longer than the C path reads
    ],
)
def test_what_the_python_path_must_read_gives_none(text: bytes) -> None:
    assert scan(text) is None


@pytest.mark.parametrize(
    "text", [b"1 step training time: 0.25", b"1 step training time: 0.25s", b"Real time: 1592371754"]
)
def test_a_value_without_its_line_end_gives_none(text: bytes) -> None:
    """The last line of a log cut short: the value may be the prefix of a longer one."""
    assert SCAN(b"\n" + text, 0, len(text) + 1, MAX_DURATION_S) is None


def test_exponents_are_read_in_c() -> None:
    times, _numbers, _first, stamps = scan(
        b"1 step training time: 1.5e-02s\n2 step training time: 2E+1\n3 step training time: 1.e0s\r\n"
        b"Real time: 1.5920e9\n"
    )
    assert array("d", times).tolist() == [0.015, 20.0, 1.0]
    assert array("d", stamps).tolist() == [1.592e9]


@pytest.mark.parametrize(
    "value",
    [
        # halfway between two doubles: the 80-bit quotient is exact and the C path must not round it
        b"9007199254740993",
        b"9007199254740995",
        b"4503599627370496.5",
        b"0.30000000000000004",
        b"0.1",
        b"1592371754.4500001",
        b"0000.000000000000000000000000123",
        b"123456789012345678.9",
        b"0",
        b"0.",
        b".5",
        b"2.2250738585072014",
        b"1.5e-02",
        b"4.1199e-04",
        b"0.0000e+00",
        b"9007199254740993e0",
        b"1e27",
        b"1e-27",
        b"123456789012345678e-30",
        b"1e300",
        b"2.5e-310",  # subnormal: CPython's conversion
    ],
)
def test_values_are_what_float_gives(value: bytes) -> None:
    found = scan(b"Real time: " + value + b"\n")
    assert found is not None
    assert struct.unpack("d", found[3])[0] == float(value)


def test_many_random_decimals_are_what_float_gives() -> None:
    rng = random.Random(7)
    values = []
    for _ in range(20000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
        dot = rng.randint(0, len(digits))
        values.append((digits[:dot] + "." + digits[dot:]).encode() if rng.random() < 0.9 else digits.encode())
    for x in (rng.random() * 10 ** rng.randint(-6, 9) for _ in range(20000)):
        values.append(repr(x).encode() if "e" not in repr(x) else b"1.5")
    for _ in range(20000):  # exponent forms, as frameworks print them ({:.4e}) and beyond
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 21)))
        dot = rng.randint(0, len(digits))
        mantissa = digits[:dot] + "." + digits[dot:] if rng.random() < 0.8 else digits
        values.append(
            f"{mantissa}{rng.choice('eE')}{rng.choice(['', '+', '-'])}{rng.randint(0, 40)}".encode()
        )
    text = b"".join(b"Real time: " + v + b"\n" for v in values)
    found = scan(text)
    assert found is not None
    assert array("d", found[3]).tolist() == [float(v) for v in values]


FRAGMENTS = [
    b"Epoch 1/3",
    b"Epoch 2/3",
    b"Epoch time: 1.5s",
    b"Validation time: 0.1",
    b"1 step training time: 0.25s",
    b"2 step training time: 0.2500000000000001s",
    b"3 step training time: 12.000000000000002s",
    b"7 step training time: 0.1s",
    b"2 step training time: -1",
    b"2 step training time: 1e3",
    b"5 step training time: 1.5e-02s",
    b"6 step training time: 0x1p3s",
    b"7 step training time: 1_000s",
    b"8 step training time: -0",
    b"8 step training time: 0.5s trailing",
    b"Real time: 1.5e9s",
    b"Real time: 1e999",
    b"2 step training time: ",
    b"9 step training time: 3.",
    b"99999999999999999999 step training time: 1.5s",
    b"40 steps training: 2.5s",
    b"step training time: 0.5s",
    b" 3 step training time: 0.5s",
    b"Real time: 1592371754.45",
    b"Real time: 1592371754.450000001",
    b"Real time: inf",
    b"Real time: ",
    b"xReal time: 5",
    b"60000/60000 [==============================] - 2s - val_accuracy: 0.97",
    b"\x08" * 10 + b"1 step training time: 0.3s",
    b"",
    # rare lines, found by rare_lines() then matched (by RARE.finditer on the Python path)
    b"on_epoch_begin: 1592371754.45",
    b"on_epoch_end: 1592371760.5",
    b"on_train_batch_begin: 1592371754.5",
    b"('Tempo de inicializacao: ', 0.206)",
    b"Tempo de Inicializacao: 15.7",
    b"Tempo do fit: 61.04",
    b"Tempo levado para o modelo ser salvo: 0.12",
    b"Initialization time 3.86",
    b"Duracao do treinamento: 61.37",
    b"Train on 60000 samples",
    b"Training complete",
    b"Training ...",
    b"x_train shape: (60000, 28, 28, 1)",
    b"Conjunto de treinamento: (40512, 3)",
    b" - Total: 60000",
    b"    - Tamanho do batch: 256",
    b"  - Total: 60000",
    b"Traceback (most recent call last)",
    b"ValueError: boom",
    b"Test loss: 0.03",
    b"Downloading data from https://x",
    b"Dados carregados de /opt/ml",
    b"Using TensorFlow backend.",
    b"Epoch 3/x",
    b"Epochs 1/3",
    b"Tempo",
    b"val_accuracy: 0.9717",
    b"40512/40512 [====] - 11s - loss: 0.1 - val_acc: 0.95 - val_accuracy: 0.96",
    b"- val_accuracy: nan",
    b"val_accval_acc: 0.5",
    b"- val_acc: 0.5x",
    b"[MO833] Rank,0,Initialization Time: 1.5",
    b"[MO833] Rank,0,Epoch,0,Iteration,1,It. time,0.5,Elapsed time,2.0",
    b"[MO833] Rank,1,Epoch,0,Epoch time,3.5,Elapsed time,4.0 [MO833] Rank,1",
    b"x [MO833] Rank,0,Epoch,0,Iteration,2,It. time,0.25,Elapsed time,2.5",
    b"[MO833] Rank,",
    b':::MLLOG {"key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}',
    b':::SYSJSON {"accelerators_per_node": "8"}',
]
lines = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=20)), max_size=50)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
@given(lines, st.sampled_from([b"\n", b"\r\n"]))
def test_any_mix_of_lines_reads_the_same_with_and_without_it(parts: list[bytes], sep: bytes) -> None:
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = records(sep.join(parts), mp)
    assert fast == slow


def test_the_reader_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def spy(*args):
        calls.append(args[1])
        return SCAN_MANY(*args)

    monkeypatch.setattr(native, "scan_stretches", spy)
    run = parse(b"Epoch 1/1\n1 step training time: 0.5s\n2 step training time: 0.25s\nEpoch time: 1s\n")
    assert calls and run.epochs[0].step_s.tolist() == [0.5, 0.25]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines, st.lists(st.integers(-3, 2000), max_size=20))
def test_stretches_read_in_one_call_are_each_read_as_alone(parts: list[bytes], points: list[int]) -> None:
    # scan_stretches is scan_stretch of each stretch: None for one under 12 bytes or with nothing read,
    # False where scan_stretch gives None (the Python path), else the same tuple; cuts in any order
    assert SCAN is not None and SCAN_MANY is not None
    region = b"\n" + b"\n".join(parts) + b"\n"
    cuts = [min(p, len(region) + 5) for p in points[: len(points) // 2 * 2]] + [0, len(region)]
    many = SCAN_MANY(region, cuts, MAX_DURATION_S, b"")
    assert len(many) == len(cuts) // 2
    for (start, end), got in zip(zip(cuts[::2], cuts[1::2], strict=True), many, strict=True):
        alone = SCAN(region, start, end, MAX_DURATION_S)
        if min(end, len(region)) - max(start, 0) < 12:
            assert got is None
        elif alone is None:
            assert got is False
        elif not alone[0] and not alone[3]:
            assert got is None
        else:
            assert got == alone


def test_stretches_need_a_start_and_an_end_each() -> None:
    assert SCAN_MANY is not None
    with pytest.raises(ValueError):
        SCAN_MANY(b"\n", [0], MAX_DURATION_S, b"")
    with pytest.raises(TypeError):
        SCAN_MANY(b"\n", [0, "1"], MAX_DURATION_S, b"")


def test_a_stretch_with_the_literal_to_avoid_goes_to_the_python_path() -> None:
    assert SCAN_MANY is not None
    region = b"\n1 step training time: 0.5s\n40 steps training: 2.58s\n2 step training time: 0.5s\n"
    middle = region.index(b"40")
    cuts = [0, middle, middle, len(region), 0, len(region)]
    plain = SCAN_MANY(region, cuts, MAX_DURATION_S, b"")
    assert plain[0] is not None and plain[0] is not False  # the C path does not see the last-step form
    assert SCAN_MANY(region, cuts, MAX_DURATION_S, cloudml.LAST_STEP_LIT) == [plain[0], False, False]


def _literal_prefixes(ops) -> list[str]:
    """Every literal text a sequence of regex parser ops can begin with, up to its first op that is not
    a literal, a group or an optional group (alternatives and ``(?:...)?`` expanded)."""
    from re import _constants as c

    prefixes = [""]
    for op, arg in ops:
        if op is c.LITERAL:
            prefixes = [p + chr(arg) for p in prefixes]
        elif op is c.SUBPATTERN:
            prefixes = [p + q for p in prefixes for q in _literal_prefixes(arg[3])]
        elif op is c.BRANCH:
            prefixes = [p + q for p in prefixes for branch in arg[1] for q in _literal_prefixes(branch)]
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and arg[0] == 0 and arg[1] == 1:
            prefixes = [p + q for p in prefixes for q in ["", *_literal_prefixes(arg[2])]]
        else:
            return [p + "\x00" for p in prefixes]  # ends here: the rest is not literal
    return prefixes


STARTS = [s.decode("latin-1") for s in cloudml.RARE_STARTS]


def test_every_alternative_of_the_rare_lines_regex_begins_with_one_of_the_starts() -> None:
    from re import _parser

    parsed = list(_parser.parse(cloudml.RARE.pattern.decode("latin-1")))
    assert parsed[0] == (_parser.LITERAL, ord("\n"))  # a newline, then the look-ahead, then the lines
    prefixes = _literal_prefixes(parsed[2:])
    assert len(prefixes) >= 20
    for prefix in prefixes:
        assert any(prefix.startswith(s) for s in STARTS), prefix


def test_rare_lines_are_the_newlines_before_a_start() -> None:
    assert RARE_LINES is not None
    region = b"\nEpoch 1/2\nEpochs\n - Total: 5\n  - x\nTrain\n\n"
    assert RARE_LINES(region, cloudml.RARE_STARTS) == [0, 17, 35]  # not "Epochs", not "  - x"
    assert RARE_LINES(b"Epoch 1/2\n", cloudml.RARE_STARTS) == []  # a line start is after a newline
    assert RARE_LINES(b"\nEpo", cloudml.RARE_STARTS) == []
    with pytest.raises(TypeError):
        RARE_LINES(b"\n", (b"",))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100), st.integers(0, 7))
def test_newlines_are_counted_as_bytes_count_counts_them(data: bytes, offset: int) -> None:
    assert native.count_newlines is not None
    data = bytes(offset) + data.replace(b"\x00", b"\n")  # many newlines, at every alignment
    assert native.count_newlines(data) == data.count(b"\n")
    assert native.count_newlines(memoryview(data)[offset:]) == data[offset:].count(b"\n")


def test_find_all_finds_every_occurrence_not_overlapping() -> None:
    assert FIND_ALL is not None
    assert FIND_ALL(b"val_acc val_accval_acc", b"val_acc") == [0, 8, 15]
    assert FIND_ALL(b"aaaa", b"aa") == [0, 2]
    assert FIND_ALL(b"", b"a") == [] and FIND_ALL(b"a", b"ab") == []
    with pytest.raises(ValueError):
        FIND_ALL(b"a", b"")


def test_contains_is_in() -> None:
    assert CONTAINS is not None
    for data, literal in [(b"a:::MLLOG", b":::MLLOG"), (b"::MLLOG", b":::MLLOG"), (b"", b"x"), (b"x", b"")]:
        assert CONTAINS(data, literal) is (literal in data)


def test_newlines_are_counted_in_long_data_at_every_alignment() -> None:
    # the byte counters of the sixteen-at-a-time count are summed every 255 blocks: data longer than that,
    # all newlines (every counter at its top) and a random mixture, from every offset and to every end
    assert native.count_newlines is not None
    rng = random.Random(15)
    mixed = bytes(rng.choice(b"\n\nab\r") for _ in range(20_000))
    for data in (b"\n" * 20_000, mixed):
        for offset in range(17):
            for cut in (0, 1, 15, 16, 4080, 4081):
                part = memoryview(data)[offset : len(data) - cut]
                assert native.count_newlines(part) == bytes(part).count(b"\n")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from([b":::MLLOG", b"[MO833]", b"val_acc", b"ab", b"a", b"aba"]))
def test_literals_are_found_where_bytes_finds_them(noise: bytes, literal: bytes) -> None:
    # the sixteen-at-a-time search: the literal or pieces of it at every position, near either end
    assert FIND_ALL is not None and CONTAINS is not None
    pieces = [noise, literal, noise[:7], literal[:-1], literal, literal[1:], noise[3:]]
    data = b"".join(pieces)
    for start in range(min(len(data), 20)):
        for end in (len(data), len(data) - 1, len(data) - len(literal)):
            part = data[start:end]
            expected, pos = [], 0
            while (hit := part.find(literal, pos)) >= 0:
                expected.append(hit)
                pos = hit + len(literal)
            assert FIND_ALL(part, literal) == expected
            assert CONTAINS(part, literal) is (literal in part)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [b"Epoch 1/2", b"Epoc", b"E", b"on_epoch_end: 1", b"on_epoch", b"on_train_batch_begin: 1",
             b"Train", b"Trai", b" - Total: 5", b" -", b"", b"x", b"Test loss: 1", b"('Tempo de ", b"Tempo "]
        ),
        max_size=40,
    ),
    st.integers(0, 15),
)  # fmt: skip
def test_rare_lines_are_found_at_every_alignment(lines: list[bytes], pad: int) -> None:
    # the newlines are found sixteen bytes at a time and a line's first four bytes compared at once:
    # near-misses of the starts (a shorter prefix, "on_train" against "on_epoch_"), at every offset
    assert RARE_LINES is not None
    region = b"x" * pad + b"\n" + b"\n".join(lines)
    expected = [
        i for i in range(len(region) - 1)
        if region[i] == 10 and region[i + 1 :].startswith(cloudml.RARE_STARTS)
    ]  # fmt: skip
    assert RARE_LINES(region, cloudml.RARE_STARTS) == expected


def test_the_mllog_reader_skips_a_region_by_what_its_two_literals_begin_with() -> None:
    # MllogReader.feed looks for ":::" once, and for SYSJSON and TOKEN only where it is there
    from trainsweep.logs import mlperf

    assert mlperf.TOKEN.startswith(mlperf._COLONS) and mlperf.SYSJSON.startswith(mlperf._COLONS)


def test_a_stretch_reads_the_same_in_c_and_in_python_wherever_it_starts_and_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the colons that end the literals are found sixteen at a time: literals at the stretch's edges, a
    # colon at its first or last byte, "e: " that is neither literal, a stamp in the middle of a line
    from trainsweep.logs.lines import LineCounter

    region = (
        b"\n12 step training time: 0.25s\nReal time: 1596431472.93\non_train_batch_end: 1.5s\n"
        b"x time: 3\nETA: 3s - loss: 0.0167 - accuracy: 0.99\n13 step training time: 1.5e-02s\r\n"
        b"a Real time: 2.5\ne:\n14 step training time: 0.5\n"
    )

    def read(start: int, end: int, scan) -> tuple:
        monkeypatch.setattr(native, "scan_stretch", scan)
        reader = cloudml.CloudMLReader()
        reader._bulk(region, start, end, LineCounter(region, 0))
        ep = reader._cur
        stamps = (ep.real_time if ep is not None else reader._pending_rt).tolist()
        steps = (ep.step_s.tolist(), list(ep.step_numbers)) if ep is not None else None
        return steps, stamps, list(reader.problems)

    for start in range(0, len(region), 3):
        for end in range(start, len(region) + 1, 5):
            assert read(start, end, SCAN) == read(start, end, None), (start, end)
