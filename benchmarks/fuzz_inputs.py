"""Seeded fuzzing of the public entry points with mutated real inputs (a plain script, run on demand).

    python benchmarks/fuzz_inputs.py [--logs 50000] [--specs 10000] [--seed 11] [--show 5]

Logs: windows of the real logs under ../shared/fixtures (cloud-ML, MO833, MLPerf v4.0 MLLOG), mutated
(bytes flipped, inserted, deleted, duplicated; numbers replaced by odd forms such as ``0x1p3``, ``1_000``,
``-0``, ``1e999`` or 5,000 digits; lines spliced from other logs; line ends changed; cut mid-line), each
parsed by ``trainsweep.logs.parse`` (one in ten with a spec's ``log_format``) and written as the run record
``trainsweep parse`` prints, then parsed again fed in random chunk sizes (the growing-log path): any
exception is *uncaught*, any record that differs is *chunking-dependent*.

Specs: the example specs under examples/, mutated as text (lines deleted, duplicated, values swapped
for odd ones) and as data (values replaced by other types, keys removed or added, then written as YAML
or JSON), each given to ``trainsweep.spec.plan_sweep`` and ``check_budget`` as ``trainsweep plan`` does:
the project's own errors (``TrainsweepError``) are clean refusals; anything else is *uncaught*.

Prints the counts, the inputs per second, and the first ``--show`` failures of each kind (with the seed
and index that reproduce them). Exit status 1 when anything was uncaught or chunking-dependent. CI runs
a 2,000-input slice (tests/unit/test_fuzz_slice.py).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"

from trainsweep.artefacts import iter_run_record  # noqa: E402
from trainsweep.errors import TrainsweepError  # noqa: E402
from trainsweep.logs import parse  # noqa: E402

ODD_NUMBERS = [
    b"0x1p3",
    b"1_000",
    b"-0",
    b"-0.0",
    b"+1",
    b"1e999",
    b"-1e999",
    b"1e-400",
    b"nan",
    b"NaN",
    b"inf",
    b"infinity",
    b"Infinity",
    b"1e",
    b"1.2.3",
    b".",
    b"",
    b"1" * 5000,
    b"9" * 19,
    b"0" * 30 + b"1",
    b"1.5e-02",
    b"4.1199e-04",
    b"0.0000e+00",
    b"1E+5",
    b"\xd9\xa3",
    b"\xef\xbc\x91",
    b"1 ",
    b" 1",
]
ODD_LINES = [
    b"step training time: 0.5s",
    b"7 step training time: ",
    b"40 steps training: 2.5s",
    b"Epoch 0/0",
    b"Epoch 99999999999999999999/1",
    b"Epoch time: 0x1p3s",
    b"Real time: 1_000",
    b"[MO833] Rank,x",
    b"[MO833] Rank,99999999999,Epoch,0,Iteration,0,It. time,1,Elapsed time,2",
    b':::MLLOG {"key": "trainsweep.step", "value": {"step": 1, "step_s": -0.0}, '
    b'"metadata": {"epoch_num": 2}}',
    b':::MLLOG {"key": "epoch_start", "time_ms": 1e999, "metadata": {"epoch_num": 1e999}}',
    b":::MLLOG " + b"[" * 5000,
    b"Traceback (most recent call last):",
    b"\x00" * 20,
    b"\x08" * 40,
]
LOG_FORMATS = [
    r"^(?P<step>\d+) step training time: (?P<step_s>\S+?)s?$",
    r"Real time: (?P<timestamp>\S+)",
    r"Epoch,(?P<epoch>\d+),Iteration,(?P<step>\d+),It\. time,(?P<step_s>[^,]+)",
]
_DIGITS = re.compile(rb"\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@cache
def real_logs() -> list[bytes]:
    folders = [FIXTURES / "real-data", FIXTURES / "mlperf-training-v4.0"]
    paths = sorted(
        p
        for f in folders
        for p in f.rglob("*")
        if p.is_file() and p.suffix in (".txt", ".out", ".log") and "execution-times" not in p.parts
    )
    return [p.read_bytes() for p in paths if p.stat().st_size > 0]


@cache
def example_specs() -> list[str]:
    return [p.read_text() for p in sorted((ROOT / "examples").rglob("*.yaml"))]


# ---- logs ----------------------------------------------------------------------------------------------


def mutate_log(rng: random.Random) -> bytes:
    logs = real_logs()
    src = rng.choice(logs)
    size = rng.choice((200, 1000, 4000, 12000))
    start = rng.randrange(max(1, len(src) - size))
    data = bytearray(src[start : start + size])
    for _ in range(rng.randint(1, 6)):
        kind = rng.randrange(9)
        pos = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # flip a byte
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:  # insert random bytes
            data[pos:pos] = rng.randbytes(rng.randint(1, 12))
        elif kind == 2:  # delete a range
            del data[pos : pos + rng.randint(1, 200)]
        elif kind == 3:  # duplicate a range
            data[pos:pos] = data[pos : pos + rng.randint(1, 400)]
        elif kind == 4:  # replace a number with an odd form
            numbers = list(_DIGITS.finditer(data))
            if numbers:
                m = rng.choice(numbers)
                data[m.start() : m.end()] = rng.choice(ODD_NUMBERS)
        elif kind == 5:  # splice lines from another log
            other = rng.choice(logs)
            at = rng.randrange(max(1, len(other) - 300))
            data[pos:pos] = other[at : at + rng.randint(1, 300)]
        elif kind == 6:  # an odd line
            data[pos:pos] = b"\n" + rng.choice(ODD_LINES) + b"\n"
        elif kind == 7:  # other line ends
            data = bytearray(data.replace(b"\n", rng.choice((b"\r\n", b"\r", b"\n\n"))))
        else:  # cut mid-line
            del data[pos:]
    return bytes(data)


def record_bytes(source, log_format: str | None) -> bytes:
    return b"".join(iter_run_record(parse(source, name="result-p3-1-256-e0.txt", log_format=log_format)))


def chunks(data: bytes, rng: random.Random) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        n = rng.choice((1, 2, 3, 7, 64, 1000, rng.randint(1, max(1, len(data)))))
        yield data[i : i + n]
        i += n


# ---- specs ---------------------------------------------------------------------------------------------

ODD_VALUES = [
    None,
    True,
    -1,
    0,
    2**70,
    1e308,
    float("nan"),
    "",
    "x" * 300,
    "ml.p3.2xlarge",
    [],
    {},
    [None],
    {"a": {"b": {"c": [1, [2, [3]]]}}},
    "1_000",
    "0x10",
    "-0",
    "*",
    "../../etc",
    "\u0000",
    [64] * 200,
]
ODD_TEXT = [
    "&a [*a, *a]",
    "!!python/object:os.system ls",
    "[" * 200,
    "{" * 200,
    "? ",
    "--- !!binary AAAA",
    "'",
    '"',
    "\t",
    "@",
    "%YAML 1.1",
    "<<: *x",
    "1e999",
    "0o17",
    ".nan",
    "~",
]


def mutate_spec(rng: random.Random) -> str:
    text = rng.choice(example_specs())
    if rng.random() < 0.5:
        lines = text.splitlines()
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(lines))
            kind = rng.randrange(4)
            if kind == 0:
                del lines[i]
            elif kind == 1:
                lines.insert(i, lines[i])
            elif kind == 2 and ":" in lines[i]:
                key = lines[i].split(":", 1)[0]
                lines[i] = f"{key}: {rng.choice(ODD_TEXT)}"
            else:
                lines.insert(i, rng.choice(ODD_TEXT))
        return "\n".join(lines) + "\n"
    data = yaml.safe_load(text)
    for _ in range(rng.randint(1, 3)):
        node, key = _pick(data, rng)
        if node is None:
            break
        kind = rng.randrange(3)
        if kind == 0:
            node[key] = rng.choice(ODD_VALUES)
        elif kind == 1 and isinstance(node, dict):
            node.pop(key, None)
        elif isinstance(node, dict):
            node[rng.choice(("extra", "workload", "budget_usd", "x" * 5))] = rng.choice(ODD_VALUES)
    if rng.random() < 0.5:
        return json.dumps(data, allow_nan=True) + "\n"
    return yaml.safe_dump(data, allow_unicode=True)


def _pick(data, rng: random.Random):
    """A random container inside ``data`` and one of its keys or indexes."""
    node, key = None, None
    cur = data
    for _ in range(rng.randint(1, 4)):
        if isinstance(cur, dict) and cur:
            node, key = cur, rng.choice(list(cur))
        elif isinstance(cur, list) and cur:
            node, key = cur, rng.randrange(len(cur))
        else:
            break
        cur = node[key]
    return node, key


def plan_spec(text: str) -> None:
    """What ``trainsweep plan`` does with a spec (no AWS call)."""
    from trainsweep.spec import check_budget, plan_sweep

    sweep = plan_sweep(text if "\n" in text else text + "\n", enforce_budget=False)
    json.dumps(sweep.to_dict())
    check_budget(sweep)


# ---- the run -------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    logs: int = 0
    specs: int = 0
    refused_specs: int = 0
    uncaught: list[str] = field(default_factory=list)
    chunk_dependent: list[str] = field(default_factory=list)
    spec_uncaught: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run(n_logs: int, n_specs: int, seed: int) -> Outcome:
    """Fuzz ``n_logs`` logs and ``n_specs`` specs; input ``i`` of each kind has its own generator, seeded
    ``f"{seed}-log-{i}"`` or ``f"{seed}-spec-{i}"``, so any one input can be made again alone."""
    out = Outcome()
    t = time.perf_counter()
    for i in range(n_logs):
        rng = random.Random(f"{seed}-log-{i}")
        data = mutate_log(rng)
        log_format = rng.choice(LOG_FORMATS) if rng.random() < 0.1 else None
        try:
            whole = record_bytes(data, log_format)
            pieces = record_bytes(chunks(data, rng), log_format)
        except Exception:  # counting what escapes is the point
            out.uncaught.append(f"log {i}: {traceback.format_exc(limit=-3)}")
            continue
        finally:
            out.logs += 1
        if pieces != whole:
            out.chunk_dependent.append(
                f"log {i}: {len(data)} bytes, first difference at {_diff(whole, pieces)}"
            )
    for i in range(n_specs):
        rng = random.Random(f"{seed}-spec-{i}")
        text = mutate_spec(rng)
        out.specs += 1
        try:
            plan_spec(text)
        except TrainsweepError:
            out.refused_specs += 1
        except Exception as exc:
            out.spec_uncaught.append(f"spec {i}: {type(exc).__name__}: {str(exc)[:200]}")
    out.seconds = time.perf_counter() - t
    return out


def _diff(a: bytes, b: bytes) -> str:
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return repr(a[max(0, k - 60) : k + 60])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=50_000)
    ap.add_argument("--specs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--show", type=int, default=5)
    args = ap.parse_args()
    if not FIXTURES.is_dir():
        sys.exit(f"fixtures not found at {FIXTURES}")
    out = run(args.logs, args.specs, args.seed)
    rate = (out.logs + out.specs) / out.seconds
    print(
        f"seed {args.seed}: {out.logs:,} mutated log snippets, {out.specs:,} mutated specs "
        f"in {out.seconds:.0f} s"
    )
    print(
        f"  logs:  {len(out.uncaught)} uncaught exceptions, "
        f"{len(out.chunk_dependent)} chunking-dependent records"
    )
    print(
        f"  specs: {len(out.spec_uncaught)} uncaught exceptions, {out.refused_specs:,} clean refusals "
        f"(SpecError/BudgetExceededError), "
        f"{out.specs - out.refused_specs - len(out.spec_uncaught):,} accepted"
    )
    print(f"  {rate:.0f} inputs per second")
    for title, items in (
        ("uncaught (logs)", out.uncaught),
        ("chunking-dependent", out.chunk_dependent),
        ("uncaught (specs)", out.spec_uncaught),
    ):
        for item in items[: args.show]:
            print(f"--- {title}: {item}")
    sys.exit(1 if out.uncaught or out.chunk_dependent or out.spec_uncaught else 0)


if __name__ == "__main__":
    main()
