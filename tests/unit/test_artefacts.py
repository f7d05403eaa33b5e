"""Per-run artefacts: paths from the layout, deterministic bytes, the step-time plot."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from trainsweep import layout
from trainsweep.artefacts import run_artefacts, run_record_bytes
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.plots import run as plots_run
from trainsweep.plots.run import step_times_figure, step_times_png
from trainsweep.summary import dumps_seed_json, seed_json, seed_summary

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def make_run(n_epochs: int = 3, **kwargs) -> RunTimings:
    run = RunTimings(name=kwargs.pop("name", "result-p3-1-512-e2"), **kwargs)
    for i in range(n_epochs):
        steps = [2.0 if i == 0 else 0.1] + [0.1 + 0.001 * k for k in range(20)]
        run.epochs.append(
            Epoch(
                index=i + 1,
                step_s=array("d", steps),
                step_numbers=array("l", range(1, len(steps) + 1)),
                validation_s=0.2,
                epoch_s=sum(steps) + 0.2,
            )
        )
    return run


@pytest.fixture
def cell_run() -> RunTimings:
    return make_run(computing_system="p3-1", batch_size=512, run_index=2, total_s=12.0, init_s=1.0)


def test_a_run_with_a_known_cell_gets_the_seed_outputs_and_its_record(cell_run: RunTimings) -> None:
    out = run_artefacts(cell_run)
    assert set(out) == {
        layout.execution_times_path("p3-1", 512, 2, "json"),
        layout.execution_times_path("p3-1", 512, 2, "summary"),
        layout.execution_times_path("p3-1", 512, 2, "png"),
        layout.run_record_path("result-p3-1-512-e2"),
    }
    assert set(out) >= {"execution-times/p3-1/512/e2.json", "runs/result-p3-1-512-e2.json"}


def test_the_seed_files_hold_the_seed_json_and_summary(cell_run: RunTimings) -> None:
    out = run_artefacts(cell_run)
    assert out["execution-times/p3-1/512/e2.json"].decode() == dumps_seed_json(seed_json(cell_run))
    assert out["execution-times/p3-1/512/e2.summary"].decode() == seed_summary(cell_run)
    assert out["execution-times/p3-1/512/e2.png"].startswith(PNG_SIGNATURE)


def test_the_run_record_reads_back_into_the_same_run(cell_run: RunTimings) -> None:
    record = json.loads(run_artefacts(cell_run)["runs/result-p3-1-512-e2.json"])
    back = RunTimings.from_record(record)
    assert back.flat_steps() == cell_run.flat_steps()
    assert (back.computing_system, back.batch_size, back.run_index) == ("p3-1", 512, 2)


def test_the_same_run_gives_the_same_bytes(cell_run: RunTimings) -> None:
    assert run_artefacts(cell_run) == run_artefacts(make_run(**_cell_kwargs(cell_run)))


def _cell_kwargs(run: RunTimings) -> dict:
    return {
        "computing_system": run.computing_system,
        "batch_size": run.batch_size,
        "run_index": run.run_index,
        "total_s": run.total_s,
        "init_s": run.init_s,
    }


@pytest.mark.parametrize("missing", ["computing_system", "batch_size", "run_index"], ids=lambda m: f"no-{m}")
def test_a_run_without_vmtype_bs_and_index_only_gets_its_record(cell_run: RunTimings, missing: str) -> None:
    setattr(cell_run, missing, None)
    assert list(run_artefacts(cell_run)) == ["runs/result-p3-1-512-e2.json"]


def test_non_finite_values_still_give_valid_json(cell_run: RunTimings) -> None:
    cell_run.epochs[1].step_s[3] = float("inf")
    cell_run.real_time = [1.0, float("nan")]
    text = run_record_bytes(cell_run).decode()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text)["real_time"] == [1.0, None]
    seed = run_artefacts(cell_run)["execution-times/p3-1/512/e2.json"]
    assert len(json.loads(seed)["epochs"]["2"]["steps"]) == 20


def test_step_time_plot_has_one_line_per_epoch_and_labelled_axes(cell_run: RunTimings) -> None:
    fig = step_times_figure(cell_run)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 3
    assert ax.get_xlabel() == "Step within epoch"
    assert ax.get_ylabel() == "Step time (s)"
    assert ax.get_yscale() == "log"
    assert "p3-1" in ax.get_title() and "512" in ax.get_title()
    assert list(ax.get_lines()[1].get_ydata()) == list(cell_run.epochs[1].step_s)


def test_step_time_plot_of_many_epochs_has_no_overlong_legend() -> None:
    fig = step_times_figure(make_run(30))
    assert fig.axes[0].get_legend() is None
    (lines,) = [a for a in fig.axes[0].get_children() if isinstance(a, plots_run._EpochLines)]
    assert len(lines._epochs) == 30  # drawn one after the other by one reused Line2D


@pytest.mark.parametrize("epochs", [11, 30])
def test_step_time_plot_of_many_epochs_is_the_same_png_as_one_line2d_per_epoch(
    epochs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run(epochs)
    run.epochs[3].step_s = array("d", [0.5] * 7)  # a short epoch: drawn with markers
    streamed = step_times_png(run)
    monkeypatch.setattr(plots_run, "_LINE2D_MAX_EPOCHS", 10**9)
    assert step_times_png(run) == streamed
    run.epochs[5].step_s = array("d", [0.0] * 3)  # not all positive: linear scale
    streamed = step_times_png(run)
    monkeypatch.setattr(plots_run, "_LINE2D_MAX_EPOCHS", 10)
    assert step_times_png(run) == streamed


def test_step_time_plot_of_a_run_without_steps_says_so() -> None:
    run = RunTimings(name="empty")
    fig = step_times_figure(run)
    assert any("no step times" in t.get_text() for t in fig.axes[0].texts)
    assert step_times_png(run).startswith(PNG_SIGNATURE)


def test_a_log_without_step_times_gets_no_seed_timings(cell_run: RunTimings) -> None:
    cell_run.epochs = []
    cell_run.status = "failed"
    assert list(run_artefacts(cell_run)) == ["runs/result-p3-1-512-e2.json"]


def test_a_trainsweep_container_log_gets_seed_outputs_from_rank_0(mllog_log) -> None:
    from trainsweep.logs import parse

    run = parse(mllog_log(epochs=2, steps=3, ranks=2), name="sweep1-g4dn-1-64-e0")
    out = run_artefacts(run)
    seed = json.loads(out["execution-times/g4dn-1/64/e0.json"])
    assert seed["epochs"]["1"] == {
        "steps": {"1": 0.5, "2": 0.5, "3": 0.5},  # rank 0 (rank 1 took 1.5 s a step)
        "validation_accuracy": 0.51,
        "validation_time": 0.25,
        "epoch_time": 2.0,
    }
    assert (seed["init"], seed["fit_time"], seed["batch_size"]) == (1.5, 4.5, "64")
    record = json.loads(out["runs/sweep1-g4dn-1-64-e0.json"])
    assert sorted(record["ranks"]) == ["1"]  # rank 0 is the record's own epochs
    assert "Number of steps: 6.000000" in out["execution-times/g4dn-1/64/e0.summary"].decode()


# ---- streamed writing: the same bytes as the dict-based texts, spilled epochs included --------------

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "real-data"


def _dict_based(run: RunTimings) -> dict[str, bytes]:
    """run_artefacts as it was written before streaming: whole dicts, then json.dumps."""
    from trainsweep.artefacts import _json_safe, seed_paths
    from trainsweep.summary import format_seed_summary

    out: dict[str, bytes] = {}
    paths = seed_paths(run)
    if paths is not None and run.steps_total > 0:
        data = seed_json(run)
        out[paths["json"]] = dumps_seed_json(data).encode()
        out[paths["summary"]] = format_seed_summary(data).encode()
    record = json.dumps(_json_safe(run.to_record()), indent=1, allow_nan=False) + "\n"
    out[layout.run_record_path(run.name)] = record.encode()
    return out


def _real_logs() -> list[Path]:
    return sorted(p for p in REAL.rglob("*") if p.is_file() and p.suffix in (".txt", ".out", ".log"))


def _streamed(run: RunTimings) -> dict[str, bytes]:
    """run_artefacts without the PNG (drawn the same way before and after: tested apart)."""
    from trainsweep.artefacts import iter_run_record, seed_paths
    from trainsweep.summary import iter_seed_json, iter_seed_summary

    out: dict[str, bytes] = {}
    paths = seed_paths(run)
    if paths is not None and run.steps_total > 0:
        out[paths["json"]] = "".join(iter_seed_json(run)).encode()
        out[paths["summary"]] = "".join(iter_seed_summary(run)).encode()
    out[layout.run_record_path(run.name)] = b"".join(iter_run_record(run))
    return out


def test_every_real_log_streams_the_dict_based_bytes_also_with_every_epoch_on_disk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainsweep.logs import parse, spill

    logs = _real_logs()
    assert len(logs) > 100
    for log in logs:
        run = parse(log)
        expected = _dict_based(run)
        assert _streamed(run) == expected, log
        monkeypatch.setattr(spill, "MEMORY_BUDGET_BYTES", 0)
        spilled = parse(log)
        monkeypatch.undo()
        assert all(e.spilled for e in spilled.epochs[:-1] if e.steps), log
        assert _streamed(spilled) == expected, log


def test_a_long_generated_run_with_spilled_epochs_gives_the_same_artefacts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainsweep.logs import parse, spill

    header, blocks = _epoch_blocks()
    log = header + b"".join(b"Epoch %d/40\n" % (i + 1) + blocks[i % len(blocks)] for i in range(40))
    run = parse(log, name="result-p3-1-64-e1.txt")
    assert len(run.epochs) == 40 and not any(e.spilled for e in run.epochs)
    monkeypatch.setattr(spill, "MEMORY_BUDGET_BYTES", 0)
    spilled = parse(log, name="result-p3-1-64-e1.txt")
    assert all(e.spilled for e in spilled.epochs)
    expected = run_artefacts(run)
    assert set(expected) == {
        "execution-times/p3-1/64/e1.json",
        "execution-times/p3-1/64/e1.summary",
        "execution-times/p3-1/64/e1.png",
        "runs/result-p3-1-64-e1.json",
    }
    assert run_artefacts(spilled) == expected
    assert {k: v for k, v in expected.items() if not k.endswith(".png")} == _dict_based(run)


def _epoch_blocks() -> tuple[bytes, list[bytes]]:
    from bench_parse import epoch_blocks

    return epoch_blocks()


def test_a_run_record_with_every_kind_of_value_streams_the_json_dumps_bytes() -> None:
    from trainsweep.artefacts import _json_safe
    from trainsweep.logs.model import JoinedStamps, Problem, RunHeader

    e1 = Epoch(
        1,
        step_s=array("d", [0.5, float("nan"), 0.25]),
        step_numbers=range(1, 4),
        data_wait_s=array("d", [0.1, 0.2, float("inf")]),
        compute_s=array("d", [0.3, 0.3, 0.3]),
        validation_s=float("nan"),
        real_time=array("d", [1e9, 1e9 + 1]),
    )
    e2 = Epoch(2, step_s=array("d"), real_time=[])
    run = RunTimings(
        name="x",
        header=RunHeader(instance_type="ml.p3.2xlarge", command_line='train.py --x "é"'),
        init_s=float("inf"),
        real_time=JoinedStamps([e1, e2, [1e9 + 5]]),
        epochs=[e1, e2],
        ranks={0: [], 1: [Epoch(1, step_s=array("d", [1.0]))]},
        prediction={"p": [1, 2.5, None]},
        extra={"ns.key": {"nested": [1, {"a": float("nan")}]}, "empty": {}, "int_keys": {1: 2}},
        problems=[Problem("c", "m\nline", 3)],
    )
    run.ranks[0] = run.epochs
    expected = json.dumps(_json_safe(run.to_record()), indent=1, allow_nan=False) + "\n"
    assert run_record_bytes(run) == expected.encode()


def _labelled_yticks(fig) -> list[float]:
    """The major ticks inside the y axis's view that carry a label."""
    (ax,) = fig.axes
    lo, hi = ax.get_ylim()
    locs = [float(v) for v in ax.yaxis.get_major_locator()() if lo <= v <= hi]
    labels = ax.yaxis.get_major_formatter().format_ticks(locs)
    return [v for v, text in zip(locs, labels, strict=True) if text]


def test_a_step_time_log_axis_within_one_decade_gets_three_labelled_ticks() -> None:
    # steps of 0.03-0.09 s with a 0.15 s first step: one power of ten (0.1) at most inside
    run = RunTimings(
        name="narrow",
        epochs=[
            Epoch(i, array("d", [0.15] + [0.03 + 0.06 * k / 19 for k in range(20)]), array("l", range(1, 22)))
            for i in (1, 2)
        ],
    )
    fig = step_times_figure(run)
    assert fig.axes[0].get_yscale() == "log"
    ticks = _labelled_yticks(fig)
    assert len(ticks) >= 3, ticks
    assert [t for t in ticks if 0.03 <= t <= 0.15] == ticks


def test_step_times_that_span_too_little_for_a_log_axis_get_a_linear_one() -> None:
    run = RunTimings(name="flat", epochs=[Epoch(1, array("d", [0.100, 0.101, 0.102]), array("l", [1, 2, 3]))])
    fig = step_times_figure(run)
    assert fig.axes[0].get_yscale() == "linear"
    assert len(_labelled_yticks(fig)) >= 3
