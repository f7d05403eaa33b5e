"""ParseRun's memory does not grow with the artefacts of the log it parses (issue 13 item 3).

The 1 GB log of the issue (1.3 GB peak against the function's 1,024 MB) takes minutes on this machine:
``benchmarks/bench_parse_run_memory.py`` measures it. Here the same harness runs the real handler in a
child process on a 100 MB log in moto's S3 server (run by this process, so the emulator's copies do not
count) and reads the child's peak RSS. What the log adds over a 0.5 MB log (every import, every client) must
stay under the function's memory scaled to the log (1,024 MB for 1 GB): the old handler held every
artefact in memory at once (0.8x the log, the largest one twice while it was joined): 134 MB over the
floor here against a cap of 92 MB, 1.3 GB for the 1 GB log.
"""

from __future__ import annotations

from pathlib import Path

import bench_parse_run_memory as bench
import pytest

pytestmark = pytest.mark.slow


def test_parse_run_streams_the_artefacts_of_a_long_log_in_bounded_memory(tmp_path: Path) -> None:
    if not bench.REAL.is_dir():
        pytest.fail(f"real data fixtures not found at {bench.REAL}")
    figures = bench.measure(tmp_path, 0.1)
    big, floor = figures["big"], figures["floor"]
    assert figures["artefacts_mb"] > 0.7 * figures["log_mb"]  # the artefacts are as large as claimed
    assert len(big["written"]) == 4  # e1.json, e1.summary, e1.png, the run record
    # The function's memory, scaled to this log: were the peak to grow with the log at this rate, a
    # 1 GB log would still fit in the function's 1,024 MB.
    growth = big["peak_mb"] - floor["peak_mb"]
    cap = (bench.FUNCTION_MB - floor["peak_mb"]) * figures["log_mb"] / 1000
    assert growth < cap, (
        f"ParseRun's peak grew by {growth:.0f} MB over the floor ({floor['peak_mb']:.0f} MB) on a "
        f"{figures['log_mb']:.0f} MB log ({figures['artefacts_mb']:.0f} MB of artefacts), over the "
        f"scaled cap of {cap:.0f} MB"
    )
