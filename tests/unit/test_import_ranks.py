"""Issue 12 item 5: per-rank log files of one run are one run with its ranks, not N runs.

Through the CLI (`trainsweep import`, `report`) on the shared seed-002 data and on small logs made here.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT
from trainsweep.artefacts import _json_safe
from trainsweep.cli import app
from trainsweep.cost import metrics
from trainsweep.logs import parse
from trainsweep.logs.model import RunTimings
from trainsweep.logs.ranks import merge_ranks

MO833 = "high-res-distributed/mo833-trabalho/experiment_results"
PRICES = {"c4x": 0.199, "c5x": 0.170}  # EC2 on-demand, as the seed used (trainsweep's EC2 table agrees)
PUBLISHED = {"c4x": 12162, "c5x": 55507}  # the seed's README (gabrielsribe/high-res-distributed)
runner = CliRunner()


def import_(src: Path, out: Path) -> dict:
    result = runner.invoke(app, ["import", str(src), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    return json.loads((out / "quality.json").read_text())


def sweep_rows(root: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((root / "sweep.csv").read_text())))


def mo833_log(rank: int, its: list[float], *, init: float = 10.0) -> bytes:
    lines = [f"[MO833] Rank,{rank},Initialization Time: {init}"]
    elapsed = init
    for i, t in enumerate(its):
        elapsed += t
        lines.append(f"[MO833] Rank,{rank},Epoch,0,Iteration,{i},It. time,{t:.4f},Elapsed time,{elapsed:.4f}")
    lines.append(f"[MO833] Rank,{rank},Epoch,0,Epoch time,{sum(its):.4f},Elapsed time,{elapsed + 0.01:.4f}")
    return ("\n".join(lines) + "\n").encode()


def write_ranks(folder: Path, ranks: dict[int, bytes], stem: str = "NODE-EXP-1625079915.44") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i, data in enumerate(ranks.values()):
        name = f"{stem}{36 + i}.out"  # launch timestamps: the last number differs, not as the rank
        (folder / name).write_bytes(data)
        names.append(name)
    return names


# ---- the real seed-002 data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def high_res(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("high-res")
    return import_(real_data / "high-res-distributed", out), out / "mo833-trabalho/experiment_results"


def test_the_rank_files_of_each_instance_are_one_run_with_its_ranks(high_res: tuple[dict, Path]) -> None:
    quality, results = high_res
    rank_runs = {r["run"]: r for r in quality["rank_runs"]}
    assert sorted(rank_runs) == ["c4x-TEST_NODE-TEST_EXPERIMENT_ID", "c5x-TEST_NODE-TEST_EXPERIMENT_ID"]
    assert sorted(rank_runs["c5x-TEST_NODE-TEST_EXPERIMENT_ID"]["files"]) == ["0", "1", "2"]
    assert all(
        r["results_root"] == "mo833-trabalho/experiment_results" and not r["problems"]
        for r in rank_runs.values()
    )
    # one run record per instance, holding every rank; the rank files made no runs of their own
    assert sorted(p.name for p in (results / "runs").iterdir()) == [f"{n}.json" for n in sorted(rank_runs)]
    c5 = RunTimings.from_record(
        json.loads((results / "runs/c5x-TEST_NODE-TEST_EXPERIMENT_ID.json").read_text())
    )
    assert sorted(c5.ranks) == [0, 1, 2] and c5.header.world_size == 3
    assert c5.total_s == 59.6940  # the last rank to end (rank 1), not rank 0's 59.6877
    assert not (results / "c4x").exists() and not (results / "c5x").exists()
    files = {f["path"].rsplit("/", 1)[1]: f for f in quality["files"]}
    assert files["TEST_NODE-TEST_EXPERIMENT_ID-1625080072.5994425.out"]["rank"] == 2
    assert {f["instance_type"] for f in files.values()} == {"ml.c4.xlarge", "ml.c5.xlarge"}
    assert all(f["instance_type"] == "ml.c5.xlarge" for name, f in files.items() if "1625080072" in name)
    assert quality["summary"]["files"] == 5 and quality["summary"]["problems"] == 0


def test_the_report_has_one_row_per_instance_type_with_iterations_per_dollar(
    high_res: tuple[dict, Path],
) -> None:
    _, results = high_res
    rows = sweep_rows(results)
    assert [(r["instance_type"], r["runs"]) for r in rows] == [("ml.c4.xlarge", "1"), ("ml.c5.xlarge", "1")]
    assert all(float(r["iterations_per_usd"]) > 0 for r in rows)
    html = (results / "report.html").read_text()
    assert "ml.c4.xlarge" in html and "ml.c5.xlarge" in html


def test_trainsweep_report_rebuilds_the_same_rows_from_the_merged_runs(high_res: tuple[dict, Path]) -> None:
    _, results = high_res
    before = sweep_rows(results)
    (results / "sweep.csv").unlink()
    result = runner.invoke(app, ["report", str(results)])
    assert result.exit_code == 0, result.output
    assert sweep_rows(results) == before


def test_the_merged_record_is_the_ranks_merged(real_data: Path, high_res: tuple[dict, Path]) -> None:
    quality, results = high_res
    for entry in quality["rank_runs"]:
        files = [
            (int(rank), path, parse(real_data / "high-res-distributed" / path))
            for rank, path in entry["files"].items()
        ]
        run = merge_ranks(files, entry["run"], [])
        expected = json.dumps(_json_safe(run.to_record()), indent=1) + "\n"
        assert (results / "runs" / f"{entry['run']}.json").read_text() == expected


def _seed_inputs(real_data: Path, vm: str) -> tuple[int, float, float]:
    """(ranks, init of rank 0, seconds per iteration from the epoch time of the last rank file in name
    order): the inputs the seed's formula took."""
    runs = [parse(f) for f in sorted((real_data / MO833 / vm).iterdir())]
    init = next(r.init_s for r in runs if 0 in r.ranks)
    last = runs[-1].epochs[0]
    return len(runs), init, last.epoch_s / last.steps


