"""``trainsweep parse`` of a crafted log in a fresh interpreter: its peak memory stays bounded (the rest of
the hardening: tests/unit/test_logs_hardening.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PEAK_OF_THE_CLI = """
import sys
from pathlib import Path
from trainsweep.cli import app
sys.argv = ["trainsweep", "parse", sys.argv[1]]
try:
    app()
except SystemExit:
    pass
status = Path("/proc/self/status").read_text().splitlines()
print(next(int(x.split()[1]) for x in status if x.startswith("VmHWM")), file=sys.stderr)
"""


def test_parse_of_a_crafted_log_of_a_rank_per_line_stays_within_the_memory_goal(tmp_path: Path) -> None:
    """Goal: peak < 150 MB + 1x the log (the old parser took about 15x a log of a new rank per line)."""
    log = tmp_path / "ranks.out"
    with log.open("wb") as f:
        for start in range(0, 200_000, 10_000):
            f.write(
                b"".join(
                    b"[MO833] Rank,%d,Epoch,0,Iteration,0,It. time,1.5,Elapsed time,2\n" % r
                    for r in range(start, start + 10_000)
                )
            )
    size_mb = log.stat().st_size / 2**20
    out = subprocess.run(
        [sys.executable, "-c", PEAK_OF_THE_CLI, str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    peak_mb = int(out.stderr.split()[-1]) / 1024
    assert peak_mb < 150 + size_mb, f"{peak_mb:.0f} MB for a {size_mb:.0f} MB log"
