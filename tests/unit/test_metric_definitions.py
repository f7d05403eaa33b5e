"""Metrics from a script's output (``workload.metric_definitions``) and the script's words in a failure:
refused at plan when unusable, matched line by line into evaluation events, ranked in the report (a loss
to go below as well as an accuracy to reach), and said when they never matched."""

from __future__ import annotations

import csv
import io
import json
from array import array
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainsweep import layout
from trainsweep.cli import app
from trainsweep.errors import SpecError
from trainsweep.logs import mllog, parse
from trainsweep.logs.model import Epoch, RunTimings
from trainsweep.spec import load_spec, plan_sweep
from trainsweep.training import contract
from trainsweep.training.metric_lines import MetricDefinition, MetricWatcher, TargetRule, regex_problem
from trainsweep.training.output import script_words, with_script_words

runner = CliRunner()


# ---- plan ---------------------------------------------------------------------------------------------


def _spec(tmp_path: Path, regex: str = r"val loss ([0-9.]+)", **extra: Any) -> dict[str, Any]:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return {
        "name": "m",
        "workload": {
            "entry_point": str(tmp_path / "train.py"),
            "metric_definitions": [{"name": "val_loss", "regex": regex}],
        },
        "instance_types": ["ml.m5.xlarge"],
        "batch_sizes": [8],
        **extra,
    }


@pytest.mark.parametrize(
    ("regex", "says"),
    [
        ("val loss (", "invalid regular expression: missing ), unterminated subpattern"),
        ("val loss [0-9.]+", "no group: put the value in parentheses"),
        (r"(\d+)+x", "a repetition inside a repetition (like (a+)+) can take exponential time"),
        (r"(?:a|\w+)*:(\d)", "a repetition inside a repetition"),
        (r".*a.*b.*c.*([0-9])", "more than 3 open-ended repetitions"),
    ],
)
def test_an_unusable_regex_is_refused_at_plan(tmp_path, regex, says):
    with pytest.raises(SpecError) as err:
        plan_sweep(_spec(tmp_path, regex), sweep_id="m-1")
    assert "workload.metric_definitions[0].regex" in str(err.value) and says in str(err.value)


def test_plan_refuses_an_unusable_regex_through_the_cli(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_spec(tmp_path, r"(a*)*(\d)")))
    result = runner.invoke(app, ["plan", str(spec)])
    assert result.exit_code != 0
    assert "repetition inside a repetition" in result.output


def test_the_usual_shapes_of_metric_lines_are_accepted():
    for regex in (
        r"val_acc: ([0-9.]+)",
        r"val loss ([-+0-9.eE]+)",
        r'"eval_loss": ([0-9.]+)',
        r".*loss=(\S+)",
    ):
        assert regex_problem(regex) is None, regex


def test_the_job_carries_the_definitions_and_a_loss_target_with_its_direction(tmp_path):
    plan = plan_sweep(_spec(tmp_path, target={"metric": "val_loss", "value": 1.2}), sweep_id="m-1")
    hyper = plan.to_dict()["jobs"][0]["hyperparameters"]
    assert json.loads(hyper[contract.METRIC_DEFINITIONS]) == [
        {"name": "val_loss", "regex": r"val loss ([0-9.]+)"}
    ]
    assert TargetRule.from_json(hyper[contract.TARGET]) == TargetRule("val_loss", 1.2, "minimize")


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"target": {"metric": "val_f1", "value": 0.5}}, "target.metric", "'val_f1' is not measured"),
        ({"target": {"metric": "val_loss", "value": 1, "direction": "sideways"}}, "target.direction", ""),
    ],
)
def test_a_target_names_a_measured_metric_and_a_direction(tmp_path, change, field, says):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, **change))
    assert field in str(err.value) and says in str(err.value)


def test_metric_definitions_belong_to_a_script(tmp_path):
    spec = _spec(tmp_path)
    spec["workload"] = {"model": "mnist-cnn", "metric_definitions": spec["workload"]["metric_definitions"]}
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert "a built-in model reports its own eval_accuracy" in str(err.value)
    twice = _spec(tmp_path)
    twice["workload"]["metric_definitions"] *= 2
    with pytest.raises(SpecError, match="'val_loss' is defined twice"):
        load_spec(twice)


