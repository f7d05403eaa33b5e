"""benchmarks/bench_e2e_parse.py runs the real commands (the seed's own parse-exec-times.py, ``trainsweep
parse``, ``trainsweep import``) as subprocesses on the same bytes and prints the figures the docs quote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FCN = "cloud-ML/seismic-fcn/experimental_results/2020-06-FCN-on-sagemaker"


@pytest.mark.slow
def test_the_benchmark_measures_both_commands_and_the_seed_script_in_one_run(
    real_data: Path, tmp_path: Path
) -> None:
    src = tmp_path / "logs"
    src.mkdir()
    for name in ("result-p3-1-256-e0.txt", "result-p3-1-256-e1.txt", "result-p3-1-512-e0.txt"):
        (src / name).symlink_to(real_data / FCN / "logs" / name)  # read in place, never copied
    results = tmp_path / "results.json"
    args = ["--mb", "1", "--repeat", "1", "--import-src", str(src), "--json", str(results)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/bench_e2e_parse.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    figures = json.loads(results.read_text())
    assert proc.returncode == (1 if figures["targets_missed"] else 0), proc.stderr
    assert (figures["kind"], figures["schema_version"]) == ("trainsweep.bench.e2e_parse", 1)
    parse, imported = figures["parse"], figures["import"]
    assert parse["corpus_mb"] > 10  # every real log once (the smallest corpus)
    assert parse["seed_output_mb"] > 1 and parse["parse_output_mb"] > 1  # both really wrote their JSON
    assert parse["ratio_wall"] == pytest.approx(parse["seed_wall_s"] / parse["parse_wall_s"])
    assert parse["ratio_cpu"] == pytest.approx(parse["seed_cpu_s"] / parse["parse_cpu_s"])
    assert imported["logs"] == 3
    assert imported["logs_per_s"] == pytest.approx(3 / imported["wall_s"])
    out = proc.stdout
    assert "seed parse-exec-times.py" in out and "trainsweep parse LOG > out.json" in out
    assert f"{parse['ratio_wall']:.1f}x in wall time" in out
    assert f"{imported['mb_per_s']:.2f} MB/s, {imported['logs_per_s']:.2f} logs/s" in out
