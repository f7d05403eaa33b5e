"""An axis the run did not honour: a setting whose ``dtype`` the run did not train in, or whose ``compile``
it did not do, is flagged on the run, in ``sweep.csv``'s notes, the best settings, the recommendation and
the report's data-quality findings; a run that honoured it, or whose log does not say, is not."""

from __future__ import annotations

import csv
import io

import pytest

from trainsweep import axes, honoured
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.report import sweep_csv, sweep_json
from trainsweep.report.analysis import analyse
from trainsweep.report.html import render_report

BF16_IGNORED = "dtype=bfloat16 not honoured: the run trained in float32"


@pytest.mark.parametrize(
    ("setting", "used", "compiled", "said"),
    [
        ({"dtype": "bfloat16"}, "float32", None, [BF16_IGNORED]),
        (
            {"precision": "bf16-mixed"},
            "float32",
            None,
            ["precision=bf16-mixed not honoured: the run trained in float32"],
        ),
        ({"dtype": "float32"}, "bfloat16", None, ["dtype=float32 not honoured: the run trained in bfloat16"]),
        ({"DType": 16}, "float16", None, []),
        ({"dtype": "bfloat16"}, "bfloat16", None, []),
        ({"dtype": "int8-dynamic"}, "float32", None, []),  # names no precision: not judged
        ({"dtype": "bfloat16"}, None, None, []),  # a log that does not say: not judged
        (
            {"compile": True},
            None,
            False,
            ["compile=true not honoured: the script never called torch.compile"],
        ),
        ({"compile": "false"}, None, True, ["compile=false not honoured: the script called torch.compile"]),
        ({"compile": True}, None, True, []),
        ({"compile": True}, "float32", None, []),  # a built-in: it compiles when asked, and does not say
        ({"lr": "small"}, "float32", False, []),
    ],
)
def test_a_setting_is_judged_against_what_the_run_record_says(setting, used, compiled, said) -> None:
    extra = {axes.PRECISION_KEY: used, axes.COMPILED_KEY: compiled}
    assert honoured.not_honoured(setting, {k: v for k, v in extra.items() if v is not None}) == said


def _run(name: str, step_s: float, dtype: str, used: str) -> RunTimings:
    extra = {axes.LOG_KEY: {"dtype": dtype}, axes.PRECISION_KEY: used, axes.COMPILED_KEY: False}
    epoch = Epoch(index=1, step_s=[step_s] * 6, epoch_s=step_s * 6)
    return RunTimings(name=name, dialect="mllog", batch_size=8, run_index=0, epochs=[epoch], extra=extra)


@pytest.fixture
def ignored() -> tuple:
    """A CPU sweep over dtype whose script trains in float32 whatever it is told: bfloat16 is the faster
    row by chance, and a float32 run under another name."""
    runs = [
        _run("f0", 0.2, "float32", "float32"),
        _run("b0", 0.19, "bfloat16", "float32"),
        _run("b1", 0.19, "bfloat16", "float32"),
    ]
    jobs = [
        {"run_name": r.name, "instance_type": "local", "batch_size": 8, "status": "completed"} for r in runs
    ]
    return analyse(runs, jobs=jobs, spec={"name": "s", "epochs": 1})


def test_the_run_and_its_row_carry_the_flag_and_sweep_csv_notes_it(ignored) -> None:
    flagged = {m.name: m.not_honoured for m in ignored.run_metrics}
    assert flagged == {"f0": [], "b0": [BF16_IGNORED], "b1": [BF16_IGNORED]}
    table = {t["dtype"]: t for t in csv.DictReader(io.StringIO(sweep_csv(ignored.rows).decode()))}
    assert f"{BF16_IGNORED} (2 of 2 runs)" in table["bfloat16"]["notes"]
    assert "not honoured" not in table["float32"]["notes"]


def test_the_best_setting_and_the_recommendation_say_it_was_not_honoured(ignored) -> None:
    (best,) = ignored.best_settings
    assert best["axes"] == {"dtype": "bfloat16"} and best["not_honoured"] == [BF16_IGNORED]
    assert any(
        line.startswith("Use local") and BF16_IGNORED in line for line in ignored.recommendation.sentences()
    )
    assert b"not_honoured" in sweep_json(ignored)


def test_the_report_page_flags_it_in_the_best_settings_and_the_data_quality_findings(ignored) -> None:
    page = render_report(ignored, {}).decode()
    best = page[page.index('id="best-settings-table"') : page.index('id="configurations"')]
    assert BF16_IGNORED in best
    quality = page[page.index('id="quality"') : page.index('id="runs"')]
    assert "setting-not-honoured" in quality and quality.count(BF16_IGNORED) == 2