def iterations_per_dollar_table(real_data: Path, high_res: tuple[dict, Path]) -> dict[str, list[int]]:
    """Per instance: published, the seed's formula on its own data, corrected, trainsweep (sweep.csv),
    trainsweep x ranks."""
    _, results = high_res
    row = {r["instance_type"]: r for r in sweep_rows(results)}
    table = {}
    for vm, price in PRICES.items():
        ranks, init, step_s = _seed_inputs(real_data, vm)
        seed = (3600 / price * ranks - init) / (step_s / ranks)  # dollar-seconds x ranks: the seed's error
        corrected = metrics.iterations_per_usd(step_s, price, ranks=ranks, fixed_s=init)
        ours = float(row[f"ml.{vm[:2]}.xlarge"]["iterations_per_usd"])
        table[vm] = [PUBLISHED[vm], round(seed), round(corrected or 0), round(ours), round(ours * ranks)]
    return table


def test_the_docs_give_the_iterations_per_dollar_figures_this_data_gives(
    real_data: Path, high_res: tuple[dict, Path]
) -> None:
    table = iterations_per_dollar_table(real_data, high_res)
    assert table["c4x"][2] == 6077 and table["c5x"][2] == 11093  # the corrected figures of the issue
    text = (ROOT / "docs/analysis.md").read_text()
    for vm, figures in table.items():
        cells = " | ".join(f"{v:,}" for v in figures)
        assert re.search(rf"\| ml\.{vm[:2]}\.xlarge \| \d \| {re.escape(cells)} \|", text), (vm, cells)


# ---- the rule, on logs made here -------------------------------------------------------------------