# ---- matching -----------------------------------------------------------------------------------------


def _epoch_line(key: str, epoch: int) -> str:
    return mllog.format_line(key, None, metadata={"rank": 0, "epoch_num": epoch})


def test_a_match_is_an_evaluation_of_the_epoch_stdout_was_in_when_it_was_printed(tmp_path):
    log = tmp_path / "run.log"
    defs = [
        MetricDefinition("val_acc", r"val_acc: ([0-9.]+)"),
        MetricDefinition("val_loss", r"loss ([0-9.]+)"),
    ]
    w = MetricWatcher(defs, log)
    w.line("stdout", "val_acc: 0.1")  # before any epoch: a sanity check, not an evaluation
    w.line("stdout", _epoch_line(mllog.EPOCH_START, 1))
    w.line("stdout", "epoch 1 val_acc: 0.5 loss 2.5")
    w.line("stdout", _epoch_line(mllog.EPOCH_STOP, 1))
    w.line("stderr", "INFO eval loss 1.5")  # after the epoch closed: still its evaluation
    w.line("stdout", "val_acc: not-a-number")
    w.line("stdout", mllog.format_line(mllog.EVAL_ACCURACY, 0.99, metadata={"epoch_num": 1}))  # our own echo
    events = [json.loads(ln.split(" ", 1)[1]) for ln in log.read_text().splitlines()]
    got = [(e["key"], e["value"], e["metadata"]["epoch_num"]) for e in events]
    assert got == [
        ("eval_accuracy", 0.5, 1),
        ("trainsweep.metric.val_loss", 2.5, 1),
        ("trainsweep.metric.val_loss", 1.5, 1),
    ]
    assert w.matched == {"val_acc": 2, "val_loss": 2}


def test_a_long_line_is_matched_on_its_first_characters_only(tmp_path):
    w = MetricWatcher([MetricDefinition("val_acc", r"val_acc: ([0-9.]+)")], tmp_path / "run.log")
    w.line("stdout", _epoch_line(mllog.EPOCH_START, 1))
    w.line("stdout", "x" * 5000 + " val_acc: 0.5")
    assert w.unmatched() == ["val_acc"]


# ---- the script's words --------------------------------------------------------------------------------

ARGPARSE = [
    "usage: main.py [-h] [--batch_size N] [--use-optimizer]",
    "main.py: error: unrecognized arguments: true",
    "trainsweep: the script exited with code 2 before its first training step",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/opt/ml/code/train.py", line 12, in <module>',
    "    exec(open('configurator.py').read())",
    '  File "<string>", line 31, in <module>',
    "    assert not arg.startswith('--')",
    "AssertionError",
    ':::MLLOG {"key": "trainsweep.failure"}',
]


def test_the_last_lines_of_stderr_are_the_scripts_words_without_trainsweeps_own():
    assert script_words(ARGPARSE) == (
        "usage: main.py [-h] [--batch_size N] [--use-optimizer] | "
        "main.py: error: unrecognized arguments: true"
    )
    reason = with_script_words("the script exited with code 2 before its first training step", ARGPARSE)
    assert reason.endswith("; the script said: usage: main.py [-h] [--batch_size N] [--use-optimizer] | "
                           "main.py: error: unrecognized arguments: true")  # fmt: skip


def test_an_exception_is_given_with_its_last_frame():
    assert (
        script_words(TRACEBACK)
        == "AssertionError (at <string>:31 in <module>: assert not arg.startswith('--'))"
    )
    # the bootstrap's own reason for it ("Type: message") gets the frame added, not repeated
    assert with_script_words("AssertionError: ", TRACEBACK) == (
        "AssertionError: (at <string>:31 in <module>: assert not arg.startswith('--'))"
    )


