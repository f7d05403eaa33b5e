"""Parse throughput and peak memory of trainsweep.logs.parse (a plain script, not a test).

    python benchmarks/bench_parse.py [--mb 200] [--gb 1.0] [--skip-memory]

(a) Throughput: every real log under ../shared/fixtures/real-data (cloud-ML and MO833, byte for byte),
    concatenated and repeated to about ``--mb`` MB in a temporary file. Measured on the same bytes:
    trainsweep's streaming parser, the baseline (the seed ``parse-exec-times.py`` algorithm re-created
    in benchmarks/seed_parse_baseline.py: a dozen regexes tried on every line), and ``grep -c`` as the
    physical bound. Prints MB/s of each and the ratio parser/baseline (target >= 20x).
(b) Peak memory: a ``--gb`` GB log generated in a temporary folder from real-log content (the epochs of
    every real cloud-ML log, renumbered into one long run), parsed in a child process; prints the
    child's ru_maxrss (target < 100 MB), next to a child that only imports the parser.
Temporary files are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
REAL = ROOT.parent / "shared" / "fixtures" / "real-data"
sys.path.insert(0, str(HERE))

from seed_parse_baseline import parse_lines  # noqa: E402

from trainsweep.logs import native, parse  # noqa: E402
from trainsweep.logs.spill import MEMORY_BUDGET_BYTES  # noqa: E402

GREP_PATTERN = "step training time|Real time|Epoch|Validation time|val_acc|MO833"


def real_logs() -> list[Path]:
    return sorted(
        p
        for p in REAL.glob("**/*")
        if p.is_file() and p.suffix in (".txt", ".out") and "execution-times" not in p.parts
    )


def build_corpus(path: Path, megabytes: float) -> int:
    """The real logs concatenated (each ends with a newline), repeated to ``megabytes`` MB."""
    parts = []
    for p in real_logs():
        data = p.read_bytes()
        parts.append(data if data.endswith(b"\n") else data + b"\n")
    block = b"".join(parts)
    target = int(megabytes * 1e6)
    written = 0
    with path.open("wb") as f:
        while written < target:
            f.write(block)
            written += len(block)
    return written


PARSER_C_FUNCTIONS = (
    "scan_stretch",
    "scan_stretches",
    "rare_lines",
    "find_all",
    "contains",
    "count_newlines",
)
"""The functions of :mod:`trainsweep.logs.native` that parsing calls (None: the Python path)."""


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: steadier than wall time on a shared machine."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def best_of(n: int, fn) -> tuple[float, float]:
    """Best CPU seconds and best wall seconds of ``n`` runs."""
    cpu = wall = float("inf")
    for _ in range(n):
        c, w = cpu_seconds(), time.perf_counter()
        fn()
        cpu, wall = min(cpu, cpu_seconds() - c), min(wall, time.perf_counter() - w)
    return cpu, wall


def throughput(tmp: Path, megabytes: float) -> None:
    corpus = tmp / "corpus.log"
    size = build_corpus(corpus, megabytes)
    mb = size / 1e6
    print(f"(a) throughput on {mb:.0f} MB: the {len(real_logs())} real logs concatenated and repeated")

    def run_parser() -> None:
        parse(corpus)

    def run_parser_python_path() -> None:
        # every C function the parser uses off, as TRAINSWEEP_PURE_PYTHON=1 leaves them (not the stretch
        # scanner alone: the rare lines, the literals and the newlines would still be found in C)
        saved = {name: getattr(native, name) for name in PARSER_C_FUNCTIONS}
        try:
            for name in saved:
                setattr(native, name, None)
            parse(corpus)
        finally:
            for name, function in saved.items():
                setattr(native, name, function)

    def run_baseline() -> None:
        with corpus.open("r", encoding="utf-8", errors="replace") as f:  # the original read sys.stdin
            parse_lines(f)

    env = dict(os.environ, LC_ALL="C")

    def run_grep() -> None:
        subprocess.run(
            ["grep", "-c", "-E", GREP_PATTERN, str(corpus)], check=True, capture_output=True, env=env
        )

    c_grep, w_grep = best_of(2, run_grep)
    c_parse, w_parse = best_of(2, run_parser)
    c_py, w_py = best_of(2, run_parser_python_path)
    c_base, w_base = best_of(1, run_baseline)
    print("    MB per CPU second (MB per wall second in brackets):")
    print(f"    grep -c -E '{GREP_PATTERN}': {mb / c_grep:8.1f}  ({mb / w_grep:.1f})  physical bound")
    scanner = "with the C scanner" if native.scan_stretch is not None else "C scanner NOT BUILT"
    print(f"    trainsweep.logs.parse:      {mb / c_parse:8.1f}  ({mb / w_parse:.1f})  {scanner}")
    print(f"    ... its Python path alone:  {mb / c_py:8.1f}  ({mb / w_py:.1f})  TRAINSWEEP_PURE_PYTHON=1")
    print(f"    baseline (seed algorithm):  {mb / c_base:8.1f}  ({mb / w_base:.1f})")
    print(
        f"    parse / baseline = {c_base / c_parse:.1f}x in CPU time, {w_base / w_parse:.1f}x in wall time "
        f"(target >= 20x); grep / parse = {c_parse / c_grep:.1f}x"
    )
    print(
        f"    Python path alone / baseline = {c_base / c_py:.1f}x in CPU time, "
        f"{w_base / w_py:.1f}x in wall time"
    )


_EPOCH_HDR = re.compile(rb"\nEpoch \d+/\d+\n")


def epoch_blocks() -> tuple[bytes, list[bytes]]:
    """A header (a real log's lines before its first epoch) and every real cloud-ML epoch block."""
    header = b""
    blocks: list[bytes] = []
    for p in real_logs():
        if "cloud-ML" not in p.parts:
            continue
        data = b"\n" + p.read_bytes()
        starts = [m.start() for m in _EPOCH_HDR.finditer(data)]
        if not starts:
            continue
        if not header and b"Tamanho do batch" in data[: starts[0]]:
            header = data[1 : starts[0] + 1]
        ends = [*starts[1:], data.rfind(b"\nEpoch time:")]
        for a, b in zip(starts, ends, strict=True):
            end = data.find(b"\n", b + 1) if b == ends[-1] else b
            block = data[a:end]
            block = block[block.index(b"\n", 1) + 1 :]  # without its own "Epoch N/M" line
            if b"Epoch time:" in block:
                blocks.append(block if block.endswith(b"\n") else block + b"\n")
    return header, blocks


def generate_log(path: Path, gigabytes: float) -> tuple[int, int]:
    """One long run of real epoch blocks (round robin over all real logs), renumbered 1..K."""
    header, blocks = epoch_blocks()
    target = int(gigabytes * 1e9)
    plan: list[int] = []
    size = len(header)
    i = 0
    while size < target:
        plan.append(i % len(blocks))
        size += len(blocks[i % len(blocks)]) + 16
        i += 1
    k = len(plan)
    written = 0
    with path.open("wb") as f:
        f.write(header)
        for n, b in enumerate(plan, 1):
            head = b"Epoch %d/%d\n" % (n, k)
            f.write(head)
            f.write(blocks[b])
            written += len(head) + len(blocks[b])
        f.write(b"Tempo do fit: 1.0\n")
    return written + len(header), k


# VmHWM is the child's own peak RSS; its ru_maxrss would also keep the peak of the process it was
# spawned from (Linux keeps the high-water mark across exec), so the memory test runs first, from a
# small parent, and both are printed.
CHILD = """
import resource, sys, time
from pathlib import Path
from trainsweep.logs import parse
t = time.perf_counter()
run = parse(sys.argv[1])
dt = time.perf_counter() - t
status = Path("/proc/self/status").read_text().splitlines()
hwm = next(int(x.split()[1]) for x in status if x.startswith("VmHWM"))
fields = ("_step_s", "step_numbers", "_real_time")
held = [sum(map(sys.getsizeof, {id(x): x for x in (getattr(e, a) for e in run.epochs)}.values()))
        for a in fields]  # in memory (a spilled epoch holds only where its values lie on disk); shared once
spilled = sum(e.spilled for e in run.epochs)
print(run.steps_total, len(run.epochs), len(run.real_time), run.status, dt, hwm,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, *held, spilled)
"""
FLOOR = """
from pathlib import Path
import trainsweep.logs
status = Path("/proc/self/status").read_text().splitlines()
print(next(int(x.split()[1]) for x in status if x.startswith("VmHWM")))
"""


def memory(tmp: Path, gigabytes: float) -> None:
    log = tmp / "long-run.log"
    size, epochs = generate_log(log, gigabytes)
    print(
        f"(b) peak memory parsing a generated {size / 1e9:.2f} GB log ({epochs} real epoch blocks, one run)"
    )
    out = subprocess.run([sys.executable, "-c", CHILD, str(log)], check=True, capture_output=True, text=True)
    fields = out.stdout.split()
    steps, n_epochs, stamps, status, dt, hwm_kb, maxrss_kb, times_b, numbers_b, stamps_b, spilled = fields
    floor = subprocess.run([sys.executable, "-c", FLOOR], check=True, capture_output=True, text=True)
    peak, floor_mb = int(hwm_kb) / 1024, int(floor.stdout) / 1024
    print(
        f"    parsed {int(steps):,} steps, {int(n_epochs):,} epochs, {int(stamps):,} wall-clock stamps "
        f"in {float(dt):.1f} s ({size / 1e6 / float(dt):.0f} MB/s), status {status}"
    )
    print(f"    peak RSS of the parsing child: {peak:.1f} MB (VmHWM; target < 100 MB)")
    maxrss = int(maxrss_kb) / 1024
    print(f"    its ru_maxrss: {maxrss:.1f} MB; a child that only imports the parser: {floor_mb:.1f} MB")
    print(
        f"    held by the run: step times {int(times_b) / 1e6:.1f} MB ({int(steps) * 8 / 1e6:.1f} MB of "
        f"8-byte values), step numbers {int(numbers_b) / 1e6:.1f} MB (a range per epoch where "
        f"consecutive), stamps {int(stamps_b) / 1e6:.1f} MB ({int(stamps) * 8 / 1e6:.1f} MB of values, "
        "held once)"
    )
    print(
        f"    {int(spilled):,} of {int(n_epochs):,} epochs had their step times and stamps moved to the "
        f"spill file (values beyond spill.MEMORY_BUDGET_BYTES = {MEMORY_BUDGET_BYTES >> 20} MiB)"
    )
    log.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the throughput corpus (MB)")
    ap.add_argument("--gb", type=float, default=1.0, help="size of the generated log for the memory test")
    ap.add_argument("--skip-memory", action="store_true")
    args = ap.parse_args()
    if not REAL.is_dir():
        sys.exit(f"real data not found at {REAL}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-parse-"))
    try:
        if not args.skip_memory:  # first, while this process is small (see CHILD)
            memory(tmp, args.gb)
        throughput(tmp, args.mb)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