def test_a_missing_rank_is_reported_and_the_run_made_from_the_others(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_ranks(src / "exp" / "c5x", {0: mo833_log(0, [6.0, 5.0, 5.0]), 2: mo833_log(2, [6.1, 5.1, 5.1])})
    result = runner.invoke(app, ["import", str(src), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    quality = json.loads((out / "quality.json").read_text())
    (entry,) = quality["rank_runs"]
    assert entry["files"].keys() == {"0", "2"}
    assert entry["problems"] == [
        "rank(s) 1 of 0-2 have no readable log file; the run is made from the 2 other rank(s)"
    ]
    assert "import.rank_incomplete" in result.output
    record = RunTimings.from_record(json.loads((out / "exp/runs/c5x-NODE-EXP.json").read_text()))
    assert sorted(record.ranks) == [0, 2] and record.header.world_size == 3
    assert [p.code for p in record.problems] == ["rank-missing"]
    assert [r["runs"] for r in sweep_rows(out / "exp")] == ["1"]


def test_a_broken_rank_file_is_reported_not_dropped(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    broken = b"[MO833] Rank,1,Initialization Time: 10.0\n[MO833] Rank,1,Epoch,0,Iter"  # cut mid-line
    names = write_ranks(src / "c4x", {0: mo833_log(0, [6.0, 5.0]), 1: broken, 2: mo833_log(2, [6.0, 5.0])})
    quality = import_(src, out)
    (entry,) = quality["rank_runs"]
    assert entry["files"].keys() == {"0", "2"} and entry["left_out"] == [f"c4x/{names[1]}"]
    assert any(names[1] in p and "gave no rank timings" in p for p in entry["problems"])
    assert any("rank(s) 1 of 0-2" in p for p in entry["problems"])
    files = {f["path"]: f for f in quality["files"]}
    assert [p["code"] for p in files[f"c4x/{names[1]}"]["problems"]][-1] == "import.rank_file_left_out"
    assert quality["summary"]["errors"] >= 1


def test_an_empty_rank_file_is_named_as_left_out(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    names = write_ranks(src / "c4x", {0: mo833_log(0, [6.0, 5.0]), 1: mo833_log(1, [6.0, 5.0]), 2: b""})
    quality = import_(src, out)
    (entry,) = quality["rank_runs"]
    assert entry["left_out"] == [f"c4x/{names[2]}"]
    assert any("skipped" in p and names[2] in p for p in entry["problems"])


def test_files_that_all_show_one_rank_are_repetitions_not_ranks(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "c4x").mkdir(parents=True)
    for i in range(3):  # MLPerf-style result_0 .. result_2: three runs, each of rank 0
        (src / "c4x" / f"result_{i}.txt").write_bytes(mo833_log(0, [6.0, 5.0 + i / 10]))
    quality = import_(src, out)
    assert quality["rank_runs"] == []
    assert [r["runs"] for r in sweep_rows(out / "c4x")] == ["3"]


def test_ranks_that_repeat_cannot_be_told_apart_and_are_said_so(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_ranks(src / "c4x", {0: mo833_log(0, [6.0, 5.0]), 1: mo833_log(1, [6.0, 5.1])})
    write_ranks(src / "c4x", {0: mo833_log(0, [6.0, 5.2])}, stem="NODE-EXP-1625079999.99")
    quality = import_(src, out)
    assert quality["rank_runs"] == []
    codes = [p["code"] for f in quality["files"] for p in f["problems"]]
    assert codes == ["import.ranks_ambiguous"] * 3


def test_rank_files_beside_other_runs_stay_in_their_folder(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write_ranks(src / "exp", {0: mo833_log(0, [6.0, 5.0]), 1: mo833_log(1, [6.0, 5.0])}, stem="train-rank")
    (src / "exp" / "other.out").write_bytes(mo833_log(0, [7.0, 6.0]))
    quality = import_(src, out)
    (entry,) = quality["rank_runs"]
    assert entry["results_root"] == "exp" and entry["run"] == "train-rank"
    assert sorted(p.name for p in (out / "exp/runs").iterdir()) == ["other.json", "train-rank.json"]


def mllog_rank_log(rank: int, world: int) -> bytes:
    """One rank's MLLOG events (what a launcher writing one file per rank leaves)."""
    from trainsweep.logs import mllog

    lines = [mllog.format_line(mllog.WORLD_SIZE, world, metadata={"rank": rank}, time_ms=1.0)]
    lines.append(
        mllog.format_line(mllog.EPOCH_START, None, metadata={"rank": rank, "epoch_num": 1}, time_ms=2.0)
    )
    for s in range(1, 4):
        step = {"step": s, "step_s": 0.5 + rank / 10, "data_wait_s": 0.1, "compute_s": 0.4}
        lines.append(
            mllog.format_line(mllog.STEP, step, metadata={"rank": rank, "epoch_num": 1}, time_ms=2.0 + s)
        )
    lines.append(
        mllog.format_line(mllog.EPOCH_TIME, 2.0, metadata={"rank": rank, "epoch_num": 1}, time_ms=6.0)
    )
    lines.append(
        mllog.format_line(mllog.EPOCH_STOP, None, metadata={"rank": rank, "epoch_num": 1}, time_ms=6.0)
    )
    return ("\n".join(lines) + "\n").encode()


def test_mllog_files_of_one_rank_each_merge_and_the_world_size_names_the_missing_rank(tmp_path: Path) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    (src / "job").mkdir(parents=True)
    for rank in (0, 1, 3):  # the header says 4 ranks: rank 2's file is missing
        (src / "job" / f"worker-{rank}.log").write_bytes(mllog_rank_log(rank, 4))
    quality = import_(src, out)
    (entry,) = quality["rank_runs"]
    assert entry["run"] == "job-worker" and entry["files"].keys() == {"0", "1", "3"}
    assert entry["problems"] == [
        "rank(s) 2 of 0-3 have no readable log file; the run is made from the 3 other rank(s)"
    ]
    run = RunTimings.from_record(json.loads((out / "runs/job-worker.json").read_text()))
    assert run.dialect == "mllog" and sorted(run.ranks) == [0, 1, 3]