def test_code_run_by_exec_is_placed_by_the_frame_that_ran_it():
    # nanoGPT's configurator, given --batch_size 32 (Python 3.11's output, markers under the source)
    tail = [
        "Traceback (most recent call last):",
        '  File "/opt/ml/code/train.py", line 77, in <module>',
        "    exec(open('configurator.py').read()) # overrides from command line or config file",
        "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        '  File "<string>", line 23, in <module>',
        "AssertionError",
    ]
    assert with_script_words("AssertionError: ", tail) == (
        "AssertionError: (at <string>:23 in <module>, called from train.py:77 in <module>: "
        "exec(open('configurator.py').read()) # overrides from command line or config file)"
    )


def test_a_reason_without_stderr_stays_as_it_is():
    assert with_script_words("training worker exited with code 1", []) == "training worker exited with code 1"


# ---- the report ----------------------------------------------------------------------------------------


def _run(name: str, bs: int, losses: list[float] | None) -> RunTimings:
    eps = [Epoch(i, array("d", [0.1] * 20), array("l", range(1, 21)), epoch_s=2.0) for i in range(1, 4)]
    run = RunTimings(name=name, computing_system="g4dn-1", batch_size=bs, run_index=0, epochs=eps)
    if losses is None:
        run.extra[mllog.METRIC_UNMATCHED] = [{"metric": "val_loss", "regex": "val loss ([0-9.]+)"}]
    else:
        run.extra[mllog.METRIC_SERIES] = {"val_loss": {str(i): v for i, v in enumerate(losses, start=1)}}
    return run


def test_a_loss_target_is_reached_going_below_it_and_a_metric_that_never_matched_is_said(tmp_path):
    root = tmp_path / "grid"
    (root / layout.RUNS_DIR).mkdir(parents=True)
    runs = [
        _run("result-g4dn-1-64-e0", 64, [2.0, 1.1, 0.9]),
        _run("result-g4dn-1-128-e0", 128, [2.5, 2.0, 1.5]),
        _run("result-g4dn-1-256-e0", 256, None),
    ]
    for r in runs:
        (root / layout.run_record_path(r.name)).write_text(json.dumps(r.to_record()))
    spec = {"name": "q", "workload": {"epochs": 3}, "target": {"metric": "val_loss", "value": 1.2}}
    (root / layout.SPEC_JSON).write_text(json.dumps(spec))
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = {r["batch_size"]: r for r in csv.DictReader(io.StringIO((root / layout.SWEEP_CSV).read_text()))}
    assert float(rows["64"]["time_to_target_s"]) == pytest.approx(4.0)  # below 1.2 at the end of epoch 2
    assert rows["128"]["quality"] == (
        "did not reach target: val_loss <= 1.2 not reached by 1 of 1 runs (best val_loss 1.5)"
    )
    assert rows["256"]["quality"] == (
        "did not reach target: val_loss <= 1.2 not reached by 1 of 1 runs "
        "(metric val_loss never matched the output)"
    )
    summary = json.loads((root / layout.SWEEP_JSON).read_text())
    assert summary["recommendation"]["target"] == "val_loss <= 1.2"
    html = (root / layout.REPORT_HTML).read_text()
    assert "metric val_loss never matched the output" in html


def test_parsing_a_log_gives_the_run_its_named_metrics_per_epoch(tmp_path):
    log = tmp_path / "result-g4dn-1-64-e0.log"
    step = mllog.format_step_line(1, 1, 0.1, 0.01, 0.09, 0)
    lines = [
        _epoch_line(mllog.EPOCH_START, 1),
        step,
        mllog.format_line(mllog.METRIC_PREFIX + "val_loss", 1.5, metadata={"rank": 0, "epoch_num": 1}),
        mllog.format_line(mllog.METRIC_PREFIX + "val_loss", 9.9, metadata={"rank": 1, "epoch_num": 1}),
        _epoch_line(mllog.EPOCH_STOP, 1),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert parse(log).extra[mllog.METRIC_SERIES] == {"val_loss": {"1": 1.5}}  # rank 0's
